// SPDX-License-Identifier: Apache-2.0

package otlp

import (
	"math"
	"reflect"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"google.golang.org/protobuf/proto"

	"github.com/kernel-exporter/kernel_exporter/collector"
)

var (
	tStart = time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	tRead  = tStart.Add(time.Minute)
)

func convertOne(t *testing.T, f *collector.Family) metricdata.Metrics {
	t.Helper()
	c := converter{now: tRead.Add(time.Second), procStart: tStart.Add(-time.Hour)}
	m, ok := c.family(&collector.Snapshot{Config: "test", Families: []*collector.Family{f}, Start: tStart, Time: tRead}, f)
	if !ok {
		t.Fatalf("family %s not converted", f.Name)
	}
	if m.Name != f.Name || m.Description != f.Help {
		t.Fatalf("name %q help %q, want %q %q", m.Name, m.Description, f.Name, f.Help)
	}
	return m
}

func set(kv ...string) attribute.Set {
	var out []attribute.KeyValue
	for i := 0; i < len(kv); i += 2 {
		out = append(out, attribute.String(kv[i], kv[i+1]))
	}
	return attribute.NewSet(out...)
}

func TestConvertCounter(t *testing.T) {
	f := collector.NewFamily("syscalls_total", "Syscalls.", collector.KindCounter, []string{"syscall", "errno"}, nil, []collector.SeriesData{
		{Labels: []string{"openat", "ENOENT"}, Value: 7},
		{Labels: []string{"read", ""}, Value: 12345678901},
	})
	m := convertOne(t, f)
	want := metricdata.Sum[float64]{Temporality: metricdata.CumulativeTemporality, IsMonotonic: true, DataPoints: []metricdata.DataPoint[float64]{
		{Attributes: set("syscall", "openat", "errno", "ENOENT"), StartTime: tStart, Time: tRead, Value: 7},
		// an empty label value is no attribute, as in Prometheus
		{Attributes: set("syscall", "read"), StartTime: tStart, Time: tRead, Value: 12345678901},
	}}
	if !reflect.DeepEqual(m.Data, want) {
		t.Fatalf("got %+v\nwant %+v", m.Data, want)
	}
}

func TestConvertGauge(t *testing.T) {
	f := collector.NewFamily("queue_depth", "Depth.", collector.KindGauge, []string{"dev"}, nil, []collector.SeriesData{
		{Labels: []string{"sda"}, Value: -3.5},
	})
	m := convertOne(t, f)
	want := metricdata.Gauge[float64]{DataPoints: []metricdata.DataPoint[float64]{
		{Attributes: set("dev", "sda"), Time: tRead, Value: -3.5},
	}}
	if !reflect.DeepEqual(m.Data, want) {
		t.Fatalf("got %+v\nwant %+v", m.Data, want)
	}
}

// cumulative turns per-bucket counts into Family.Histogram's cumulative
// ones.
func cumulative(per ...uint64) []uint64 {
	out := make([]uint64, len(per))
	var run uint64
	for i, n := range per {
		run += n
		out[i] = run
	}
	return out
}

func pow2(lo, hi int, mult float64) []float64 {
	var out []float64
	for k := lo; k <= hi; k++ {
		out = append(out, math.Ldexp(mult, k))
	}
	return out
}

// data returns m's data as an A, or fails t.
func data[A metricdata.Aggregation](t *testing.T, m metricdata.Metrics) A {
	t.Helper()
	d, ok := m.Data.(A)
	if !ok {
		t.Fatalf("%s: got %T, want %T", m.Name, m.Data, d)
	}
	return d
}

func expPoint(t *testing.T, m metricdata.Metrics) []metricdata.ExponentialHistogramDataPoint[float64] {
	t.Helper()
	d := data[metricdata.ExponentialHistogram[float64]](t, m)
	if d.Temporality != metricdata.CumulativeTemporality {
		t.Fatalf("temporality %v", d.Temporality)
	}
	return d.DataPoints
}

// exp2 with multiplier 1: le=2^k holds (2^(k-1), 2^k], scale-0 index k-1.
func TestConvertExp2(t *testing.T) {
	up := pow2(0, 3, 1) // le 1, 2, 4, 8
	f := collector.NewFamily("lat", "Latency.", collector.KindHistogram, []string{"op"}, up, []collector.SeriesData{
		// 1 observation above 8 (+Inf only)
		{Labels: []string{"read"}, Cum: cumulative(3, 0, 5, 2), Count: 11, Sum: 40},
		{Labels: []string{"write"}, Cum: cumulative(0, 0, 0, 0), Count: 0, Sum: 0},
		{Labels: []string{"sync"}, Cum: cumulative(0, 4, 0, 0), Count: 4, Sum: 6},
	})
	pts := expPoint(t, convertOne(t, f))
	want := []metricdata.ExponentialHistogramDataPoint[float64]{
		{Attributes: set("op", "read"), StartTime: tStart, Time: tRead, Count: 11, Sum: 40,
			PositiveBucket: metricdata.ExponentialBucket{Offset: -1, Counts: []uint64{3, 0, 5, 2, 1}}},
		{Attributes: set("op", "write"), StartTime: tStart, Time: tRead,
			PositiveBucket: metricdata.ExponentialBucket{Offset: -1, Counts: []uint64{}}},
		// trailing empty buckets are implicit
		{Attributes: set("op", "sync"), StartTime: tStart, Time: tRead, Count: 4, Sum: 6,
			PositiveBucket: metricdata.ExponentialBucket{Offset: -1, Counts: []uint64{0, 4}}},
	}
	if !reflect.DeepEqual(pts, want) {
		t.Fatalf("got %+v\nwant %+v", pts, want)
	}
}

// exp2 with a power-of-two multiplier (2^-10: ~µs to ~ms): bounds
// 2^-10..2^-7, le=2^-10 is index -11.
func TestConvertExp2PowerOfTwoMultiplier(t *testing.T) {
	up := pow2(0, 3, 1.0/1024)
	f := collector.NewFamily("lat", "", collector.KindHistogram, nil, up, []collector.SeriesData{
		{Labels: []string{}, Cum: cumulative(1, 2, 3, 4), Count: 10, Sum: 0.01},
	})
	pts := expPoint(t, convertOne(t, f))
	if pts[0].Scale != 0 || pts[0].ZeroCount != 0 || pts[0].PositiveBucket.Offset != -11 ||
		!reflect.DeepEqual(pts[0].PositiveBucket.Counts, []uint64{1, 2, 3, 4}) || pts[0].Count != 10 || pts[0].Sum != 0.01 {
		t.Fatalf("got %+v", pts[0])
	}
	if pts[0].Attributes.Len() != 0 {
		t.Fatalf("attributes %v, want none", pts[0].Attributes)
	}
}

// exp2zero: the bucket le=0 is the zero count; le=1 (slot 1) index -1.
func TestConvertExp2Zero(t *testing.T) {
	up := append([]float64{0}, pow2(0, 2, 1)...) // le 0, 1, 2, 4
	f := collector.NewFamily("sizes", "", collector.KindHistogram, []string{"dev"}, up, []collector.SeriesData{
		{Labels: []string{"sda"}, Cum: cumulative(4, 1, 2, 3), Count: 10, Sum: 15},
	})
	pts := expPoint(t, convertOne(t, f))
	want := metricdata.ExponentialHistogramDataPoint[float64]{Attributes: set("dev", "sda"), StartTime: tStart, Time: tRead,
		Count: 10, Sum: 15, ZeroCount: 4, PositiveBucket: metricdata.ExponentialBucket{Offset: -1, Counts: []uint64{1, 2, 3}}}
	if !reflect.DeepEqual(pts[0], want) {
		t.Fatalf("got %+v\nwant %+v", pts[0], want)
	}
}

// Bounds that no scale-0 layout matches exactly keep explicit bounds:
// exp2 with multiplier 1e-6, linear, fixed.
func TestConvertExplicit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		upper []float64
	}{
		{"exp2 1e-6", pow2(0, 3, 1e-6)},
		{"linear", []float64{0, 1, 2, 3}},
		{"linear 10", []float64{10, 20, 30, 40}},
		{"fixed", []float64{0.5, 1, 4, 16}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := collector.NewFamily("h", "", collector.KindHistogram, []string{"k"}, tc.upper, []collector.SeriesData{
				{Labels: []string{"a"}, Cum: cumulative(1, 0, 2, 3), Count: 9, Sum: 21.5},
			})
			d := data[metricdata.Histogram[float64]](t, convertOne(t, f))
			if d.Temporality != metricdata.CumulativeTemporality {
				t.Fatalf("temporality %v", d.Temporality)
			}
			pts := d.DataPoints
			want := []metricdata.HistogramDataPoint[float64]{{Attributes: set("k", "a"), StartTime: tStart, Time: tRead,
				Count: 9, Sum: 21.5, Bounds: tc.upper, BucketCounts: []uint64{1, 0, 2, 3, 3}}}
			if !reflect.DeepEqual(pts, want) {
				t.Fatalf("got %+v\nwant %+v", pts, want)
			}
		})
	}
}

func TestExponentialLayout(t *testing.T) {
	for _, tc := range []struct {
		upper []float64
		want  ExpLayout
		ok    bool
	}{
		{pow2(0, 5, 1), ExpLayout{Offset: -1}, true},
		{pow2(3, 5, 1), ExpLayout{Offset: 2}, true},    // le=8: (4, 8] index 2
		{pow2(0, 5, 1024), ExpLayout{Offset: 9}, true}, // le=1024: index 9
		{pow2(0, 5, 1.0/(1<<20)), ExpLayout{Offset: -21}, true},
		{append([]float64{0}, pow2(0, 5, 1)...), ExpLayout{Zero: true, Offset: -1}, true},
		{append([]float64{0}, pow2(4, 5, 1)...), ExpLayout{Zero: true, Offset: 3}, true},
		{[]float64{1}, ExpLayout{Offset: -1}, true},
		{[]float64{0}, ExpLayout{}, false},
		{nil, ExpLayout{}, false},
		{pow2(0, 5, 1e-6), ExpLayout{}, false},
		{pow2(0, 5, 3), ExpLayout{}, false},
		{[]float64{1, 2, 8}, ExpLayout{}, false}, // a gap
		{[]float64{1, 2, 3, 4}, ExpLayout{}, false},
		{[]float64{0, 1, 2, 3}, ExpLayout{}, false},
		{[]float64{1, 2, math.Inf(1)}, ExpLayout{}, false},
		{[]float64{-1, 1, 2}, ExpLayout{}, false},
	} {
		got, ok := ExponentialLayout(tc.upper)
		if ok != tc.ok || (ok && got != tc.want) {
			t.Errorf("ExponentialLayout(%v) = %+v, %v; want %+v, %v", tc.upper, got, ok, tc.want, tc.ok)
		}
	}
}

func TestConvertReadError(t *testing.T) {
	f := collector.NewFamily("h", "", collector.KindCounter, nil, nil, nil)
	f.Err = errTest
	c := converter{now: tRead}
	if _, ok := c.family(&collector.Snapshot{}, f); ok {
		t.Fatal("a family whose read failed was converted")
	}
}

// Hand-built snapshots carry no times: the push's time is used.
func TestConvertNoTimes(t *testing.T) {
	f := collector.NewFamily("c", "", collector.KindCounter, nil, nil, []collector.SeriesData{{Labels: []string{}, Value: 1}})
	c := converter{now: tRead}
	m, _ := c.family(&collector.Snapshot{}, f)
	p := m.Data.(metricdata.Sum[float64]).DataPoints[0]
	if !p.StartTime.Equal(tRead) || !p.Time.Equal(tRead) {
		t.Fatalf("start %v time %v, want %v", p.StartTime, p.Time, tRead)
	}
}

func TestConvertGathered(t *testing.T) {
	created := tStart.Add(time.Second)
	var mfs []*dto.MetricFamily
	text := []string{
		`name:"kernel_exporter_config_up" help:"Up." type:GAUGE metric:{label:{name:"config" value:"timers"} gauge:{value:1}}`,
		`name:"kernel_exporter_otlp_exports_total" help:"Pushes." type:COUNTER metric:{label:{name:"result" value:"success"} counter:{value:3}}`,
		`name:"x_untyped" type:UNTYPED metric:{untyped:{value:2}}`,
		`name:"x_seconds" type:HISTOGRAM metric:{histogram:{sample_count:5 sample_sum:1.5 bucket:{cumulative_count:1 upper_bound:0.1} bucket:{cumulative_count:4 upper_bound:1} bucket:{cumulative_count:5 upper_bound:inf}}}`,
		`name:"go_gc_duration_seconds" type:SUMMARY metric:{summary:{sample_count:2 sample_sum:0.5 quantile:{quantile:0.5 value:0.2}}}`,
	}
	for _, s := range text {
		mf := &dto.MetricFamily{}
		if err := prototextUnmarshal(s, mf); err != nil {
			t.Fatal(err)
		}
		mfs = append(mfs, mf)
	}
	mfs[1].Metric[0].Counter.CreatedTimestamp = timestamp(created)
	c := converter{now: tRead, procStart: tStart}
	var got []metricdata.Aggregation
	for _, mf := range mfs {
		m, ok := c.gathered(mf)
		if !ok || m.Name != mf.GetName() || m.Description != mf.GetHelp() {
			t.Fatalf("%s: %v %+v", mf.GetName(), ok, m)
		}
		got = append(got, m.Data)
	}
	want := []metricdata.Aggregation{
		metricdata.Gauge[float64]{DataPoints: []metricdata.DataPoint[float64]{{Attributes: set("config", "timers"), Time: tRead, Value: 1}}},
		metricdata.Sum[float64]{Temporality: metricdata.CumulativeTemporality, IsMonotonic: true,
			DataPoints: []metricdata.DataPoint[float64]{{Attributes: set("result", "success"), StartTime: created, Time: tRead, Value: 3}}},
		metricdata.Gauge[float64]{DataPoints: []metricdata.DataPoint[float64]{{Attributes: set(), Time: tRead, Value: 2}}},
		metricdata.Histogram[float64]{Temporality: metricdata.CumulativeTemporality, DataPoints: []metricdata.HistogramDataPoint[float64]{
			{Attributes: set(), StartTime: tStart, Time: tRead, Count: 5, Sum: 1.5, Bounds: []float64{0.1, 1}, BucketCounts: []uint64{1, 3, 1}}}},
		metricdata.Summary{DataPoints: []metricdata.SummaryDataPoint{{Attributes: set(), StartTime: tStart, Time: tRead, Count: 2, Sum: 0.5,
			QuantileValues: []metricdata.QuantileValue{{Quantile: 0.5, Value: 0.2}}}}},
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("%s: got %+v\nwant %+v", mfs[i].GetName(), got[i], want[i])
		}
	}
	if _, ok := c.gathered(&dto.MetricFamily{Name: proto.String("g"), Type: dto.MetricType_GAUGE_HISTOGRAM.Enum()}); ok {
		t.Error("a gauge histogram was converted")
	}
}

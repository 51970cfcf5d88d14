// SPDX-License-Identifier: Apache-2.0

package exposition

import (
	"bytes"
	"io"
	"math"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/proto"

	"github.com/kernel-exporter/kernel_exporter/collector"
)

// toDTO converts f to the dto.MetricFamily that client_golang would build
// for it: labels in LabelNames order (values made valid UTF-8), classic
// buckets without +Inf, and with native set the native fields of
// f.Native computed straightforwardly (one span over buckets 1…n-1).
func toDTO(f *collector.Family, native bool) *dto.MetricFamily {
	mf := &dto.MetricFamily{Name: proto.String(f.Name), Help: proto.String(f.Help)}
	switch f.Kind {
	case collector.KindCounter:
		mf.Type = dto.MetricType_COUNTER.Enum()
	case collector.KindGauge:
		mf.Type = dto.MetricType_GAUGE.Enum()
	case collector.KindHistogram:
		mf.Type = dto.MetricType_HISTOGRAM.Enum()
	}
	for i := 0; i < f.Len(); i++ {
		m := &dto.Metric{}
		for j, v := range f.LabelValues(i) {
			m.Label = append(m.Label, &dto.LabelPair{
				Name:  proto.String(f.LabelNames[j]),
				Value: proto.String(strings.ToValidUTF8(v, "\uFFFD")),
			})
		}
		switch f.Kind {
		case collector.KindCounter:
			m.Counter = &dto.Counter{Value: proto.Float64(f.Value(i))}
		case collector.KindGauge:
			m.Gauge = &dto.Gauge{Value: proto.Float64(f.Value(i))}
		case collector.KindHistogram:
			cum, count, sum := f.Histogram(i)
			h := &dto.Histogram{SampleCount: proto.Uint64(count), SampleSum: proto.Float64(sum)}
			for k, c := range cum {
				h.Bucket = append(h.Bucket, &dto.Bucket{
					CumulativeCount: proto.Uint64(c),
					UpperBound:      proto.Float64(f.Upper[k]),
				})
			}
			if l := f.Native; native && l != nil {
				h.Schema = proto.Int32(l.Schema)
				h.ZeroThreshold = proto.Float64(l.ZeroThreshold)
				h.ZeroCount = proto.Uint64(cum[0])
				// Classic buckets 1..n-1, then one bucket for the
				// observations above the last bound, if any.
				counts := []int64{}
				for k := 1; k < len(cum); k++ {
					counts = append(counts, int64(cum[k])-int64(cum[k-1]))
				}
				if above := int64(count) - int64(cum[len(cum)-1]); above > 0 {
					counts = append(counts, above)
				}
				h.PositiveSpan = []*dto.BucketSpan{{
					Offset: proto.Int32(l.Index[1]),
					Length: proto.Uint32(uint32(len(counts))),
				}}
				var prev int64
				for _, c := range counts {
					h.PositiveDelta = append(h.PositiveDelta, c-prev)
					prev = c
				}
			}
			m.Histogram = h
		}
		mf.Metric = append(mf.Metric, m)
	}
	return mf
}

// testFamilies covers counters with 0-3 labels, gauges with special
// floats, histograms with and without a native layout, and label values
// that need escaping or are not valid UTF-8.
func testFamilies() []*collector.Family {
	odd := []string{
		``, `plain`, `with "quotes"`, `back\slash`, "new\nline", `\"\n`,
		"unicodé ☃ 🚀", "bad\xffutf8", "\xc3", "tab\there", "cr\rlf",
	}
	var oneLabel []collector.SeriesData
	for i, v := range odd {
		oneLabel = append(oneLabel, collector.SeriesData{Labels: []string{v}, Value: float64(i * 1000003)})
	}
	floats := []float64{
		0, math.Copysign(0, -1), 1, -1, 2, 0.5, 1e-7, 123456.789, 999999, -999999,
		1e6, 1234567, 1e21, 5e-324, math.MaxFloat64, math.NaN(), math.Inf(1), math.Inf(-1),
		float64(1 << 53), 1.0 / 3,
	}
	var gauge []collector.SeriesData
	for i, v := range floats {
		gauge = append(gauge, collector.SeriesData{Labels: []string{"cpu" + string(rune('0'+i%10)), odd[i%len(odd)]}, Value: v})
	}
	pow2 := []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}
	var hist []collector.SeriesData
	for i := range 4 {
		cum := make([]uint64, len(pow2))
		var c uint64
		for k := range cum {
			c += uint64((i * k * 7) % 5)
			cum[k] = c
		}
		hist = append(hist, collector.SeriesData{
			Labels: []string{odd[i+2], "x"}, Cum: cum, Count: c + uint64(i), Sum: float64(i) * 12.5,
		})
	}
	classic := []float64{0.005, 0.01, 0.1, 1, 2.5}
	return []*collector.Family{
		collector.NewFamily("test_events_total", "Events seen, with a \\ backslash,\na newline and \"quotes\".",
			collector.KindCounter, nil, nil, []collector.SeriesData{{Value: 42}}),
		collector.NewFamily("test_odd_total", "Odd label values.", collector.KindCounter,
			[]string{"value"}, nil, oneLabel),
		collector.NewFamily("test_floats", "Special floats.", collector.KindGauge,
			[]string{"cpu", "comm"}, nil, gauge),
		collector.NewFamily("test_three_labels", "A counter whose name has no _total.", collector.KindCounter,
			[]string{"a", "b", "c"}, nil, []collector.SeriesData{
				{Labels: []string{"1", "2", "3"}, Value: 7},
				{Labels: []string{"", "", ""}, Value: 0},
			}),
		collector.NewFamily("test_latency_seconds", "Native layout.", collector.KindHistogram,
			[]string{"op", "dev"}, pow2, hist),
		collector.NewFamily("test_no_labels_seconds", "Classic, no labels.", collector.KindHistogram, nil, classic,
			[]collector.SeriesData{{Cum: []uint64{1, 1, 2, 3, 3}, Count: 4, Sum: 7.75}}),
		collector.NewFamily("test_size_bytes", "Classic only.", collector.KindHistogram, []string{"disk"}, classic,
			[]collector.SeriesData{
				{Labels: []string{"sda"}, Cum: []uint64{0, 0, 0, 0, 0}},
				{Labels: []string{"sdb"}, Cum: []uint64{1, 2, 3, 1234567, 1234568}, Count: 1234570, Sum: 0.25},
			}),
	}
}

// expfmtBytes encodes families with enc (expfmt's MetricFamilyToText or
// MetricFamilyToOpenMetrics).
func expfmtBytes(t testing.TB, enc func(io.Writer, *dto.MetricFamily) error, fams ...*collector.Family) []byte {
	t.Helper()
	var buf bytes.Buffer
	for _, f := range fams {
		if err := enc(&buf, toDTO(f, false)); err != nil {
			t.Fatalf("expfmt encoding %s: %v", f.Name, err)
		}
	}
	return buf.Bytes()
}

func toText(w io.Writer, mf *dto.MetricFamily) error {
	_, err := expfmt.MetricFamilyToText(w, mf)
	return err
}

func toOpenMetrics(w io.Writer, mf *dto.MetricFamily) error {
	_, err := expfmt.MetricFamilyToOpenMetrics(w, mf)
	return err
}

// write runs Write into a buffer.
func write(t testing.TB, f expfmt.Format, gathered []*dto.MetricFamily, fams ...*collector.Family) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, f, gathered, []*collector.Snapshot{{Config: "test", Families: fams}}); err != nil {
		t.Fatalf("Write(%s): %v", f, err)
	}
	return buf.Bytes()
}

// decodeProto decodes delimited MetricFamily messages.
func decodeProto(t testing.TB, b []byte) []*dto.MetricFamily {
	t.Helper()
	dec := expfmt.NewDecoder(bytes.NewReader(b), expfmt.NewFormat(expfmt.TypeProtoDelim))
	var out []*dto.MetricFamily
	for {
		mf := &dto.MetricFamily{}
		err := dec.Decode(mf)
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("decoding protobuf family %d: %v", len(out), err)
		}
		out = append(out, mf)
	}
}

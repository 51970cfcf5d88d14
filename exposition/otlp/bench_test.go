// SPDX-License-Identifier: Apache-2.0

package otlp

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/kernel-exporter/kernel_exporter/collector"
)

// largeHistogram is a histogram of n series (two labels) with 27 exp2
// buckets of unit mult each.
func largeHistogram(n int, mult float64) *collector.Snapshot {
	up := pow2(0, 26, mult)
	data := make([]collector.SeriesData, n)
	for i := range data {
		per := make([]uint64, len(up))
		for j := range per {
			per[j] = uint64((i + j) % 7)
		}
		data[i] = collector.SeriesData{Labels: []string{fmt.Sprintf("dev%d", i%64), fmt.Sprintf("op%d", i)},
			Cum: cumulative(per...), Count: 1000, Sum: float64(i)}
	}
	f := collector.NewFamily("bio_latency_seconds", "Block I/O latency.", collector.KindHistogram, []string{"device", "op"}, up, data)
	return &collector.Snapshot{Config: "bench", Families: []*collector.Family{f}, Start: tStart, Time: tRead}
}

// BenchmarkConvertHistogram converts one histogram of 10,000 series of 27
// buckets (the default max_series), into an exponential histogram
// (multiplier 2^-20) and into explicit bounds (1e-6), and splits it into
// requests.
func BenchmarkConvertHistogram(b *testing.B) {
	for _, tc := range []struct {
		name string
		mult float64
	}{{"exponential", 1.0 / (1 << 20)}, {"explicit", 1e-6}} {
		snap := largeHistogram(10000, tc.mult)
		b.Run(tc.name, func(b *testing.B) {
			c := converter{now: tRead, procStart: tStart}
			b.ReportAllocs()
			for b.Loop() {
				m, _ := c.family(snap, snap.Families[0])
				Split([]metricdata.Metrics{m}, MaxRequestBytes)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/10000, "ns/series")
		})
	}
}

// FuzzConvertHistogram converts histograms of arbitrary bounds and counts:
// the result never panics, and its buckets always add up to the count.
// data: 8 bytes per bucket (the count added to it), bounds are
// mult·2^(i+shift) (or linear, or with a zero first bound).
func FuzzConvertHistogram(f *testing.F) {
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0}, 1.0, int8(0), uint8(0), uint64(5))
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0}, 1e-6, int8(-3), uint8(1), uint64(0))
	f.Add([]byte{255, 255, 255, 255, 255, 255, 255, 255}, 0.25, int8(100), uint8(2), uint64(math.MaxUint64))
	f.Fuzz(func(t *testing.T, data []byte, mult float64, shift int8, kind uint8, above uint64) {
		n := min(len(data)/8, 64)
		if n == 0 || !(mult > 0) || math.IsInf(mult, 0) {
			return
		}
		up := make([]float64, n)
		for i := range up {
			switch kind % 3 {
			case 0:
				up[i] = math.Ldexp(mult, i+int(shift))
			case 1:
				up[i] = mult * float64(i)
			case 2:
				up[i] = math.Ldexp(mult, i+int(shift)-1)
				if i == 0 {
					up[i] = 0
				}
			}
			if i > 0 && !(up[i] > up[i-1]) || math.IsInf(up[i], 0) {
				return // bounds must increase (config validation ensures it)
			}
		}
		per := make([]uint64, n)
		var total uint64
		for i := range per {
			per[i] = binary.LittleEndian.Uint64(data[i*8:]) >> 8 // no overflow of the total
			total += per[i]
		}
		count := total + above>>8
		fam := collector.NewFamily("h", "", collector.KindHistogram, nil, up, []collector.SeriesData{{Labels: []string{}, Cum: cumulative(per...), Count: count}})
		c := converter{now: tRead}
		m, ok := c.family(&collector.Snapshot{}, fam)
		if !ok {
			t.Fatal("not converted")
		}
		var sum uint64
		switch d := m.Data.(type) {
		case metricdata.ExponentialHistogram[float64]:
			p := d.DataPoints[0]
			sum = p.ZeroCount
			for _, c := range p.PositiveBucket.Counts {
				sum += c
			}
			if p.Scale != 0 || len(p.PositiveBucket.Counts) > n+1 {
				t.Fatalf("scale %d, %d buckets for %d bounds", p.Scale, len(p.PositiveBucket.Counts), n)
			}
		case metricdata.Histogram[float64]:
			p := d.DataPoints[0]
			if len(p.BucketCounts) != len(p.Bounds)+1 {
				t.Fatalf("%d counts for %d bounds", len(p.BucketCounts), len(p.Bounds))
			}
			for _, c := range p.BucketCounts {
				sum += c
			}
		default:
			t.Fatalf("%T", m.Data)
		}
		if sum != count {
			t.Fatalf("buckets add up to %d, count %d (bounds %v)", sum, count, up)
		}
	})
}

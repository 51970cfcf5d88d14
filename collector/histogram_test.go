// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"math"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/kernel-exporter/kernel_exporter/config"
)

func intp(v int) *int { return &v }

func TestBucketBounds(t *testing.T) {
	for _, tc := range []struct {
		name  string
		h     config.Histogram
		upper []float64
		sum   int64
	}{
		{"exp2 µs", config.Histogram{BucketType: config.BucketExp2, BucketMin: 0, BucketMax: 3, BucketMultiplier: 1e-6},
			[]float64{1e-6, 2e-6, 4e-6, 8e-6}, 4},
		{"exp2 min 2", config.Histogram{BucketType: config.BucketExp2, BucketMin: 2, BucketMax: 4},
			[]float64{4, 8, 16}, 5},
		{"exp2zero", config.Histogram{BucketType: config.BucketExp2Zero, BucketMax: 3, BucketMultiplier: 2},
			[]float64{0, 2, 4, 8}, 4},
		{"linear", config.Histogram{BucketType: config.BucketLinear, BucketMin: 1, BucketMax: 3, BucketMultiplier: 10},
			[]float64{10, 20, 30}, 4},
		{"fixed", config.Histogram{BucketType: config.BucketFixed, BucketKeys: []float64{1, 5, 10}, BucketMultiplier: 0.5, SumBucket: intp(11)},
			[]float64{0.5, 2.5, 5}, 11},
		{"fixed sum after the last key", config.Histogram{BucketType: config.BucketFixed, BucketKeys: []float64{3}},
			[]float64{3}, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBuckets(&tc.h)
			if len(b.Upper) != len(tc.upper) {
				t.Fatalf("upper = %v, want %v", b.Upper, tc.upper)
			}
			for i := range tc.upper {
				if math.Abs(b.Upper[i]-tc.upper[i]) > 1e-15 {
					t.Fatalf("upper = %v, want %v", b.Upper, tc.upper)
				}
			}
			if b.SumSlot != tc.sum {
				t.Errorf("sum slot = %d, want %d", b.SumSlot, tc.sum)
			}
		})
	}
}

func TestSlotIndex(t *testing.T) {
	exp := NewBuckets(&config.Histogram{BucketType: config.BucketExp2, BucketMin: 2, BucketMax: 4})
	fixed := NewBuckets(&config.Histogram{BucketType: config.BucketFixed, BucketKeys: []float64{1, 5, 10}, SumBucket: intp(11)})
	for _, tc := range []struct {
		b    *Buckets
		slot uint64
		want int
	}{
		{&exp, 0, 0}, {&exp, 1, 0}, {&exp, 2, 0}, {&exp, 3, 1}, {&exp, 4, 2}, {&exp, 5, -2}, {&exp, 6, -1}, {&exp, 1 << 40, -1},
		{&fixed, 1, 0}, {&fixed, 5, 1}, {&fixed, 10, 2}, {&fixed, 2, -1}, {&fixed, 11, -2}, {&fixed, 12, -1},
	} {
		if got := tc.b.Slot(tc.slot); got != tc.want {
			t.Errorf("Slot(%d) = %d, want %d", tc.slot, got, tc.want)
		}
	}
}

func TestHistogramMetric(t *testing.T) {
	b := NewBuckets(&config.Histogram{BucketType: config.BucketExp2, BucketMax: 2, BucketMultiplier: 1e-3})
	desc := prometheus.NewDesc("x_seconds", "x", []string{"op"}, nil)
	// 3 observations in slot 0, 1 in slot 2, 2 above the last bucket; sum 40 ms.
	m := b.Metric(desc, []uint64{3, 0, 1}, 6, 40, []string{"read"})
	var pb dto.Metric
	if err := m.Write(&pb); err != nil {
		t.Fatal(err)
	}
	h := pb.GetHistogram()
	if h.GetSampleCount() != 6 || math.Abs(h.GetSampleSum()-0.040) > 1e-12 {
		t.Errorf("count %d sum %v", h.GetSampleCount(), h.GetSampleSum())
	}
	want := []struct {
		le  float64
		cum uint64
	}{{0.001, 3}, {0.002, 3}, {0.004, 4}}
	for i, bk := range h.GetBucket() {
		if bk.GetUpperBound() != want[i].le || bk.GetCumulativeCount() != want[i].cum {
			t.Errorf("bucket %d: le=%v cum=%d, want %+v", i, bk.GetUpperBound(), bk.GetCumulativeCount(), want[i])
		}
	}
	if pb.GetLabel()[0].GetValue() != "read" {
		t.Errorf("labels %v", pb.GetLabel())
	}
}

// TestSlotLeaveOut: under --compat.ebpf-exporter (LeaveOut) a slot that is
// neither a bucket nor the sum is left out of the histogram, as
// ebpf_exporter reads its maps: below bucket_min, above bucket_max + 1,
// and a fixed histogram's slots that are not bucket keys. The sum of a
// fixed histogram is in the slot after its largest key, with or without.
func TestSlotLeaveOut(t *testing.T) {
	lin := NewBuckets(&config.Histogram{BucketType: config.BucketLinear, BucketMin: 1, BucketMax: 5})
	fixed := NewBuckets(&config.Histogram{BucketType: config.BucketFixed, BucketKeys: []float64{1, 10, 100}})
	for _, leave := range []bool{false, true} {
		lin.LeaveOut, fixed.LeaveOut = leave, leave
		out := -1 // +Inf only
		below := 0
		if leave {
			out, below = -3, -3
		}
		for _, tc := range []struct {
			b    *Buckets
			slot uint64
			want int
		}{
			{&lin, 0, below}, {&lin, 1, 0}, {&lin, 5, 4}, {&lin, 6, -2}, {&lin, 7, out},
			{&fixed, 0, out}, {&fixed, 1, 0}, {&fixed, 5, out}, {&fixed, 100, 2}, {&fixed, 101, -2}, {&fixed, 102, out},
		} {
			if got := tc.b.Slot(tc.slot); got != tc.want {
				t.Errorf("LeaveOut %v: Slot(%d) = %d, want %d", leave, tc.slot, got, tc.want)
			}
		}
	}
}

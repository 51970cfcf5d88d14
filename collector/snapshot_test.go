// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/cilium/ebpf"
)

// TestNativeLayout checks which bucket bounds map onto a schema 0 native
// histogram, and how.
func TestNativeLayout(t *testing.T) {
	pow := func(lo, hi int, mult float64) []float64 {
		var out []float64
		for k := lo; k <= hi; k++ {
			out = append(out, math.Ldexp(1, k)*mult)
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		upper []float64
		zero  float64
		index []int32 // nil: no layout
	}{
		{"exp2 multiplier 1", pow(0, 3, 1), 1, []int32{0, 1, 2, 3}},
		{"exp2 multiplier 2^-10", pow(2, 4, 1.0/1024), 1.0 / 256, []int32{0, -7, -6}},
		{"exp2zero", []float64{0, 1, 2, 4}, 0, []int32{0, 0, 1, 2}},
		{"exp2 multiplier 1e-6", pow(0, 3, 1e-6), 0, nil},
		{"linear", []float64{1, 2, 3, 4}, 0, nil},
		{"one bucket", []float64{1}, 0, nil},
		{"gap", []float64{1, 2, 8}, 0, nil},
	} {
		l := nativeLayout(tc.upper)
		switch {
		case tc.index == nil && l != nil:
			t.Errorf("%s: layout %+v, want none", tc.name, l)
		case tc.index != nil && l == nil:
			t.Errorf("%s: no layout", tc.name)
		case l != nil && (l.Schema != 0 || l.ZeroThreshold != tc.zero || !slices.Equal(l.Index[1:], tc.index[1:])):
			t.Errorf("%s: layout %+v, want zero threshold %v, index %v", tc.name, l, tc.zero, tc.index)
		}
	}
}

// TestSnapshotTimes checks that a read's snapshot carries the collector's
// bind time (its counters' start) and the read's time.
func TestSnapshotTimes(t *testing.T) {
	before := time.Now()
	c, _ := fixture(t, counterYAML, &ebpf.MapSpec{Name: "ops_total", Type: ebpf.Hash, KeySize: 8, ValueSize: 8, MaxEntries: 64})
	time.Sleep(10 * time.Millisecond)
	mid := time.Now()
	s1 := c.Read()
	s2 := c.Read()
	if s1.Start.Before(before) || s1.Start.After(mid) || !s2.Start.Equal(s1.Start) {
		t.Errorf("start %v, %v: want one time between %v and %v", s1.Start, s2.Start, before, mid)
	}
	if s1.Time.Before(mid) || s2.Time.Before(s1.Time) {
		t.Errorf("read times %v, %v: want after %v, in order", s1.Time, s2.Time, mid)
	}
}

package collector

import (
	"math"
	"slices"
	"testing"
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

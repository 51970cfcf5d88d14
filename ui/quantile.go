// SPDX-License-Identifier: Apache-2.0

package ui

import "math"

// Quantile returns the phi-quantile (0 < phi < 1) of a histogram given its
// bucket upper bounds and per-bucket counts (len(upper)+1 of them, the last
// one the +Inf bucket), in the unit of the bounds. The value is
// interpolated linearly within the bucket that holds rank phi*total, as
// PromQL's histogram_quantile does: bucket i spans (upper[i-1], upper[i]]
// and the first spans [0, upper[0]] (or [upper[0], upper[0]] when upper[0]
// is negative). A rank in the +Inf bucket gives the last finite bound. It
// returns NaN when the histogram is empty or the shapes do not match.
func Quantile[T uint32 | uint64](phi float64, upper []float64, counts []T) float64 {
	if len(counts) != len(upper)+1 || len(upper) == 0 || !(phi > 0 && phi < 1) {
		return math.NaN()
	}
	var total float64
	for _, c := range counts {
		total += float64(c)
	}
	if total == 0 {
		return math.NaN()
	}
	rank := phi * total
	var below float64
	for b, c := range counts {
		n := float64(c)
		if c == 0 || below+n < rank {
			below += n
			continue
		}
		if b == len(upper) {
			return upper[len(upper)-1]
		}
		lo := 0.0
		if b > 0 {
			lo = upper[b-1]
		} else if upper[0] < 0 {
			lo = upper[0]
		}
		return lo + (upper[b]-lo)*(rank-below)/n
	}
	return upper[len(upper)-1]
}

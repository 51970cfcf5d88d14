// SPDX-License-Identifier: Apache-2.0

package compare

import (
	"math"
	"slices"
)

// median is the median of xs (the mean of the middle two for an even
// count), NaN for none. It sorts xs.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// mannWhitney compares the per-host values of two sets. delta is Cliff's
// delta, P(new > base) − P(new < base) over every pair of a base and a new
// host, in [-1, 1]: 1 when every new host is above every base host. p is
// the two-sided p-value of the Mann-Whitney U test (normal approximation
// with the tie correction), 1 when either set is empty. It sorts neither
// input; O((m+n) log(m+n)).
func mannWhitney(base, new []float64) (delta, p float64) {
	m, n := len(base), len(new)
	if m == 0 || n == 0 {
		return 0, 1
	}
	type obs struct {
		v   float64
		new bool
	}
	all := make([]obs, 0, m+n)
	for _, v := range base {
		all = append(all, obs{v, false})
	}
	for _, v := range new {
		all = append(all, obs{v, true})
	}
	slices.SortFunc(all, func(a, b obs) int { return cmpFloat(a.v, b.v) })
	// Mid-ranks of ties; rank sum of the new set.
	var rankNew, tie float64
	for i := 0; i < len(all); {
		j := i
		for j < len(all) && all[j].v == all[i].v {
			j++
		}
		r := float64(i+j+1) / 2 // ranks i+1..j
		for k := i; k < j; k++ {
			if all[k].new {
				rankNew += r
			}
		}
		t := float64(j - i)
		tie += t*t*t - t
		i = j
	}
	fm, fn := float64(m), float64(n)
	u := rankNew - fn*(fn+1)/2 // pairs (new, base) with new > base, ties half
	delta = 2*u/(fm*fn) - 1
	N := fm + fn
	sigma2 := fm * fn / 12 * ((N + 1) - tie/(N*(N-1)))
	if sigma2 <= 0 {
		return delta, 1
	}
	z := (math.Abs(u-fm*fn/2) - 0.5) / math.Sqrt(sigma2)
	if z < 0 {
		z = 0
	}
	return delta, math.Erfc(z / math.Sqrt2)
}

// agreeing counts the new hosts beyond every base host in the direction of
// the change: above the base maximum when up, below the base minimum when
// down. One base host with a spike raises the bar for all; one new host
// with a spike counts once.
func agreeing(base, new []float64, up bool) int {
	if len(base) == 0 {
		return 0
	}
	lo, hi := slices.Min(base), slices.Max(base)
	n := 0
	for _, v := range new {
		if (up && v > hi) || (!up && v < lo) {
			n++
		}
	}
	return n
}

// MaxLog2Factor caps |log2(factor)| in a row's score, so that a signal
// that was zero (factor +Inf) ranks as a 1024-fold change.
const MaxLog2Factor = 10

// factorOf is new ÷ base: +Inf when base is 0 and new is not, 1 when both
// are 0.
func factorOf(base, new float64) float64 {
	switch {
	case base == new:
		return 1
	case base == 0:
		return math.Inf(1)
	}
	return new / base
}

// score ranks a row: |Cliff's delta| × |log2 factor| (capped): large only
// when the change is both big and shown by the hosts consistently.
func score(delta, factor float64) float64 {
	l := math.Abs(math.Log2(factor))
	if math.IsNaN(l) {
		return 0
	}
	return math.Abs(delta) * math.Min(l, MaxLog2Factor)
}

// A bucket is one cumulative histogram bucket: count of observations at
// most le.
type bucket struct {
	le, count float64
}

// monotone sorts bs by le and makes the counts non-decreasing, as
// histogram_quantile does (increase() of each bucket extrapolates on its
// own, so neighbours can cross by a rounding).
func monotone(bs []bucket) {
	slices.SortFunc(bs, func(a, b bucket) int { return cmpFloat(a.le, b.le) })
	for i := 1; i < len(bs); i++ {
		if bs[i].count < bs[i-1].count {
			bs[i].count = bs[i-1].count
		}
	}
}

// quantile is the q-quantile of sorted, monotone cumulative buckets, by
// linear interpolation inside the bucket as histogram_quantile does (the
// lowest bucket from 0 when its le is positive; the +Inf bucket gives the
// highest finite le). NaN without observations or a +Inf bucket.
func quantile(q float64, bs []bucket) float64 {
	if len(bs) < 2 || !math.IsInf(bs[len(bs)-1].le, 1) {
		return math.NaN()
	}
	total := bs[len(bs)-1].count
	if total <= 0 {
		return math.NaN()
	}
	rank := q * total
	i, _ := slices.BinarySearchFunc(bs, rank, func(b bucket, r float64) int {
		if b.count < r {
			return -1
		}
		return 1
	})
	if i == len(bs)-1 {
		return bs[len(bs)-2].le
	}
	lo, below := 0.0, 0.0
	if i > 0 {
		lo, below = bs[i-1].le, bs[i-1].count
	} else if bs[0].le <= 0 {
		return bs[0].le
	}
	in := bs[i].count - below
	if in <= 0 {
		return bs[i].le
	}
	return lo + (bs[i].le-lo)*(rank-below)/in
}

// distances compares two sorted, monotone cumulative histograms: ks is
// the Kolmogorov-Smirnov statistic, the largest gap between their CDFs at
// any bucket bound (0 to 1), and emd the earth mover's distance (the
// Wasserstein-1 distance between the step CDFs over the finite bounds, in
// the histogram's unit). Bounds one side lacks take its CDF at the next
// lower bound it has. NaN when either has no observations.
func distances(a, b []bucket) (ks, emd float64) {
	ta, tb := total(a), total(b)
	if ta <= 0 || tb <= 0 {
		return math.NaN(), math.NaN()
	}
	les := make([]float64, 0, len(a)+len(b))
	for _, x := range a {
		les = append(les, x.le)
	}
	for _, x := range b {
		les = append(les, x.le)
	}
	slices.Sort(les)
	les = slices.Compact(les)
	cdf := func(bs []bucket, t, le float64) float64 {
		c := 0.0
		for _, x := range bs {
			if x.le > le {
				break
			}
			c = x.count
		}
		return c / t
	}
	for i, le := range les {
		d := math.Abs(cdf(a, ta, le) - cdf(b, tb, le))
		ks = math.Max(ks, d)
		if i+1 < len(les) && !math.IsInf(les[i+1], 1) {
			emd += d * (les[i+1] - le)
		}
	}
	return ks, emd
}

func total(bs []bucket) float64 {
	if len(bs) == 0 || !math.IsInf(bs[len(bs)-1].le, 1) {
		return 0
	}
	return bs[len(bs)-1].count
}

// cmpFloat orders a and b for slices.SortFunc; unlike cmp.Compare it holds
// a NaN equal to every number, as a plain comparison does.
func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

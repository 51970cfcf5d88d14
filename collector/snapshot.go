// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"math"
	"time"
)

// Snapshot is the result of one read of a config's maps: a family per
// metric, in the config's order. It is immutable once returned, so any
// number of writers (the exposition formats, the UI) may iterate it
// concurrently, and a later read of the config never changes it.
//
// Iterating allocates nothing: label values, counter values and histogram
// buckets are served from slabs built by the read (one or two allocations
// per metric, none per series).
type Snapshot struct {
	Config   string // the config's name
	Families []*Family
	// Start is when the config's collector was bound to its freshly
	// loaded maps (collector.New): the time its counters and histograms
	// started from zero. A reload binds a new collector, so a new Start.
	Start time.Time
	// Time is when the read began. Both are zero in snapshots built by
	// hand (NewFamily's callers).
	Time time.Time
}

// Kind is a family's metric type.
type Kind uint8

const (
	KindCounter Kind = iota
	KindGauge
	KindHistogram
)

// Family is one metric of a Snapshot: its series in read order (the order
// of the map's keys, not sorted). Series i has label values LabelValues(i),
// one per LabelNames entry and in that order, and either a value (counters
// and gauges) or a histogram.
type Family struct {
	Name string
	Help string
	Kind Kind
	// LabelNames are the metric's label names in key order (the
	// histogram's bucket label is not among them: its buckets are Upper).
	LabelNames []string
	// Err is set when the read of the metric's map failed; the family then
	// has no series and should be reported as a scrape error.
	Err error

	// Histogram only: the upper bounds of the buckets, in the metric's unit
	// (seconds, bytes), strictly increasing; the +Inf bucket is implicit.
	Upper []float64
	// Native describes how the buckets map onto a native (sparse)
	// histogram; nil when they map onto none exactly.
	Native *NativeLayout

	// Series i has the label set refs[i] in chunks (see labels.go).
	chunks [][]byte
	refs   []labelRef
	values []float64 // counters and gauges: one per series
	cum    []uint64  // histograms: len(Upper) cumulative counts per series
	counts []uint64  // histograms: observations per series, +Inf included
	sums   []float64 // histograms: sum per series, in the metric's unit
}

// NativeLayout maps a histogram's classic buckets onto a native histogram
// of Schema: bucket 0, which counts everything from 0 to Upper[0], is the
// zero bucket with threshold ZeroThreshold (= Upper[0]); bucket i ≥ 1 is
// native bucket Index[i] (Index[0] is unused). Observations above the last
// bound go to one more native bucket, the index after the last: a native
// histogram has no +Inf bucket, and its buckets must add up to its count.
type NativeLayout struct {
	Schema        int32
	ZeroThreshold float64
	Index         []int32
}

// Len returns the number of series.
func (f *Family) Len() int { return len(f.refs) }

// LabelValues returns the label values of series i, in LabelNames order,
// in a new slice. Writers that go through every series use
// AppendLabelValues with a slice of their own instead.
func (f *Family) LabelValues(i int) []string {
	return f.AppendLabelValues(make([]string, 0, len(f.LabelNames)), i)
}

// AppendLabelValues appends the label values of series i, in LabelNames
// order, to dst and returns it. The strings share the snapshot's memory
// (no copy), which never changes.
func (f *Family) AppendLabelValues(dst []string, i int) []string {
	return appendValues(dst, f.chunks, f.refs[i], len(f.LabelNames))
}

// Value returns the value of series i of a counter or gauge.
func (f *Family) Value(i int) float64 { return f.values[i] }

// Histogram returns the cumulative bucket counts of series i (one per
// Upper bound; shared, do not modify), its count (which includes
// observations above the last bound) and its sum.
func (f *Family) Histogram(i int) (cum []uint64, count uint64, sum float64) {
	n := len(f.Upper)
	return f.cum[i*n : (i+1)*n : (i+1)*n], f.counts[i], f.sums[i]
}

// nativeLayout returns the native layout of bucket bounds upper, or nil.
// The layout is schema 0 when every bound after the first is a power of
// two and each is twice the one before (an exp2 or exp2zero histogram
// whose bucket_multiplier is a power of two, such as 1 or 2^-10); the
// first bucket, [0, upper[0]], becomes the zero bucket. Any other layout
// (linear, fixed, exp2 with a multiplier such as 1e-6) matches no
// exponential schema exactly, and the exposition format has no field for
// custom bounds, so it is sent as a classic histogram only.
func nativeLayout(upper []float64) *NativeLayout {
	if len(upper) < 2 || upper[0] < 0 || math.IsInf(upper[len(upper)-1], 0) {
		return nil
	}
	l := &NativeLayout{ZeroThreshold: upper[0], Index: make([]int32, len(upper))}
	for i := 1; i < len(upper); i++ {
		frac, exp := math.Frexp(upper[i])
		if frac != 0.5 {
			return nil
		}
		if i > 1 && upper[i] != 2*upper[i-1] {
			return nil
		}
		if i == 1 && upper[1]/2 < upper[0] {
			return nil
		}
		// upper = 2^(exp-1): schema 0 bucket index exp-1 covers
		// (2^(exp-2), 2^(exp-1)].
		l.Index[i] = int32(exp - 1)
	}
	return l
}

// SeriesData is one series given to NewFamily: its label values (one per
// label name) and either Value (counters, gauges) or Cum, Count and Sum
// (histograms, as Family.Histogram returns them).
type SeriesData struct {
	Labels []string
	Value  float64
	Cum    []uint64
	Count  uint64
	Sum    float64
}

// NewFamily builds a Family from plain values, for writers' tests and for
// sources other than a map read. Histograms get the native layout of upper
// (see NativeLayout). It panics when a series has the wrong number of
// label values or buckets.
func NewFamily(name, help string, kind Kind, labelNames []string, upper []float64, data []SeriesData) *Family {
	f := &Family{Name: name, Help: help, Kind: kind, LabelNames: labelNames}
	if kind == KindHistogram {
		f.Upper = upper
		f.Native = nativeLayout(upper)
	}
	var a labelArena
	var rec []byte
	for _, d := range data {
		if len(d.Labels) != len(labelNames) {
			panic("collector.NewFamily: series label values do not match the label names")
		}
		rec = appendRecord(rec[:0], d.Labels)
		f.refs = append(f.refs, a.put(rec))
		if kind != KindHistogram {
			f.values = append(f.values, d.Value)
			continue
		}
		if len(d.Cum) != len(upper) {
			panic("collector.NewFamily: series buckets do not match the bounds")
		}
		f.cum = append(f.cum, d.Cum...)
		f.counts = append(f.counts, d.Count)
		f.sums = append(f.sums, d.Sum)
	}
	f.chunks = a.chunks
	return f
}

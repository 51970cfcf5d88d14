// SPDX-License-Identifier: Apache-2.0

package term

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/kernel-exporter/kernel_exporter/collector"
	"github.com/kernel-exporter/kernel_exporter/internal/printable"
)

// BarWidth is the width of a distribution bar, in '*', for the largest
// count of a table (bcc's 40).
const BarWidth = 40

// HistSeries is one label set of a histogram over one interval.
type HistSeries struct {
	Labels []string
	// Counts holds the observations of the interval per bucket (not
	// cumulative): one per Family.Upper bound, then one for the
	// observations above the last bound.
	Counts []uint64
}

// Total returns the observations of the interval.
func (s HistSeries) Total() uint64 {
	var n uint64
	for _, c := range s.Counts {
		n += c
	}
	return n
}

// Hist turns the cumulative histograms of successive snapshots into the
// counts of each interval. The zero value is ready; it is not safe for
// concurrent use.
type Hist struct {
	prev map[string][]uint64 // family name, label values -> last bucket counts
}

// Interval returns the series of f whose counts moved since the previous
// call with the same family (a series never seen before counts from 0),
// sorted by label values (a map's read order changes from one read to the
// next; tables should not), and remembers f's counts for the next call. A
// series whose count went down (its map entry was deleted and created
// again) counts from 0 too, as a Prometheus counter reset does.
func (h *Hist) Interval(f *collector.Family) []HistSeries {
	if h.prev == nil {
		h.prev = map[string][]uint64{}
	}
	var out []HistSeries
	for i := range f.Len() {
		cum, count, _ := f.Histogram(i)
		cur := make([]uint64, len(cum)+1)
		var below uint64
		for b, c := range cum {
			cur[b] = c - min(below, c)
			below = max(below, c)
		}
		cur[len(cum)] = count - min(below, count)
		k := seriesKey(f.Name, f.LabelValues(i))
		prev := h.prev[k]
		h.prev[k] = cur
		delta := make([]uint64, len(cur))
		copy(delta, cur)
		if len(prev) == len(cur) && !reset(prev, cur) {
			for b := range delta {
				delta[b] -= prev[b]
			}
		}
		s := HistSeries{Labels: f.LabelValues(i), Counts: delta}
		if s.Total() > 0 {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b HistSeries) int { return slices.Compare(a.Labels, b.Labels) })
	return out
}

// reset reports whether any bucket of cur is below prev's.
func reset(prev, cur []uint64) bool {
	for i := range cur {
		if cur[i] < prev[i] {
			return true
		}
	}
	return false
}

// seriesKey identifies a series of a family across snapshots.
func seriesKey(name string, values []string) string {
	return name + "\xff" + strings.Join(values, "\xff")
}

// Unit is how the bounds of a histogram are printed: Name heads the
// range column ("usecs"), and a bound b (in the metric's base unit) is
// printed as b*Scale.
type Unit struct {
	Name  string
	Scale float64
}

// bccUnits are the time units of the bcc tools the bundled programs
// follow, by program, in their default mode: runqlat, biolatency and
// softirqs -d print usecs (runqlat_cgroup is runqlat per cgroup),
// funclatency nsecs. tools/runqlat.py, biolatency.py, softirqs.py and
// funclatency.py in bcc.
var bccUnits = map[string]Unit{
	"runqlat":        unitUsecs,
	"runqlat_cgroup": unitUsecs,
	"biolatency":     unitUsecs,
	"softirq":        unitUsecs,
	"funclatency":    unitNsecs,
}

// The units of a metric in seconds.
var (
	unitSecs  = Unit{"secs", 1}
	unitMsecs = Unit{"msecs", 1e3}
	unitUsecs = Unit{"usecs", 1e6}
	unitNsecs = Unit{"nsecs", 1e9}
)

// UnitOf returns the unit the bounds of f, a histogram of program, are
// printed in. A metric in seconds (name ending _seconds) is printed in the
// unit of the bcc tool program follows (bccUnits: runqlat's ns buckets in
// usecs, "1.024 -> 2.048", as runqlat prints usecs); for any other program
// in the largest of nsecs, usecs, msecs and secs in which its smallest
// positive bound is at least 1, so that the first row reads "0 -> 1"
// rather than "0 -> 0.000001". A metric in bytes (_bytes) prints bytes;
// any other metric prints its bounds as they are, headed "value". The unit
// depends on the program and the bounds only, never on the data, so it
// stays the same from one interval to the next.
func UnitOf(program string, f *collector.Family) Unit {
	name := strings.TrimSuffix(f.Name, "_total")
	switch {
	case strings.HasSuffix(name, "_bytes"):
		return Unit{"bytes", 1}
	case !strings.HasSuffix(name, "_seconds"):
		return Unit{"value", 1}
	}
	if u, ok := bccUnits[program]; ok {
		return u
	}
	smallest := math.Inf(1)
	for _, u := range f.Upper {
		if u > 0 && u < smallest {
			smallest = u
		}
	}
	units := []Unit{unitSecs, unitMsecs, unitUsecs, unitNsecs}
	for _, u := range units {
		if smallest*u.Scale >= 1-1e-9 {
			return u
		}
	}
	return units[len(units)-1]
}

// formatBound prints a bound in unit u: an integer when it is one (to 9
// significant digits, so that 2^k µs stored as 2^k × 1e-6 s prints 2^k),
// else a whole number of nanoseconds exactly (2^20 ns in usecs:
// "1048.576"), else 6 significant digits.
func formatBound(b float64, u Unit) string {
	switch {
	case math.IsInf(b, 1):
		return "inf"
	case math.IsInf(b, -1):
		return "-inf"
	}
	v := b * u.Scale
	if r := math.Round(v); math.Abs(v-r) <= 1e-9*math.Max(1, math.Abs(v)) && math.Abs(r) < 1e18 {
		return strconv.FormatFloat(r, 'f', -1, 64)
	}
	if ns := b * 1e9; u.Scale < 1e9 && math.Abs(ns) < 1e15 && math.Abs(ns-math.Round(ns)) <= 1e-6*math.Max(1, math.Abs(ns)) {
		return strconv.FormatFloat(math.Round(ns)/(1e9/u.Scale), 'f', -1, 64)
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}

// Row is one printed bucket: its range (low exclusive, high inclusive, as
// Prometheus' le), its count and its bar.
type Row struct {
	Low, High string
	Count     uint64
	Bar       int // '*' drawn
}

// Rows returns the rows of one table: the buckets from the first with a
// count to the last with one (empty leading and trailing buckets are left
// out, as bcc does; empty buckets between are kept). Bucket 0 runs from
// 0 (or -inf when its bound is not positive) to Upper[0]; bucket i from
// Upper[i-1] to Upper[i]; the last, above the last bound, to inf. The bar
// of a count c is floor(c × BarWidth / largest count), as bcc draws it.
func Rows(upper []float64, counts []uint64, u Unit) []Row {
	first, last := -1, -1
	var most uint64
	for i, c := range counts {
		if c == 0 {
			continue
		}
		if first < 0 {
			first = i
		}
		last = i
		most = max(most, c)
	}
	if first < 0 {
		return nil
	}
	rows := make([]Row, 0, last-first+1)
	for i := first; i <= last; i++ {
		low, high := math.Inf(-1), math.Inf(1)
		if i > 0 {
			low = upper[i-1]
		} else if len(upper) > 0 && upper[0] > 0 {
			low = 0
		}
		if i < len(upper) {
			high = upper[i]
		}
		bar := int(float64(counts[i]) * BarWidth / float64(most))
		rows = append(rows, Row{Low: formatBound(low, u), High: formatBound(high, u), Count: counts[i], Bar: bar})
	}
	return rows
}

// LabelHeader is a table's header line: "name = value" per label, joined
// by ", " ("device = vda, operation = read"); "" for a metric without
// labels. Names and values are made printable, values cut to
// MaxLabelWidth.
func LabelHeader(names, values []string) string {
	return joinLabels(names, values, " = ", ", ")
}

// joinLabels joins name<eq>value pairs with sep, names made printable and
// values cut to MaxLabelWidth.
func joinLabels(names, values []string, eq, sep string) string {
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = printable.String(n) + eq + labelValue(values[i])
	}
	return strings.Join(parts, sep)
}

// WriteHist writes the tables of one histogram family of program over one
// interval, in UnitOf(program, f):
// per series (in the order given) its label header when the metric has
// labels, the column header ("     usecs               : count     distribution")
// and its rows, bcc's layout: the range right-aligned and left-aligned in
// columns at least 10 wide around " -> ", the count in a column at least 8
// wide, the bar between '|' (the column header's "distribution" starts
// where the bars do, as in bcc's Python tools). Tables are separated by a blank line. With no
// series, it writes "(no events)".
func WriteHist(w io.Writer, program string, f *collector.Family, series []HistSeries) error {
	u := UnitOf(program, f)
	var b strings.Builder
	if len(series) == 0 {
		b.WriteString("(no events)\n")
	}
	for n, s := range series {
		if n > 0 {
			b.WriteByte('\n')
		}
		if h := LabelHeader(f.LabelNames, s.Labels); h != "" {
			b.WriteString(h + "\n")
		}
		rows := Rows(f.Upper, s.Counts, u)
		lw, hw, cw := 10, 10, 8
		for _, r := range rows {
			lw, hw = max(lw, len(r.Low)), max(hw, len(r.High))
			cw = max(cw, len(strconv.FormatUint(r.Count, 10)))
		}
		fmt.Fprintf(&b, "%*s%-*s : %-*s distribution\n", lw-5, "", hw+9, u.Name, cw+1, "count")
		for _, r := range rows {
			fmt.Fprintf(&b, "%*s -> %-*s : %-*d |%-*s|\n", lw, r.Low, hw, r.High, cw, r.Count, BarWidth, strings.Repeat("*", r.Bar))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

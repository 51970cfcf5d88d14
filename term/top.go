// SPDX-License-Identifier: Apache-2.0

package term

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/kernel-exporter/kernel_exporter/collector"
	"github.com/kernel-exporter/kernel_exporter/internal/printable"
)

// TopRow is one counter series over one interval.
type TopRow struct {
	Metric string
	// Labels is the label set as shown: name=value pairs joined by spaces,
	// printable, values cut to MaxLabelWidth.
	Labels string
	// Rate is the increase per second over the interval; Total the value.
	Rate, Total float64
}

// Rates turns the counters of successive snapshots into rates. The zero
// value is ready; it is not safe for concurrent use.
type Rates struct {
	prev map[string]float64
}

// Rows returns one row per series of every counter family in fams (gauges
// and histograms are left out), with its rate over elapsed since the
// previous call: (value - previous value) / elapsed seconds. A series not
// seen before, or whose value went down (a reset), counts from 0 as
// Prometheus' rate does. The rows are sorted with SortRows. Families whose
// read failed are left out.
func (r *Rates) Rows(fams []*collector.Family, elapsed time.Duration) []TopRow {
	if r.prev == nil {
		r.prev = map[string]float64{}
	}
	secs := elapsed.Seconds()
	var rows []TopRow
	for _, f := range fams {
		if f.Kind != collector.KindCounter || f.Err != nil {
			continue
		}
		for i := range f.Len() {
			v := f.Value(i)
			k := seriesKey(f.Name, f.LabelValues(i))
			prev, seen := r.prev[k]
			r.prev[k] = v
			if !seen || v < prev {
				prev = 0
			}
			rate := 0.0
			if secs > 0 {
				rate = (v - prev) / secs
			}
			rows = append(rows, TopRow{Metric: printable.String(f.Name), Labels: labelPairs(f.LabelNames, f.LabelValues(i)), Rate: rate, Total: v})
		}
	}
	SortRows(rows)
	return rows
}

// labelPairs is a label set as shown in top: name=value joined by spaces.
func labelPairs(names, values []string) string {
	return joinLabels(names, values, "=", " ")
}

// SortRows sorts rows by rate, highest first, then by total, highest
// first, then by metric and labels.
func SortRows(rows []TopRow) {
	slices.SortStableFunc(rows, func(a, b TopRow) int {
		if c := cmp.Compare(b.Rate, a.Rate); c != 0 {
			return c
		}
		if c := cmp.Compare(b.Total, a.Total); c != 0 {
			return c
		}
		if c := strings.Compare(a.Metric, b.Metric); c != 0 {
			return c
		}
		return strings.Compare(a.Labels, b.Labels)
	})
}

// TopHeader is the first line of a top frame.
type TopHeader struct {
	Program  string
	Interval time.Duration
	Time     time.Time
	// Columns names the rate, total, metric and labels columns; empty
	// ones are RATE/s, TOTAL, METRIC and LABELS. Unit names the rows in
	// the first line ("series" when empty).
	Columns [4]string
	Unit    string
}

// WriteTop writes one top frame of at most height lines, each cut to width
// runes (0: not cut):
//
//	kernel_exporter top syscalls  interval 1s  15:04:05  312 series
//	    RATE/s         TOTAL  METRIC                        LABELS
//	    5012.0         25060  kernel_syscall_errors_total   syscall=rmdir errno=ENOENT
//	... 12 more
//
// The rates have one decimal, the totals none when they are integers. When
// the rows do not fit, the last line says how many were left out. The
// frame has no escape sequences (the caller clears the screen); lines end
// with "\n", which a terminal in its normal mode turns into CR LF.
func WriteTop(w io.Writer, h TopHeader, rows []TopRow, height, width int) error {
	height = max(height, 3)
	var b strings.Builder
	line := func(s string) {
		if width > 0 {
			s = Truncate(s, width)
		}
		b.WriteString(s + "\n")
	}
	cols := h.Columns
	for i, d := range [4]string{"RATE/s", "TOTAL", "METRIC", "LABELS"} {
		if cols[i] == "" {
			cols[i] = d
		}
	}
	unit := h.Unit
	if unit == "" {
		unit = "series"
	}
	line(fmt.Sprintf("kernel_exporter top %s  interval %v  %s  %d %s", printable.String(h.Program), h.Interval, h.Time.Format(time.TimeOnly), len(rows), unit))
	show := rows
	if len(rows) > height-2 {
		show = rows[:height-3]
	}
	mw := utf8.RuneCountInString(cols[2])
	for _, r := range show {
		mw = max(mw, utf8.RuneCountInString(r.Metric))
	}
	line(strings.TrimRight(fmt.Sprintf("%10s %13s  %-*s  %s", cols[0], cols[1], mw, cols[2], cols[3]), " "))
	for _, r := range show {
		line(strings.TrimRight(fmt.Sprintf("%10s %13s  %-*s  %s", strconv.FormatFloat(r.Rate, 'f', 1, 64), formatTotal(r.Total), mw, r.Metric, r.Labels), " "))
	}
	if len(show) < len(rows) {
		line(fmt.Sprintf("... %d more", len(rows)-len(show)))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// formatTotal prints a counter's value: as an integer when it is one.
func formatTotal(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e18 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}

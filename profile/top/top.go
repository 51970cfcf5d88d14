// SPDX-License-Identifier: Apache-2.0

// Package top is kernel_exporter top cpu: the functions the CPUs are in,
// hottest first, redrawn every interval as perf top does, from a profile
// session (package profile) drawn with package term's top machinery.
package top

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/kernel-exporter/kernel_exporter/internal/printable"
	"github.com/kernel-exporter/kernel_exporter/profile"
	"github.com/kernel-exporter/kernel_exporter/profile/symbolize"
	"github.com/kernel-exporter/kernel_exporter/term"
)

// Target is the argument of the top command that shows the hottest
// functions (kernel_exporter top cpu) rather than a program's counters.
const Target = "cpu"

// Options configure Run.
type Options struct {
	// Frequency of samples per CPU (DefaultFrequency when 0) and Filter,
	// as for a Session.
	Frequency int
	Filter    profile.Filter
	// Interval between frames; Count of frames (0: until ctx is done).
	Interval time.Duration
	Count    int
	// Stdout gets the frames (redrawn in place on a terminal, see
	// term.Screen); Stderr errors.
	Stdout, Stderr io.Writer
	Symbolizer     *symbolize.Symbolizer
	Logger         *slog.Logger
}

// Run samples every CPU and shows, every Interval, the functions the
// samples of that interval were in (the innermost frame: where the CPU
// was), hottest first, as perf top does: samples per second, samples since
// the start, the function, its share of the interval's samples and its
// module ("[k]" for the kernel). It returns 0 when ctx is done or Count
// frames were shown, 1 on failure (named on Stderr). Nothing stays
// attached when it returns.
func Run(ctx context.Context, o Options) int {
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	scr := term.NewScreen(o.Stdout, fmt.Sprintf("kernel_exporter top %s  interval %v: sampling the first interval...", Target, o.Interval))
	totals := map[leafKey]int64{}
	frames := 0
	var drawErr error
	show := func(p *profile.Profile) {
		if ctx.Err() != nil {
			return // the last, partial interval read after Ctrl-C or --count
		}
		now := time.Now()
		rows := topRows(p, totals, p.Duration.Seconds())
		height, width := scr.Size()
		var b strings.Builder
		_ = term.WriteTop(&b, term.TopHeader{Program: Target, Interval: o.Interval, Time: now, Unit: "functions",
			Columns: [4]string{"SAMPLES/s", "TOTAL", "FUNCTION", "SHARE   MODULE"}}, rows, height, width)
		if err := scr.Draw(b.String()); err != nil {
			drawErr = err
			cancel()
		}
		if frames++; o.Count > 0 && frames >= o.Count {
			cancel()
		}
	}
	if o.Symbolizer == nil {
		o.Symbolizer = profile.CommandSymbolizer(o.Logger)
	}
	s, err := profile.NewSession(profile.Options{Kind: profile.CPU, Frequency: o.Frequency, Filter: o.Filter, Interval: o.Interval,
		Discard: true, OnInterval: show, Symbolizer: o.Symbolizer, Logger: o.Logger})
	if err != nil {
		scr.Close()
		fmt.Fprintf(o.Stderr, "kernel_exporter top %s: %v\n", Target, err)
		return 2
	}
	_, err = s.Run(ctx)
	scr.Close()
	if err == nil {
		err = drawErr
	}
	if err != nil {
		fmt.Fprintf(o.Stderr, "kernel_exporter top %s: %v\n", Target, err)
		return 1
	}
	return 0
}

type leafKey struct {
	kernel           bool
	function, module string
}

// topRows returns one row per innermost function of p's samples, with its
// rate over elapsed seconds and its total since the first interval (kept
// in totals).
func topRows(p *profile.Profile, totals map[leafKey]int64, elapsed float64) []term.TopRow {
	interval := map[leafKey]int64{}
	var all int64
	for i := range p.Samples {
		s := &p.Samples[i]
		k := leafKey{function: "[no stack]"}
		if len(s.Stack) > 0 {
			f := s.Stack[0]
			k = leafKey{kernel: f.Kernel, function: f.Function, module: f.Module}
		}
		interval[k] += s.Value
		all += s.Value
	}
	rows := make([]term.TopRow, 0, len(interval))
	for k, v := range interval {
		totals[k] += v
		where := "[k]"
		if !k.kernel {
			where = path.Base(k.module)
			if k.module == "" {
				where = "?"
			}
		}
		share := 0.0
		if all > 0 {
			share = 100 * float64(v) / float64(all)
		}
		rate := 0.0
		if elapsed > 0 {
			rate = float64(v) / elapsed
		}
		rows = append(rows, term.TopRow{
			Metric: printable.String(k.function),
			Labels: fmt.Sprintf("%5s%%  %s", strconv.FormatFloat(share, 'f', 1, 64), printable.String(where)),
			Rate:   rate, Total: float64(totals[k]),
		})
	}
	term.SortRows(rows)
	return rows
}

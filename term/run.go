// SPDX-License-Identifier: Apache-2.0

package term

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/collector"
	"github.com/kernel-exporter/kernel_exporter/exporter"
	"github.com/kernel-exporter/kernel_exporter/internal/printable"
	"github.com/kernel-exporter/kernel_exporter/runcount"
)

// Exit codes returned by Run.
const (
	// ExitOK: the intervals ran until --count or Ctrl-C.
	ExitOK = 0
	// ExitFailed: the program did not load, has no metric of the kind the
	// command shows (or not the one asked for), went down, or the output
	// could not be written.
	ExitFailed = 1
)

// DefaultRows is the height of top's frame when standard output is not a
// terminal.
const DefaultRows = 24

// ANSI sequences top writes on a terminal: the alternate screen (left on
// exit, so the shell's screen comes back as it was), cursor hidden while
// drawing, and clear-and-home before each frame.
const (
	enterScreen = "\x1b[?1049h\x1b[?25l"
	leaveScreen = "\x1b[?25h\x1b[?1049l"
	clearScreen = "\x1b[H\x1b[2J"
)

// Options configure Run.
type Options struct {
	// Command is CommandHist or CommandTop.
	Command string
	// Program is the config's name (exporter.Source.Name); Metric, for
	// hist, one histogram of it ("" for all): its full name
	// (kernel_bio_latency_seconds) or the name without the namespace
	// (bio_latency_seconds).
	Program, Metric string
	// Interval between reads; Count of intervals printed (0: until ctx
	// is done). CheckFlags bounds them.
	Interval time.Duration
	Count    int
	// Stdout gets the tables or frames; when it is a terminal (an *os.File
	// TIOCGWINSZ answers on), top redraws in place and fits its size.
	// Stderr gets errors.
	Stdout, Stderr io.Writer
	// AfterLoad, when set, runs once the load has ended (kernel_exporter
	// drops its capabilities there, as serve does).
	AfterLoad func()
	Logger    *slog.Logger
	// Now is the clock (nil: time.Now), for tests.
	Now func() time.Time
}

// Run is the hist or top command. It starts exp (whose only source is
// o.Program), waits for the load to end, reads a baseline, then every
// o.Interval reads again and prints the interval (hist: WriteHist per
// histogram, then the programs that ran 0 times in it; top: WriteTop),
// o.Count times or until ctx is done (Ctrl-C).
// It returns ExitOK or ExitFailed; on return the terminal is restored and
// exp is closed, which detaches and unloads every program and map.
func Run(ctx context.Context, exp *exporter.Exporter, o Options) int {
	if o.Now == nil {
		o.Now = time.Now
	}
	fail := func(format string, args ...any) int {
		fmt.Fprintf(o.Stderr, "kernel_exporter %s: %s\n", o.Command, fmt.Sprintf(format, args...))
		return ExitFailed
	}
	defer exp.Close()
	exp.Start(ctx)
	<-exp.Loaded()
	if ctx.Err() != nil {
		return fail("interrupted while loading %s", o.Program)
	}
	for _, st := range exp.Status.States() {
		if !st.Up {
			return fail("config %s (%s) failed: %s", printable.String(st.Name), printable.String(st.Source), printable.String(st.Reason))
		}
	}
	var runs *runcount.Window
	if o.Command == CommandHist {
		// Run counts per interval: statistics on before the capabilities
		// go (BPF_ENABLE_STATS needs CAP_SYS_ADMIN), off when Run returns.
		var err error
		runs, err = runcount.Enable(exp.Status)
		defer runs.Close()
		if err != nil && o.Logger != nil {
			o.Logger.Info("hist: cannot tell programs that never ran", "err", err)
		}
		runs.Mark()
	}
	if o.AfterLoad != nil {
		o.AfterLoad()
	}
	snap := read(exp, o.Program)
	if snap == nil {
		return fail("config %s is not up", o.Program)
	}
	fams, err := selectFamilies(o.Command, o.Program, o.Metric, snap.Families)
	if err != nil {
		return fail("%v", err)
	}
	names := make([]string, len(fams))
	for i, f := range fams {
		names[i] = f.Name
	}
	if o.Command == CommandTop {
		return runTop(ctx, exp, o, names, snap)
	}
	return runHist(ctx, exp, o, names, snap, runs, fail)
}

// read returns the snapshot of config program, nil when it is not up.
func read(exp *exporter.Exporter, program string) *collector.Snapshot {
	for _, s := range exp.Status.Read() {
		if s.Config == program {
			return s
		}
	}
	return nil
}

// pick returns the families of snap named names, in that order (a family
// missing from a later read is left out).
func pick(snap *collector.Snapshot, names []string) []*collector.Family {
	out := make([]*collector.Family, 0, len(names))
	for _, n := range names {
		for _, f := range snap.Families {
			if f.Name == n {
				out = append(out, f)
				break
			}
		}
	}
	return out
}

// selectFamilies returns the families the command shows: hist the
// histograms (or the one named metric), top the counters. The error lists
// the program's metrics of that kind.
func selectFamilies(command, program, metric string, fams []*collector.Family) ([]*collector.Family, error) {
	kind, what := collector.KindHistogram, "histogram"
	if command == CommandTop {
		kind, what = collector.KindCounter, "counter"
	}
	var all, chosen []*collector.Family
	var names []string
	for _, f := range fams {
		if f.Kind != kind {
			continue
		}
		all = append(all, f)
		names = append(names, printable.String(f.Name))
		if f.Name == metric || strings.HasSuffix(f.Name, "_"+metric) {
			chosen = append(chosen, f)
		}
	}
	switch {
	case len(all) == 0:
		var others []string
		for _, f := range fams {
			others = append(others, printable.String(f.Name))
		}
		return nil, fmt.Errorf("program %s has no %s metric (its metrics: %s)", program, what, list(others))
	case metric == "":
		return all, nil
	case len(chosen) == 0:
		return nil, fmt.Errorf("program %s has no histogram %s (its histograms: %s)", program, quote(metric), list(names))
	case len(chosen) > 1:
		for _, f := range chosen {
			if f.Name == metric {
				return []*collector.Family{f}, nil
			}
		}
		return nil, fmt.Errorf("program %s: %s names several histograms (%d): give the full name: %s", program, quote(metric), len(chosen), list(names))
	}
	return chosen, nil
}

// tick waits for the next interval; false when ctx is done first.
func tick(ctx context.Context, t *time.Ticker) bool {
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// runHist prints each interval's histograms, then a line per program
// that ran 0 times in the interval (runs, from BPF run counts).
func runHist(ctx context.Context, exp *exporter.Exporter, o Options, names []string, snap *collector.Snapshot, runs *runcount.Window, fail func(string, ...any) int) int {
	var h Hist
	for _, f := range pick(snap, names) {
		h.Interval(f)
	}
	t := time.NewTicker(o.Interval)
	defer t.Stop()
	for n := 0; o.Count == 0 || n < o.Count; n++ {
		if !tick(ctx, t) {
			return ExitOK
		}
		if snap = read(exp, o.Program); snap == nil {
			return fail("config %s is no longer up", o.Program)
		}
		var b strings.Builder
		now := o.Now().Format(time.TimeOnly)
		for _, f := range pick(snap, names) {
			fmt.Fprintf(&b, "%s %s\n", now, printable.String(f.Name))
			if f.Err != nil {
				fmt.Fprintf(&b, "(map read failed: %s)\n\n", printable.String(f.Err.Error()))
				continue
			}
			_ = WriteHist(&b, o.Program, f, h.Interval(f))
			b.WriteByte('\n')
		}
		window := runs.Elapsed()
		for _, i := range runs.Idle() {
			fmt.Fprintf(&b, "%s %s\n\n", now, i.Message(fmt.Sprintf("in the %v interval", runcount.Round(window))))
		}
		runs.Mark()
		if _, err := io.WriteString(o.Stdout, b.String()); err != nil {
			return fail("write: %v", err)
		}
	}
	return ExitOK
}

func runTop(ctx context.Context, exp *exporter.Exporter, o Options, names []string, snap *collector.Snapshot) int {
	v := &countersView{exp: exp, program: o.Program, names: names, interval: o.Interval, base: snap}
	return Redraw(ctx, RedrawOptions{Name: o.Program, Interval: o.Interval, Count: o.Count, Stdout: o.Stdout, Stderr: o.Stderr, Now: o.Now}, v)
}

// countersView is the View of top <program>: its counters by rate.
type countersView struct {
	exp      *exporter.Exporter
	program  string
	names    []string
	interval time.Duration
	base     *collector.Snapshot
	r        Rates
}

func (v *countersView) Baseline() error {
	v.r.Rows(pick(v.base, v.names), 0)
	v.base = nil
	return nil
}

func (v *countersView) Frame(w io.Writer, now time.Time, elapsed time.Duration, height, width int) error {
	snap := read(v.exp, v.program)
	if snap == nil {
		return fmt.Errorf("config %s is no longer up", v.program)
	}
	rows := v.r.Rows(pick(snap, v.names), elapsed)
	return WriteTop(w, TopHeader{Program: v.program, Interval: v.interval, Time: now}, rows, height, width)
}

// Screen shows frames, each redrawn in place of the last on a terminal
// (the alternate screen, left on Close so that the shell's screen comes
// back as it was), or one after the other, a blank line apart, when the
// output is not a terminal. top and top cpu draw with it.
type Screen struct {
	w      io.Writer
	tty    bool
	frames int
}

// NewScreen starts drawing on w: on a terminal it enters the alternate
// screen and shows title until the first frame.
func NewScreen(w io.Writer, title string) *Screen {
	_, _, tty := Size(w)
	s := &Screen{w: w, tty: tty}
	if tty {
		io.WriteString(w, enterScreen+clearScreen)
		io.WriteString(w, title+"\n")
	}
	return s
}

// Size returns the height and width a frame may take (see Size).
func (s *Screen) Size() (rows, cols int) {
	rows, cols, _ = Size(s.w)
	return rows, cols
}

// Draw shows frame (lines ending in "\n", which a terminal in its normal
// mode turns into CR LF).
func (s *Screen) Draw(frame string) error {
	var b strings.Builder
	if s.tty {
		b.WriteString(clearScreen)
		// No newline after the last line: on the bottom row it would
		// scroll the frame's header away.
		frame = strings.TrimSuffix(frame, "\n")
	} else if s.frames > 0 {
		b.WriteByte('\n')
	}
	b.WriteString(frame)
	s.frames++
	_, err := io.WriteString(s.w, b.String())
	return err
}

// Close leaves the alternate screen.
func (s *Screen) Close() {
	if s.tty {
		io.WriteString(s.w, leaveScreen)
	}
}

// Size returns the height and width of the terminal w writes to (TIOCGWINSZ)
// and true, or DefaultRows, 0 (no width limit) and false when w is not a
// terminal.
func Size(w io.Writer) (rows, cols int, tty bool) {
	if f, ok := w.(*os.File); ok {
		if ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ); err == nil && ws.Row > 0 {
			return int(ws.Row), int(ws.Col), true
		}
	}
	return DefaultRows, 0, false
}

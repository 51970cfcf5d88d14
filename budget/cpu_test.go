// SPDX-License-Identifier: Apache-2.0

package budget

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
)

// fakeProg is a program whose run time advances by rate CPU s/s of the
// fake clock.
type fakeProg struct {
	runtime time.Duration
	rate    float64
	err     error
	// runs advances by perSec runs per second of the fake clock.
	runs   uint64
	perSec float64
}

func (p *fakeProg) Stats() (*ebpf.ProgramStats, error) {
	if p.err != nil {
		return nil, p.err
	}
	return &ebpf.ProgramStats{Runtime: p.runtime, RunCount: p.runs}, nil
}

// fakeClock advances only when slept on; every program advances with it.
type fakeClock struct {
	now   time.Time
	progs []*fakeProg
	// statsOn: programs advance only while statistics are on.
	statsOn *int
}

func (c *fakeClock) Now() time.Time { return c.now }

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.now = c.now.Add(d)
	if c.statsOn == nil || *c.statsOn > 0 {
		for _, p := range c.progs {
			p.runtime += time.Duration(p.rate * float64(d))
			p.runs += uint64(p.perSec * d.Seconds())
		}
	}
	return ctx.Err()
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// fakeExporter is the target: configs, detaches and re-attaches.
type fakeExporter struct {
	configs  map[string][]*fakeProg
	up       map[string]bool
	detached []string
	reasons  []string
	attached []string
	failNext error
}

func (f *fakeExporter) target() Target {
	return Target{
		Configs: func() []Config {
			var out []Config
			for _, n := range []string{"a", "b", "spin"} {
				if !f.up[n] {
					continue
				}
				c := Config{Name: n}
				for i, p := range f.configs[n] {
					c.Programs = append(c.Programs, p)
					c.ProgramNames = append(c.ProgramNames, fmt.Sprintf("%s/%d", n, i))
				}
				out = append(out, c)
			}
			return out
		},
		Detach: func(c, reason string) {
			f.up[c] = false
			f.detached = append(f.detached, c)
			f.reasons = append(f.reasons, reason)
		},
		Reattach: func(c string) error {
			if err := f.failNext; err != nil {
				f.failNext = nil
				return err
			}
			f.up[c] = true
			f.attached = append(f.attached, c)
			return nil
		},
	}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// setup: configs a (two programs, 0.01 + 0.02 CPU s/s), b (0.04) and spin
// (0.3), budget 0.05, period 10 s, window 1 s, backoff 5m.
func setup(t *testing.T) (*CPU, *fakeClock, *fakeExporter, *int) {
	t.Helper()
	a1, a2 := &fakeProg{rate: 0.01}, &fakeProg{rate: 0.02}
	b1 := &fakeProg{rate: 0.04}
	s1 := &fakeProg{rate: 0.3}
	on := 0
	clk := &fakeClock{now: time.Unix(1000, 0), progs: []*fakeProg{a1, a2, b1, s1}, statsOn: &on}
	fx := &fakeExporter{
		configs: map[string][]*fakeProg{"a": {a1, a2}, "b": {b1}, "spin": {s1}},
		up:      map[string]bool{"a": true, "b": true, "spin": true},
	}
	opts := CPUOptions{Budget: 0.05, Backoff: 5 * time.Minute, Period: 10 * time.Second, Window: time.Second, Logger: quiet(), Clock: clk,
		EnableStats: func() (io.Closer, error) {
			on++
			return closerFunc(func() error { on--; return nil }), nil
		}}
	if err := CheckCPUOptions(opts, 2); err != nil {
		t.Fatal(err)
	}
	return NewCPU(opts, fx.target()), clk, fx, &on
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestStepRatesAndDetach(t *testing.T) {
	s, _, fx, on := setup(t)
	rates := s.Step(context.Background())
	if !near(rates["a"], 0.03) || !near(rates["b"], 0.04) || !near(rates["spin"], 0.3) || len(rates) != 3 {
		t.Fatalf("rates = %v, want a 0.03, b 0.04, spin 0.3", rates)
	}
	if *on != 0 {
		t.Errorf("statistics still on after the window (%d holders)", *on)
	}
	if len(fx.detached) != 1 || fx.detached[0] != "spin" {
		t.Fatalf("detached %v, want [spin]", fx.detached)
	}
	want := "over its CPU budget: 0.300 CPU s/s measured in a 1s window, budget 0.05 (--bpf.cpu-budget); re-attach in 5m0s"
	if fx.reasons[0] != want {
		t.Errorf("reason %q\nwant   %q", fx.reasons[0], want)
	}
	if d, n := s.Detached("spin"); !d || n != 1 {
		t.Errorf("Detached(spin) = %v, %d; want true, 1", d, n)
	}
}

// Statistics off between windows: the programs' run time only advances in
// windows, and the rate is still the rate (not scaled down by the duty
// cycle).
func TestRunTimeOnlyInWindows(t *testing.T) {
	s, clk, _, _ := setup(t)
	ctx := context.Background()
	s.Step(ctx)
	_ = clk.Sleep(ctx, 9*time.Second) // idle: statistics off
	rates := s.Step(ctx)
	if !near(rates["b"], 0.04) {
		t.Errorf("second window: rate b = %v, want 0.04", rates["b"])
	}
	if got := clk.progs[2].runtime; got != 80*time.Millisecond {
		t.Errorf("b's run time after two 1 s windows = %v, want 80ms (nothing counted while off)", got)
	}
}

func TestBackoffDoublesAndResets(t *testing.T) {
	s, clk, fx, _ := setup(t)
	ctx := context.Background()
	period := func() {
		s.Step(ctx)
		_ = clk.Sleep(ctx, 9*time.Second)
	}
	period() // t=0: trip 1, back at 5m
	waits := []time.Duration{5 * time.Minute}
	for trip := 2; trip <= 6; trip++ {
		// Run periods until spin is re-attached and trips again.
		start := clk.now
		for len(fx.detached) < trip {
			period()
			if clk.now.Sub(start) > 2*time.Hour {
				t.Fatalf("trip %d did not happen", trip)
			}
		}
		waits = append(waits, Backoff(5*time.Minute, trip))
	}
	wantWaits := []time.Duration{5 * time.Minute, 10 * time.Minute, 20 * time.Minute, 40 * time.Minute, time.Hour, time.Hour}
	for i, w := range wantWaits {
		if waits[i] != w {
			t.Errorf("backoff %d = %v, want %v", i+1, waits[i], w)
		}
		if !strings.HasSuffix(fx.reasons[i], "re-attach in "+w.String()) {
			t.Errorf("reason %d = %q, want it to end in re-attach in %v", i+1, fx.reasons[i], w)
		}
	}
	if len(fx.attached) != 5 {
		t.Errorf("re-attached %d times, want 5", len(fx.attached))
	}
	// Now let spin behave: after MaxBackoff within budget, the count
	// resets.
	clk.progs[3].rate = 0.01
	for len(fx.attached) < 6 {
		period()
	}
	for i := 0; i < int(MaxBackoff/(10*time.Second)); i++ {
		period()
	}
	clk.progs[3].rate = 0.3
	n := len(fx.detached)
	period()
	if len(fx.detached) != n+1 {
		t.Fatalf("spin over again was not detached")
	}
	if r := fx.reasons[n]; !strings.HasSuffix(r, "re-attach in 5m0s") {
		t.Errorf("after an hour within budget the backoff should start again at 5m: %q", r)
	}
	if _, c := s.Detached("spin"); c != 1 {
		t.Errorf("trip count after reset = %d, want 1", c)
	}
	// Configs within budget were never detached.
	for _, d := range fx.detached {
		if d != "spin" {
			t.Errorf("%s detached", d)
		}
	}
}

func TestReattachTiming(t *testing.T) {
	s, clk, fx, _ := setup(t)
	ctx := context.Background()
	s.Step(ctx) // t=0..1 s: trip
	clk.progs[3].rate = 0
	var at time.Duration
	start := time.Unix(1000, 0)
	for len(fx.attached) == 0 {
		_ = clk.Sleep(ctx, 9*time.Second)
		before := clk.now
		s.Step(ctx)
		if len(fx.attached) > 0 {
			at = before.Sub(start)
		}
	}
	// Detached at t=1 s with a 5m backoff: due at 301 s, re-attached at
	// the start of the first window at or after that (310 s).
	if at != 310*time.Second {
		t.Errorf("re-attached at %v, want 5m10s", at)
	}
}

func TestReattachFailureRetries(t *testing.T) {
	s, clk, fx, _ := setup(t)
	ctx := context.Background()
	s.Step(ctx)
	clk.progs[3].rate = 0
	fx.failNext = errors.New("load failed")
	clk.now = clk.now.Add(5 * time.Minute)
	s.Step(ctx) // re-attach fails
	if d, _ := s.Detached("spin"); !d || fx.up["spin"] {
		t.Fatal("a failed re-attach must leave the config detached")
	}
	clk.now = clk.now.Add(4 * time.Minute)
	s.Step(ctx)
	if len(fx.attached) != 0 {
		t.Fatal("re-attach retried before the backoff ended")
	}
	clk.now = clk.now.Add(time.Minute)
	s.Step(ctx)
	if len(fx.attached) != 1 {
		t.Fatal("re-attach not retried after the backoff")
	}
}

// With statistics always on, the window is the whole period and nothing
// is turned on.
func TestStatsOn(t *testing.T) {
	s, clk, _, on := setup(t)
	*on = 1 // on for good (--bpf.stats)
	s.opts.StatsOn = true
	s.enable = func() (io.Closer, error) { t.Fatal("EnableStats called with StatsOn"); return nil, nil }
	t0 := clk.now
	rates := s.Step(context.Background())
	if clk.now.Sub(t0) != 10*time.Second {
		t.Errorf("window %v, want the whole period 10s", clk.now.Sub(t0))
	}
	if !near(rates["a"], 0.03) {
		t.Errorf("rate a = %v, want 0.03", rates["a"])
	}
}

// EnableStats failing (no CAP_SYS_ADMIN, or the privileged helper gone)
// measures nothing while the statistics are off, detaches nothing, and
// warns once; working again (the helper restarted) is logged, and a new
// failure warns again.
func TestEnableFails(t *testing.T) {
	s, _, fx, _ := setup(t)
	var logs bytes.Buffer
	s.log = slog.New(slog.NewTextHandler(&logs, nil))
	n := 0
	fail := true
	s.enable = func() (io.Closer, error) {
		n++
		if fail {
			return nil, fs.ErrPermission
		}
		return io.NopCloser(nil), nil
	}
	s.Step(context.Background())
	s.Step(context.Background())
	if n != 2 || len(fx.detached) != 0 {
		t.Errorf("enable called %d times, detached %v; want 2 and none", n, fx.detached)
	}
	fail = false
	s.Step(context.Background())
	fail = true
	s.Step(context.Background())
	warns, agains := strings.Count(logs.String(), "cannot turn BPF run-time statistics on"), strings.Count(logs.String(), "turned on again")
	if warns != 2 || agains != 1 {
		t.Errorf("%d warnings and %d recoveries logged, want 2 and 1:\n%s", warns, agains, logs.String())
	}
}

func TestRatesMissingProgram(t *testing.T) {
	p1, p2 := &fakeProg{}, &fakeProg{}
	cfgs := []Config{{Name: "x", Programs: []Program{p1, p2}}, {Name: "y", Programs: []Program{p1}}, {Name: "none"}}
	start := runTimes{p1: time.Second, p2: 5 * time.Second}
	end := runTimes{p1: 1500 * time.Millisecond}
	r := Rates(cfgs, start, end, 2*time.Second)
	if _, ok := r["x"]; ok {
		t.Errorf("x has a rate with a program missing at the end: %v", r)
	}
	if !near(r["y"], 0.25) {
		t.Errorf("y = %v, want 0.25", r["y"])
	}
	if _, ok := r["none"]; ok {
		t.Error("a config with no programs has a rate")
	}
	// Backwards (a program replaced by one with the same key) counts 0.
	r = Rates(cfgs[1:2], runTimes{p1: time.Second}, runTimes{p1: 0}, time.Second)
	if r["y"] != 0 {
		t.Errorf("backwards run time: rate %v, want 0", r["y"])
	}
}

func TestCheckCPUOptions(t *testing.T) {
	ok := CPUOptions{Budget: DefaultCPUBudget, Backoff: DefaultBackoff, Period: DefaultPeriod, Window: DefaultWindow}
	if err := CheckCPUOptions(ok, 2); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	bad := []struct {
		mod  func(*CPUOptions)
		want string
	}{
		{func(o *CPUOptions) { o.Budget = -0.1 }, "--bpf.cpu-budget"},
		{func(o *CPUOptions) { o.Budget = 2.5 }, "--bpf.cpu-budget 2.5: must be 0 (off) to 2"},
		{func(o *CPUOptions) { o.Budget = math.NaN() }, "--bpf.cpu-budget"},
		{func(o *CPUOptions) { o.Backoff = 0 }, "--bpf.budget-backoff"},
		{func(o *CPUOptions) { o.Backoff = 2 * time.Hour }, "--bpf.budget-backoff"},
		{func(o *CPUOptions) { o.Window = 10 * time.Millisecond }, "--bpf.budget-window"},
		{func(o *CPUOptions) { o.Window = DefaultPeriod }, "--bpf.budget-window"},
		{func(o *CPUOptions) { o.Period = 60 * time.Second }, "must be at most 1m0s"},
	}
	for _, b := range bad {
		o := ok
		b.mod(&o)
		err := CheckCPUOptions(o, 2)
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%+v: err %v, want one containing %q", o, err, b.want)
		}
	}
	o := ok
	o.Budget = 0
	if err := CheckCPUOptions(o, 2); err != nil {
		t.Errorf("budget 0 (off): %v", err)
	}
}

func TestBackoff(t *testing.T) {
	for n, want := range map[int]time.Duration{1: 5 * time.Minute, 2: 10 * time.Minute, 4: 40 * time.Minute, 5: time.Hour, 50: time.Hour} {
		if got := Backoff(5*time.Minute, n); got != want {
			t.Errorf("Backoff(5m, %d) = %v, want %v", n, got, want)
		}
	}
	if got := Backoff(45*time.Minute, 2); got != time.Hour {
		t.Errorf("Backoff(45m, 2) = %v, want 1h", got)
	}
}

// Run returns at once when the budget is 0 and stops with its context.
func TestRunStops(t *testing.T) {
	s, _, _, _ := setup(t)
	s.opts.Budget = 0
	s.Run(context.Background())
	s.opts.Budget = 0.05
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s.Run(ctx)
}

// TestLastRates checks that LastRates is empty before the first window and
// then gives the last window's rates, length and end, as a copy.
func TestLastRates(t *testing.T) {
	s, clk, _, _ := setup(t)
	if r, w, end := s.LastRates(); r != nil || w != 0 || !end.IsZero() {
		t.Fatalf("LastRates before any window = %v, %v, %v; want nil, 0, zero", r, w, end)
	}
	s.Step(context.Background())
	r, w, end := s.LastRates()
	if len(r) != 3 || !near(r["a"], 0.03) || !near(r["spin"], 0.3) || w != time.Second || !end.Equal(clk.now) {
		t.Fatalf("LastRates = %v, %v, %v; want a 0.03, b 0.04, spin 0.3 over 1s ending %v", r, w, end, clk.now)
	}
	r["a"] = 99
	if r2, _, _ := s.LastRates(); !near(r2["a"], 0.03) {
		t.Errorf("LastRates shares its map with the caller")
	}
}

// TestLastIdle checks that LastIdle names the programs whose run count did
// not move in the last window, and nothing when statistics could not be
// turned on for it.
func TestLastIdle(t *testing.T) {
	s, clk, _, _ := setup(t)
	if idle := s.LastIdle(); idle != nil {
		t.Fatalf("LastIdle before any window = %v, want nil", idle)
	}
	for i, p := range clk.progs {
		if i != 1 { // a's second program never runs
			p.perSec = 1000
		}
	}
	s.Step(context.Background())
	if idle := s.LastIdle(); !reflect.DeepEqual(idle, map[string][]string{"a": {"a/1"}}) {
		t.Errorf("LastIdle = %v, want a: [a/1]", idle)
	}
	s.enable = func() (io.Closer, error) { return nil, errors.New("EPERM") }
	s.Step(context.Background())
	if idle := s.LastIdle(); idle != nil {
		t.Errorf("LastIdle of a window without statistics = %v, want nil", idle)
	}
}

// observer records the windows it is told of, and whether statistics were
// on at each call.
type observer struct {
	on     *int
	calls  []string
	period time.Duration
}

func (o *observer) WindowStart(_ context.Context, continuous bool) {
	o.calls = append(o.calls, fmt.Sprintf("start on=%d continuous=%v", *o.on, continuous))
}

func (o *observer) WindowEnd(_ context.Context, period time.Duration, continuous bool) {
	o.period = period
	o.calls = append(o.calls, fmt.Sprintf("end on=%d continuous=%v", *o.on, continuous))
}

// TestObservers checks that observers see each window's start and end
// while statistics are on, and that with a budget of 0 the windows still
// run for them but nothing is detached.
func TestObservers(t *testing.T) {
	s, _, fx, on := setup(t)
	o := &observer{on: on}
	s.opts.Observers = []Observer{o}
	s.opts.Budget = 0
	s.Step(context.Background())
	want := []string{"start on=1 continuous=false", "end on=1 continuous=false"}
	if !slices.Equal(o.calls, want) || o.period != 10*time.Second {
		t.Errorf("observer saw %q over a period of %v, want %q over 10s", o.calls, o.period, want)
	}
	if len(fx.detached) != 0 {
		t.Errorf("budget 0 detached %v", fx.detached)
	}
	ctx, cancel := context.WithCancel(context.Background())
	o.calls = nil
	s.clock = cancelAfter{s.clock, cancel}
	s.Run(ctx) // with observers, Run runs at budget 0: one window, then ctx ends
	if len(o.calls) == 0 {
		t.Error("Run with observers and budget 0 ran no window")
	}
}

// cancelAfter is a clock whose first sleep cancels the run.
type cancelAfter struct {
	Clock
	cancel context.CancelFunc
}

func (c cancelAfter) Sleep(ctx context.Context, d time.Duration) error {
	err := c.Clock.Sleep(ctx, d)
	c.cancel()
	return err
}

// stepAcrossGap steps s twice: config b (clk.progs[2]) runs at 0.4 CPU
// s/s for the 9 s between the windows and at 0.04 in the second one. It
// returns the second step's rates and the window it measured.
func stepAcrossGap(s *CPU, clk *fakeClock) (map[string]float64, time.Duration) {
	ctx := context.Background()
	s.Step(ctx)
	b := clk.progs[2]
	b.rate = 0.4
	_ = clk.Sleep(ctx, 9*time.Second)
	b.rate = 0.04
	rates := s.Step(ctx)
	_, window, _ := s.LastRates()
	return rates, window
}

// With kernel.bpf_stats_enabled=1 at the end of one window and the start
// of the next, the kernel counted every run in between: the second window
// is measured from the first one's end, so a config that ran over its
// budget only between windows is seen (0.364 CPU s/s over the 10 s
// period), where a sample of the window alone sees 0.04.
func TestSysctlOnMeasuresThePeriod(t *testing.T) {
	for _, sysctl := range []bool{false, true} {
		s, clk, fx, on := setup(t)
		s.opts.SysctlOn = func() bool { return sysctl }
		if sysctl {
			*on = 1 // the sysctl holds statistics on
		}
		rates, window := stepAcrossGap(s, clk)
		wantRate, wantWindow := 0.04, time.Second
		if sysctl {
			wantRate, wantWindow = (9*0.4+0.04)/10, 10*time.Second
		}
		if !near(rates["b"], wantRate) || window != wantWindow {
			t.Errorf("sysctl %v: rate b %v over %v, want %v over %v", sysctl, rates["b"], window, wantRate, wantWindow)
		}
		if got := slices.Contains(fx.detached, "b"); got != sysctl {
			t.Errorf("sysctl %v: b detached %v, want %v", sysctl, got, sysctl)
		}
	}
}

// probeFake is a statistics probe whose kernel count follows *on.
type probeFake struct {
	clk  *fakeClock
	on   *int
	k, o uint64
	last time.Time
}

func (p *probeFake) Read() (uint64, uint64, uint64, error) {
	n := uint64(p.clk.now.Sub(p.last) / (20 * time.Millisecond))
	p.last = p.clk.now
	p.o += n
	if *p.on > 0 {
		p.k += n
	}
	return p.k, p.o, 0, nil
}

// Another process holding statistics on (the probe sees every run
// counted): the second window is measured from the first one's end, as
// with the sysctl.
func TestProbeOnMeasuresThePeriod(t *testing.T) {
	s, clk, _, on := setup(t)
	*on = 1 // another holder
	s.opts.Probe = &probeFake{clk: clk, on: on, last: clk.now}
	if rates, window := stepAcrossGap(s, clk); !near(rates["b"], (9*0.4+0.04)/10) || window != 10*time.Second {
		t.Errorf("rate b %v over %v, want %v over 10s", rates["b"], window, (9*0.4+0.04)/10)
	}
}

// SPDX-License-Identifier: Apache-2.0

package budget

// CPU budget model.
//
// The kernel counts a BPF program's run time (struct bpf_prog_stats, read
// with BPF_OBJ_GET_INFO_BY_FD as run_time_ns) only while run-time
// statistics are on: kernel.bpf_stats_enabled=1 or a BPF_ENABLE_STATS file
// descriptor held open (kernel/bpf/syscall.c, Linux 5.8). With statistics
// on, every program run reads the clock twice, so the supervisor turns them
// on only for a window (CPUOptions.Window, 1 s) in every period
// (CPUOptions.Period, 30 s: while on, statistics add about 80% of the
// cheapest bundled program's own cost to every program run, so a duty of
// 1/30 adds under 3% on average; see BenchmarkSamplingCost). It reads each attached program's run time at
// the window's start and end; per config,
//
//	rate = sum over its programs of (run time at end - at start) / window
//
// in CPU seconds per second, summed over CPUs. A config whose rate over one
// whole window is above CPUOptions.Budget is detached through
// Target.Detach. A config can go over just after a window starts; the next
// window, whole, ends at most Period+Window later, which CheckCPUOptions
// bounds to 60 s.
//
// When statistics are on all the time (--bpf.stats), the window is the
// whole period. When kernel.bpf_stats_enabled reads 1 both at the end of
// the previous window and at the start of this one (CPUOptions.SysctlOn;
// the sysctl reads its own setting, never our BPF_ENABLE_STATS windows),
// or the statistics probe saw them on all that time (CPUOptions.Probe:
// another process holds them on), the kernel counted every run in
// between too: the window is measured from the previous one's end, so
// the rate is the exact one over the whole period, not the sample of one
// window.
//
// A detached config is re-attached after a backoff: CPUOptions.Backoff
// (--bpf.budget-backoff, 5m) the first time, doubled at every new trip up
// to MaxBackoff (1h). The count of trips starts again once a re-attached
// config has run within its budget for MaxBackoff.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/collector"
)

// Defaults and bounds of the CPU supervisor.
const (
	// DefaultCPUBudget is the default of --bpf.cpu-budget in CPU seconds
	// per second (summed over CPUs). Measured (BenchmarkBundledCPU, 2
	// CPUs): the most a bundled config used is 0.051 (syscalls) under the
	// integration tests' load, 0.16 under a tight getpid() loop on one
	// CPU and 0.27 on both; every other config stays under 0.013.
	DefaultCPUBudget = 0.5
	// DefaultBackoff is the default of --bpf.budget-backoff.
	DefaultBackoff = 5 * time.Minute
	// MaxBackoff bounds the doubled backoff; a config that runs within
	// its budget this long after a re-attach starts again at Backoff.
	MaxBackoff = time.Hour
	// DefaultPeriod and DefaultWindow: statistics are on 1 s in every
	// 30 s; a config over its budget is detached within 31 s.
	DefaultPeriod = 30 * time.Second
	DefaultWindow = time.Second
	// MaxDetectDelay bounds Period+Window: the longest a config can be
	// over its budget before a whole window has seen it.
	MaxDetectDelay = 60 * time.Second
	// MinWindow is the shortest window accepted (shorter ones measure
	// little but the cost of turning statistics on and off).
	MinWindow = 100 * time.Millisecond
)

// Program is what the supervisor reads of a BPF program: *ebpf.Program.
type Program interface {
	Stats() (*ebpf.ProgramStats, error)
}

// Config is one config that is up, as the supervisor sees it.
type Config struct {
	Name     string
	Programs []Program
	// ProgramNames names Programs, index for index ("<function> (section
	// <section>)"), for LastIdle; nil leaves them out of it.
	ProgramNames []string
}

// Target is the exporter as the supervisor sees it.
type Target struct {
	// Configs returns the configs that are up, with their attached
	// programs.
	Configs func() []Config
	// Detach takes config down, with reason (which says "budget" and
	// the measured rate).
	Detach func(config, reason string)
	// Reattach attaches config again (the exporter re-links its loaded
	// programs); an error leaves it down and it is
	// tried again after the same backoff.
	Reattach func(config string) error
}

// CPUOptions configure a CPU supervisor. Check them with CheckCPUOptions.
type CPUOptions struct {
	// Budget is the CPU seconds per second a config's programs may use,
	// summed over CPUs (--bpf.cpu-budget); 0 turns the supervisor off.
	Budget float64
	// Backoff is the first wait before a detached config is re-attached.
	Backoff time.Duration
	// Period and Window: statistics are on for Window in every Period.
	Period, Window time.Duration
	// StatsOn: statistics are on all the time (--bpf.stats), so the
	// window is the whole period and the supervisor turns nothing on.
	StatsOn bool
	Logger  *slog.Logger
	// Observers are told when each window starts and ends (the host BPF
	// collector measures every program of the host over the same
	// windows, so that the host pays for statistics only once). With
	// observers the windows run even when Budget is 0.
	Observers []Observer
	// SysctlOn reports whether kernel.bpf_stats_enabled is 1 (nil:
	// never); see the model above.
	SysctlOn func() bool
	// Probe (nil: none) tells whether statistics were on all the time
	// between two readings, whoever held them (bpfstats.StatsProbe): a
	// gap between windows over which it saw them on is measured as the
	// sysctl's is.
	Probe Probe
	// Clock and EnableStats are for tests: nil means the real clock and
	// ebpf.EnableStats(BPF_STATS_RUN_TIME).
	Clock       Clock
	EnableStats func() (io.Closer, error)
}

// Probe is bpfstats.StatsProbe as the supervisor sees it: its runs as
// the kernel counted them (only while statistics were on) and as it
// counted them itself, and the runs in flight a reading allows.
type Probe interface {
	Read() (kernelRuns, ownRuns, slack uint64, err error)
}

// Observer is told when each measuring window starts and ends; both calls
// run while statistics are on. continuous: statistics stay on between
// windows (StatsOn), so a window's end is the next one's start. period is
// the time each window stands for (CPUOptions.Period).
type Observer interface {
	WindowStart(ctx context.Context, continuous bool)
	WindowEnd(ctx context.Context, period time.Duration, continuous bool)
}

// Clock is the time source of the supervisor.
type Clock interface {
	Now() time.Time
	// Sleep waits d or until ctx is done (then it returns ctx's error).
	Sleep(ctx context.Context, d time.Duration) error
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// CheckCPUOptions returns an error naming the flag for a value out of
// range: Budget in [0, maxCPUs] (a config cannot use more than every
// CPU), Backoff in [1s, MaxBackoff], Window >= MinWindow, Window < Period,
// Period+Window <= MaxDetectDelay.
func CheckCPUOptions(o CPUOptions, maxCPUs int) error {
	if math.IsNaN(o.Budget) || o.Budget < 0 || o.Budget > float64(maxCPUs) {
		return fmt.Errorf("--bpf.cpu-budget %v: must be 0 (off) to %d (every CPU of this machine), in CPU seconds per second", o.Budget, maxCPUs)
	}
	if o.Backoff < time.Second || o.Backoff > MaxBackoff {
		return fmt.Errorf("--bpf.budget-backoff %v: must be 1s to %v", o.Backoff, MaxBackoff)
	}
	if o.Window < MinWindow || o.Window >= o.Period {
		return fmt.Errorf("--bpf.budget-window %v: must be at least %v and shorter than --bpf.budget-period %v", o.Window, MinWindow, o.Period)
	}
	if o.Period+o.Window > MaxDetectDelay {
		return fmt.Errorf("--bpf.budget-period %v plus --bpf.budget-window %v: must be at most %v (a config over its budget is detached within that)", o.Period, o.Window, MaxDetectDelay)
	}
	return nil
}

// CPU is the CPU budget supervisor. Run it with Run; Step is one period.
type CPU struct {
	opts   CPUOptions
	target Target
	log    *slog.Logger
	clock  Clock
	enable func() (io.Closer, error)

	mu       sync.Mutex
	trips    map[string]*trip
	warnedOn bool // EnableStats failed: logged, until it works again
	// The last window's rates by config (CPU s/s), its length and end;
	// see LastRates.
	lastRates  map[string]float64
	lastWindow time.Duration
	lastEnd    time.Time
	// The programs that ran 0 times in the last window, by config; see
	// LastIdle.
	lastIdle map[string][]string
	// The previous window's end readings, when taken, and whether the
	// sysctl was on then: the start of an exact window.
	prevEnd     runTimes
	prevEndRuns runCounts
	prevEndAt   time.Time
	prevOn      bool
	// The probe's reading at the previous window's end (probeOK: taken).
	probeOK               bool
	probeKernel, probeOwn uint64
}

// trip is the backoff state of one config.
type trip struct {
	count      int           // trips since the last reset
	detached   bool          // waiting for re-attach
	until      time.Time     // re-attach at
	wait       time.Duration // backoff of the current detach
	reattached time.Time     // last re-attach (zero: never)
}

// NewCPU returns a supervisor of target with opts (already checked).
func NewCPU(opts CPUOptions, target Target) *CPU {
	s := &CPU{opts: opts, target: target, log: opts.Logger, clock: opts.Clock, enable: opts.EnableStats, trips: map[string]*trip{}}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.clock == nil {
		s.clock = realClock{}
	}
	if s.enable == nil {
		s.enable = func() (io.Closer, error) { return ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME)) }
	}
	return s
}

// window returns the measuring window and the idle time after it.
func (s *CPU) window() (window, idle time.Duration) {
	if s.opts.StatsOn {
		return s.opts.Period, 0
	}
	return s.opts.Window, s.opts.Period - s.opts.Window
}

// Run measures every period until ctx is done. With Budget 0 and no
// observers it returns at once.
func (s *CPU) Run(ctx context.Context) {
	if s.opts.Budget <= 0 && len(s.opts.Observers) == 0 {
		return
	}
	_, idle := s.window()
	for ctx.Err() == nil {
		s.Step(ctx)
		if idle > 0 {
			_ = s.clock.Sleep(ctx, idle)
		}
	}
}

// Step runs one measuring window: it re-attaches configs whose backoff has
// ended, turns statistics on (unless StatsOn), tells the observers the
// window starts, reads every program's run time, waits the window, reads
// again, tells the observers it ends, turns statistics off, and detaches
// the configs over budget (when Budget is not 0). It returns the rates
// measured, by config.
func (s *CPU) Step(ctx context.Context) map[string]float64 {
	s.reattachDue()
	window, _ := s.window()
	statsOn := s.opts.StatsOn
	// Before our statistics go on: were they on since the last window?
	gapOn := s.sysctlOn() && s.prevOn || s.probeOn()
	if !s.opts.StatsOn {
		closer, err := s.enable()
		if err != nil {
			s.mu.Lock()
			warn := !s.warnedOn
			s.warnedOn = true
			s.mu.Unlock()
			if warn {
				// Without them, run time advances only while something
				// else turned them on (kernel.bpf_stats_enabled).
				s.log.Warn("CPU budget: cannot turn BPF run-time statistics on (BPF_ENABLE_STATS needs CAP_SYS_ADMIN, held by the privileged helper or kept with --capabilities.keep=sys_admin): measuring only while kernel.bpf_stats_enabled is 1; or use --bpf.stats", "err", err)
			}
		} else {
			statsOn = true
			defer closer.Close()
			s.mu.Lock()
			recovered := s.warnedOn
			s.warnedOn = false
			s.mu.Unlock()
			if recovered {
				// The privileged helper is back (it is restarted when it
				// dies): a later failure warns again.
				s.log.Info("CPU budget: BPF run-time statistics can be turned on again")
			}
		}
	}
	for _, o := range s.opts.Observers {
		o.WindowStart(ctx, s.opts.StatsOn)
	}
	configs := s.target.Configs()
	start, startRuns := readRunTimes(configs)
	t0 := s.clock.Now()
	if gapOn && s.prevEnd != nil && covers(s.prevEnd, start) {
		// Statistics were on since the previous window ended: measure
		// from there (exact over the whole period). A program new since
		// (a config re-attached) makes this window a window alone.
		start, startRuns, t0 = s.prevEnd, s.prevEndRuns, s.prevEndAt
	}
	if err := s.clock.Sleep(ctx, window); err != nil {
		return nil
	}
	end, endRuns := readRunTimes(s.target.Configs())
	endAt := s.clock.Now()
	elapsed := endAt.Sub(t0)
	s.prevEnd, s.prevEndRuns, s.prevEndAt, s.prevOn = end, endRuns, endAt, s.sysctlOn()
	s.probeMark()
	for _, o := range s.opts.Observers {
		o.WindowEnd(ctx, s.opts.Period, s.opts.StatsOn)
	}
	rates := Rates(configs, start, end, elapsed)
	s.mu.Lock()
	s.lastRates, s.lastWindow, s.lastEnd = rates, elapsed, s.clock.Now()
	s.lastIdle = nil
	if statsOn {
		// Without statistics no count moves: that says nothing.
		s.lastIdle = idlePrograms(configs, startRuns, endRuns)
	}
	s.mu.Unlock()
	names := make([]string, 0, len(rates))
	for n := range rates {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if s.opts.Budget > 0 && rates[n] > s.opts.Budget {
			s.trip(n, rates[n], elapsed)
		}
	}
	return rates
}

// sysctlOn reports whether kernel.bpf_stats_enabled is 1, as
// CPUOptions.SysctlOn says (false without it, and with StatsOn, where the
// window is the period already).
func (s *CPU) sysctlOn() bool {
	return !s.opts.StatsOn && s.opts.SysctlOn != nil && s.opts.SysctlOn()
}

// probeMark keeps the probe's reading at a window's end.
func (s *CPU) probeMark() {
	s.probeOK = false
	if s.opts.Probe == nil || s.opts.StatsOn {
		return
	}
	if k, o, _, err := s.opts.Probe.Read(); err == nil {
		s.probeOK, s.probeKernel, s.probeOwn = true, k, o
	}
}

// probeOn reports whether the probe saw statistics on for every one of its
// runs since the last window's end (and ran at least once).
func (s *CPU) probeOn() bool {
	if !s.probeOK || s.opts.Probe == nil {
		return false
	}
	k, o, slack, err := s.opts.Probe.Read()
	return err == nil && o > s.probeOwn && k >= s.probeKernel && (k-s.probeKernel)+slack >= o-s.probeOwn
}

// runTimes are the run times read at one instant, by program; runCounts
// the run counts.
type (
	runTimes  map[Program]time.Duration
	runCounts map[Program]uint64
)

// covers reports whether a holds every program of b.
func covers(a, b runTimes) bool {
	for p := range b {
		if _, ok := a[p]; !ok {
			return false
		}
	}
	return true
}

// readRunTimes reads the run time and count of every program of configs;
// a program whose statistics cannot be read is left out.
func readRunTimes(configs []Config) (runTimes, runCounts) {
	out, runs := runTimes{}, runCounts{}
	for _, c := range configs {
		for _, p := range c.Programs {
			if st, err := p.Stats(); err == nil {
				out[p] = st.Runtime
				runs[p] = st.RunCount
			}
		}
	}
	return out, runs
}

// idlePrograms returns, by config, the names of the programs (of those
// named, read at both ends) whose run count did not move between start
// and end.
func idlePrograms(configs []Config, start, end runCounts) map[string][]string {
	out := map[string][]string{}
	for _, c := range configs {
		for i, p := range c.Programs {
			if i >= len(c.ProgramNames) {
				break
			}
			a, ok1 := start[p]
			b, ok2 := end[p]
			if ok1 && ok2 && a == b {
				out[c.Name] = append(out[c.Name], c.ProgramNames[i])
			}
		}
	}
	return out
}

// Rates returns, for each config of configs whose every program was read
// at start and at end, the run time its programs added between the two
// divided by elapsed: CPU seconds per second, summed over CPUs. A config
// with a program missing at either end (detached meanwhile, or statistics
// unreadable) has no rate. A run time that went backwards counts 0.
func Rates(configs []Config, start, end runTimes, elapsed time.Duration) map[string]float64 {
	out := map[string]float64{}
	if elapsed <= 0 {
		return out
	}
	for _, c := range configs {
		var sum time.Duration
		ok := len(c.Programs) > 0
		for _, p := range c.Programs {
			a, ok1 := start[p]
			b, ok2 := end[p]
			if !ok1 || !ok2 {
				ok = false
				break
			}
			if b > a {
				sum += b - a
			}
		}
		if ok {
			out[c.Name] = sum.Seconds() / elapsed.Seconds()
		}
	}
	return out
}

// Backoff returns the wait before re-attach after the n-th trip (n >= 1)
// in a row: base doubled n-1 times, at most MaxBackoff.
func Backoff(base time.Duration, n int) time.Duration {
	d := base
	for i := 1; i < n && d < MaxBackoff; i++ {
		d *= 2
	}
	return min(d, MaxBackoff)
}

// trip detaches config, measured at rate over a window of elapsed.
func (s *CPU) trip(config string, rate float64, elapsed time.Duration) {
	now := s.clock.Now()
	s.mu.Lock()
	tr := s.trips[config]
	if tr == nil {
		tr = &trip{}
		s.trips[config] = tr
	}
	if tr.detached {
		s.mu.Unlock()
		return
	}
	if !tr.reattached.IsZero() && now.Sub(tr.reattached) >= MaxBackoff {
		tr.count = 0
	}
	tr.count++
	tr.wait = Backoff(s.opts.Backoff, tr.count)
	tr.until = now.Add(tr.wait)
	tr.detached = true
	s.mu.Unlock()
	s.target.Detach(config, Reason(rate, elapsed, s.opts.Budget, tr.wait))
}

// Reason is the text a config detached over its CPU budget is down with.
func Reason(rate float64, window time.Duration, budget float64, wait time.Duration) string {
	return fmt.Sprintf("over its CPU budget: %.3f CPU s/s measured in a %v window, budget %g (--bpf.cpu-budget); re-attach in %v",
		rate, window.Round(10*time.Millisecond), budget, wait)
}

// reattachDue re-attaches every detached config whose backoff has ended.
func (s *CPU) reattachDue() {
	now := s.clock.Now()
	s.mu.Lock()
	var due []string
	for n, tr := range s.trips {
		if tr.detached && !now.Before(tr.until) {
			due = append(due, n)
		}
	}
	s.mu.Unlock()
	sort.Strings(due)
	for _, n := range due {
		err := s.target.Reattach(n)
		s.mu.Lock()
		tr := s.trips[n]
		if err != nil {
			tr.until = now.Add(tr.wait)
		} else {
			tr.detached = false
			tr.reattached = now
		}
		s.mu.Unlock()
		if err != nil {
			s.log.Error("CPU budget: re-attach failed, trying again later", "config", n, "retry_in", tr.wait, "err", err)
		} else {
			s.log.Info("CPU budget: config re-attached after its backoff", "config", n)
		}
	}
}

// LastRates returns the rates of the last whole measuring window, by
// config, in CPU seconds per second summed over CPUs (as Step returns
// them; a config missing had a program unreadable or detached during it),
// the window's length and the time it ended. Before the first window ends,
// or with the supervisor off (Budget 0), rates is nil and end is zero. The
// map is the caller's.
func (s *CPU) LastRates() (rates map[string]float64, window time.Duration, end time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lastRates == nil {
		return nil, 0, time.Time{}
	}
	rates = make(map[string]float64, len(s.lastRates))
	for n, r := range s.lastRates {
		rates[n] = r
	}
	return rates, s.lastWindow, s.lastEnd
}

// LastIdle returns, by config, the programs (as Config.ProgramNames names
// them) that ran 0 times in the last whole measuring window, whose length
// and end LastRates gives. It is nil before the first window ends and
// when statistics could not be turned on for it (no count moves then).
// The map is the caller's.
func (s *CPU) LastIdle() map[string][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lastIdle == nil {
		return nil
	}
	out := make(map[string][]string, len(s.lastIdle))
	for n, v := range s.lastIdle {
		out[n] = append([]string(nil), v...)
	}
	return out
}

// Detached reports whether config is waiting for its re-attach, and its
// trip count.
func (s *CPU) Detached(config string) (bool, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if tr := s.trips[config]; tr != nil {
		return tr.detached, tr.count
	}
	return false, 0
}

// StatusConfigs returns Target.Configs for the exporter's status: every
// config that is up, with its attached programs.
func StatusConfigs(status *collector.Status) func() []Config {
	return func() []Config {
		var out []Config
		for _, st := range status.States() {
			if !st.Up {
				continue
			}
			c := Config{Name: st.Name}
			for _, p := range st.Programs {
				if p.Attached && p.Prog != nil {
					c.Programs = append(c.Programs, p.Prog)
					c.ProgramNames = append(c.ProgramNames, p.Name+" (section "+p.Section+")")
				}
			}
			out = append(out, c)
		}
		return out
	}
}

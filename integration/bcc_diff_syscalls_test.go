// SPDX-License-Identifier: Apache-2.0

package integration

import (
	byteorder "encoding/binary" // binary is the exporter's path in this package
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/config"
	"github.com/kernel-exporter/kernel_exporter/decoder"
)

// TestDiffSyscalls compares the syscalls program with Debian's
// libbpf-tools syscount on the same syscalls, over the same windows,
// during a storm of cheap calls (getppid) and of failing calls (kill of a
// pid that cannot exist: ESRCH; close(-1): EBADF; openat of a missing
// path: ENOENT), each on a thread of its own, on top of whatever the
// machine does meanwhile.
//
// syscount counts per syscall, all calls or only failed ones (-x), or only
// those failing with one errno (-e); ours counts every call per syscall
// and failed calls per syscall and errno. So five syscount instances run
// (-i 1: a table every second, read and cleared just before its
// "[HH:MM:SS]" line, where the exporter is scraped): all calls, -x, and
// -e for each errno of the storm. A thread makes each of these failing
// calls every 20 ms from start to end, so that every instance prints a
// table (and a mark) every second. Criteria, for each instance on its own
// window (compareCounts): totals within 2%, each syscall within max(3, 2%
// of the total), and the storm's calls counted in full by both, within 1%.
//
// syscount's program adds to a shared hash value without an atomic
// (val->count++), so two CPUs making the same syscall at once can lose
// increments; each storm thread makes a syscall of its own, and the
// machine's other calls are far fewer. Ours, per CPU, loses none.
func TestDiffSyscalls(t *testing.T) {
	const stressFor = 3 * time.Second
	const noPid = 1 << 30 // above any pid_max (2^22): kill fails with ESRCH
	e := Start(t, "--programs=syscalls")
	if v := e.Scrape().Value("kernel_exporter_config_up", L("config", "syscalls")); v != 1 {
		t.Fatalf("config_up{config=syscalls} = %v, want 1\n%s", v, e.Logs())
	}
	failing := []struct {
		errno unix.Errno
		name  string
		call  func() error
	}{
		{unix.ESRCH, "kill", func() error { return unix.Kill(noPid, 0) }},
		{unix.EBADF, "close", func() error { return unix.Close(-1) }},
		{unix.ENOENT, "openat", func() error {
			_, err := unix.Open("/nonexistent/kernel_exporter-diff", unix.O_RDONLY, 0)
			return err
		}},
	}
	// A failing call of each kind every 20 ms, from before the tools start
	// until they stopped: every instance has a table every second.
	stopBeat := make(chan struct{})
	beatDone := make(chan struct{})
	go func() {
		defer close(beatDone)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopBeat:
				return
			case <-tick.C:
				for _, f := range failing {
					_ = f.call()
				}
			}
		}
	}()
	t.Cleanup(func() {
		select {
		case <-stopBeat:
		default:
			close(stopBeat)
		}
		<-beatDone
	})

	type instance struct {
		what string
		args []string
		run  *scrapedRun
		ours func(ms Metrics) map[string]float64
	}
	bySyscall := func(name string, want map[string]string) func(ms Metrics) map[string]float64 {
		return func(ms Metrics) map[string]float64 {
			out := map[string]float64{}
			mf := ms[name]
			if mf == nil {
				return out
			}
			for _, m := range mf.GetMetric() {
				if !matches(m, want) {
					continue
				}
				for _, lp := range m.GetLabel() {
					if lp.GetName() == "syscall" {
						out[lp.GetValue()] += m.GetCounter().GetValue()
					}
				}
			}
			return out
		}
	}
	insts := []*instance{
		{what: "all calls", args: nil, ours: bySyscall("kernel_syscalls_total", nil)},
		{what: "failed calls (-x)", args: []string{"-x"}, ours: bySyscall("kernel_syscall_errors_total", nil)},
	}
	for _, f := range failing {
		insts = append(insts, &instance{
			what: fmt.Sprintf("calls failing with %s (-e %d)", unix.ErrnoName(f.errno), int(f.errno)),
			args: []string{"-e", fmt.Sprint(int(f.errno))},
			ours: bySyscall("kernel_syscall_errors_total", L("errno", unix.ErrnoName(f.errno))),
		})
	}
	for _, in := range insts {
		args := append(append([]string{}, in.args...), "-i", "1", "-T", "5000")
		in.run = startScraped(t, e, nil, syscountMark, "syscount", args...)
	}
	runs := make([]*scrapedRun, len(insts))
	for i, in := range insts {
		runs[i] = in.run
	}
	a := nextMarks(t, runs...)

	// The storm.
	var made [4]atomic.Uint64 // getppid, then each failing call
	fns := []func() error{func() error {
		for range 10000 {
			unix.Getppid()
		}
		made[0].Add(10000)
		return nil
	}}
	for i, f := range failing {
		fns = append(fns, func() error {
			for range 1000 {
				if err := f.call(); !errors.Is(err, f.errno) {
					return fmt.Errorf("%s: want %s, got %v", f.name, unix.ErrnoName(f.errno), err)
				}
			}
			made[i+1].Add(1000)
			return nil
		})
	}
	if err := storm(stressFor, fns...); err != nil {
		t.Fatal(err)
	}
	b := nextMarks(t, runs...)
	t.Logf("storm: %d getppid, %d kill (ESRCH), %d close (EBADF), %d openat (ENOENT) in %v",
		made[0].Load(), made[1].Load(), made[2].Load(), made[3].Load(), stressFor)

	// The storm's calls, by instance: what each must have counted at least.
	stormCalls := []map[string]uint64{
		{"getppid": made[0].Load(), "kill": made[1].Load(), "close": made[2].Load(), "openat": made[3].Load()},
		{"kill": made[1].Load(), "close": made[2].Load(), "openat": made[3].Load()},
		{"kill": made[1].Load()},
		{"close": made[2].Load()},
		{"openat": made[3].Load()},
	}
	for i, in := range insts {
		ma, mb, _, _, tables := in.run.window(t, a[i], b[i])
		theirs := namedSyscalls(t, parseSyscountTables(tables))
		before, after := in.ours(ma), in.ours(mb)
		ours := map[string]uint64{}
		for name, v := range after {
			if d := v - before[name]; d > 0 {
				ours[name] = uint64(d)
			}
		}
		compareCounts(t, "syscount "+in.what, ours, theirs, stormCalls[i])
	}
	// The beat stops only now: an instance that filters by syscall has a
	// table (the mark that ends table b) only while its calls go on.
	close(stopBeat)
	<-beatDone
}

// compareCounts checks per-syscall counts of ours against syscount's on
// the same window: totals within 2%, each syscall within max(3, 2% of the
// total) (issue 24's bucket criterion), and the storm's syscalls, made
// steadily and only well inside the window: ours at least what the storm
// made, and within max(3, 1% of the reference). It logs every syscall with
// a difference, and the busiest.
//
// The reference is syscount's count, except for a storm syscall where
// syscount counted fewer calls than the storm provably made: syscount lost
// calls there (its non-atomic increment; under load a -x run counted
// 2,319,235 of the storm's 2,399,000 failed kill calls, 3.3% short, while
// we counted 2,399,146), so the storm's own count is the reference for
// that syscall and syscount's loss is added to its total; the loss is
// logged. Every bound stays as it is: the test fails only when ours is
// wrong, not when the peer is.
//
// Other syscalls can differ by more than 2% of their own count: the
// machine's other processes make them in bursts (a Go program starting
// makes hundreds of fcntl and epoll_ctl calls in a millisecond), and a
// burst between syscount's read and our scrape, a few milliseconds apart,
// counts in one window and not the other.
func compareCounts(t reporter, what string, ours, theirs map[string]uint64, storm map[string]uint64) {
	t.Helper()
	// The reference: syscount's counts, raised to the storm's own count
	// where syscount provably lost calls.
	ref := map[string]uint64{}
	for n, v := range theirs {
		ref[n] = v
	}
	for n, want := range storm {
		if theirs[n] < want {
			t.Logf("%s: %s: syscount %d, below the storm's %d (ours %d): syscount lost at least %d calls (%.2f%%); judged against the storm's count",
				what, n, theirs[n], want, ours[n], want-theirs[n], 100*float64(want-theirs[n])/float64(want))
			ref[n] = want
		}
	}
	names := map[string]bool{}
	var to, tt uint64
	for n, v := range ours {
		names[n] = true
		to += v
	}
	for n, v := range ref {
		names[n] = true
		tt += v
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Slice(sorted, func(i, j int) bool {
		return max(ours[sorted[i]], ref[sorted[i]]) > max(ours[sorted[j]], ref[sorted[j]])
	})
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d syscalls; the busiest and every one that differs:\n%24s %10s %10s %8s\n", what, len(sorted), "syscall", "ours", "reference", "diff")
	worst, worstName := int64(0), ""
	for i, n := range sorted {
		d := int64(ours[n]) - int64(ref[n])
		if abs64(d) > abs64(worst) {
			worst, worstName = d, n
		}
		if i < 8 || d != 0 {
			fmt.Fprintf(&b, "%24s %10d %10d %+8d\n", n, ours[n], ref[n], d)
		}
	}
	t.Log(b.String())
	t.Logf("%s: total ours %d, reference %d (%+.3f%%; syscount counted %d); largest difference %s %+d", what, to, tt, 100*(float64(to)/float64(max(tt, 1))-1), sumCounts(theirs), worstName, worst)
	if tt == 0 || math.Abs(float64(to)-float64(tt)) > 0.02*float64(tt) {
		t.Errorf("%s: totals ours %d, reference %d: not within 2%%", what, to, tt)
	}
	for _, n := range sorted {
		if d := math.Abs(float64(ours[n]) - float64(ref[n])); d > math.Max(3, 0.02*float64(tt)) {
			t.Errorf("%s: %s: ours %d, reference %d (syscount %d): not within max(3, 2%% of the total %d)", what, n, ours[n], ref[n], theirs[n], tt)
		}
	}
	for n, want := range storm {
		if ours[n] < want {
			t.Errorf("%s: %s: ours %d, want >= the storm's %d", what, n, ours[n], want)
		}
		if d := math.Abs(float64(ours[n]) - float64(ref[n])); d > math.Max(3, 0.01*float64(ref[n])) {
			t.Errorf("%s: %s (a storm syscall): ours %d, reference %d (syscount %d, storm %d): not within max(3, 1%%)", what, n, ours[n], ref[n], theirs[n], want)
		}
	}
}

// reporter is what compareCounts reports through: a *testing.T, or a
// recorder in TestCompareCountsPeerLoss.
type reporter interface {
	Helper()
	Log(args ...any)
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
}

// recorder is a reporter that keeps the errors.
type recorder struct {
	testing.TB
	errors []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

// TestCompareCountsPeerLoss: with the figures of a run where syscount -x
// lost 3.3% of the storm's failed kill calls, ours, which counted every
// one, passes; ours short by as much fails, and so does ours 3% above the
// storm.
func TestCompareCountsPeerLoss(t *testing.T) {
	storm := map[string]uint64{"kill": 2399000, "close": 1200000, "openat": 800000}
	theirs := map[string]uint64{"kill": 2319235, "close": 1200010, "openat": 800020, "newfstatat": 900}
	for _, tc := range []struct {
		kill uint64
		pass bool
	}{{2399146, true}, {2319235, false}, {2399000 * 103 / 100, false}} {
		ours := map[string]uint64{"kill": tc.kill, "close": 1200012, "openat": 800020, "newfstatat": 901}
		r := &recorder{TB: t}
		compareCounts(r, "syscount -x", ours, theirs, storm)
		if pass := len(r.errors) == 0; pass != tc.pass {
			t.Errorf("ours kill %d, syscount %d, storm %d: passed %v, want %v; errors: %q", tc.kill, theirs["kill"], storm["kill"], pass, tc.pass, r.errors)
		}
	}
}

// sumCounts is the sum of counts' values.
func sumCounts(counts map[string]uint64) uint64 {
	var s uint64
	for _, v := range counts {
		s += v
	}
	return s
}

// syscountUnknown is how syscount prints a number its table has no name
// for (its table is older than the kernel's: 439, faccessat2, is one).
var syscountUnknown = regexp.MustCompile(`^\[unknown: (\d+)\]$`)

// namedSyscalls renames syscount's "[unknown: N]" rows with the name our
// syscall decoder gives N, so that both sides name a syscall alike.
func namedSyscalls(t *testing.T, counts map[string]uint64) map[string]uint64 {
	t.Helper()
	chain, err := decoder.NewEnv(16).NewChain([]config.Decoder{{Name: "syscall"}}, 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for name, n := range counts {
		if m := syscountUnknown.FindStringSubmatch(name); m != nil {
			nr, _ := strconv.ParseUint(m[1], 10, 32)
			if ours, err := chain.Decode(byteorder.NativeEndian.AppendUint32(nil, uint32(nr))); err == nil {
				name = ours
			}
		}
		out[name] += n
	}
	return out
}

// SPDX-License-Identifier: Apache-2.0

package budget_test

// Benchmarks of the CPU budget (root; they load BPF programs):
//
//	go test -run '^$' -bench SamplingCost -count 3 ./budget/
//	go test -run '^$' -bench BundledCPU -benchtime 1x ./budget/
//
// BenchmarkSamplingCost: what run-time statistics add per event while on.
// It times a tight getpid() loop with the bundled syscalls program
// attached (it runs at every syscall exit) with statistics off, then on
// (a BPF_ENABLE_STATS descriptor held), and reports the difference per
// call: the added cost per program run while a window is open. Times the
// duty cycle (Window/Period) it is the average.
//
// BenchmarkBundledCPU: each bundled config's BPF CPU seconds per second
// under the heaviest loads of the integration tests, the figures behind
// DefaultCPUBudget.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/budget"
	"github.com/kernel-exporter/kernel_exporter/exporter"
	"github.com/kernel-exporter/kernel_exporter/internal/workload"
	"github.com/kernel-exporter/kernel_exporter/programs"
)

func needRoot(b *testing.B) {
	b.Helper()
	if os.Geteuid() != 0 {
		b.Skip("needs root to load BPF programs")
	}
}

func load(b *testing.B, names ...string) *exporter.Exporter {
	b.Helper()
	var src []exporter.Source
	for _, n := range names {
		src = append(src, exporter.Source{Name: n})
	}
	e := exporter.New(exporter.Options{Sources: src, CacheSize: 1 << 20, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	e.Start(context.Background())
	<-e.Loaded()
	return e
}

// BenchmarkSamplingCost reports, from rounds alternating statistics off
// and on (the fastest round of each kept, as other load on the machine only
// slows a round), the ns one getpid() costs with no program, with the
// syscalls program and statistics off, and with statistics on; then the
// program's own cost (with minus without) and what statistics add per run
// while on. Run it once: -benchtime 1x (KE_SAMPLING_ROUNDS rounds of
// 2,000,000 calls each, default 7).
func BenchmarkSamplingCost(b *testing.B) {
	needRoot(b)
	if s := workload.BPFStatsEnabled(); s != "0" {
		b.Skipf("kernel.bpf_stats_enabled is %q: statistics are on already", s)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const calls = 2000000
	rounds := 7
	if v, err := strconv.Atoi(os.Getenv("KE_SAMPLING_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	timeLoop := func() float64 {
		t0 := time.Now()
		workload.Getpid(calls)
		return float64(time.Since(t0).Nanoseconds()) / calls
	}
	best := func(cur *float64, v float64) {
		if *cur == 0 || v < *cur {
			*cur = v
		}
	}
	var bare, off, on float64
	for range rounds {
		best(&bare, timeLoop())
	}
	e := load(b, "syscalls")
	defer e.Close()
	if f := e.Failed(); len(f) > 0 {
		b.Fatalf("syscalls: %s", f[0].Reason)
	}
	var prog *ebpf.Program
	for _, st := range e.Status.States() {
		for _, p := range st.Programs {
			prog = p.Prog
		}
	}
	var onRuns uint64
	var onTime time.Duration
	for range rounds {
		best(&off, timeLoop())
		c, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
		if err != nil {
			b.Fatal(err)
		}
		s0, _ := prog.Stats()
		best(&on, timeLoop())
		s1, _ := prog.Stats()
		c.Close()
		onRuns += s1.RunCount - s0.RunCount
		onTime += s1.Runtime - s0.Runtime
	}
	own, added := off-bare, on-off
	duty := budget.DefaultWindow.Seconds() / budget.DefaultPeriod.Seconds()
	b.ReportMetric(own, "ns-program/call")
	b.ReportMetric(added, "ns-stats/call")
	b.ReportMetric(added*duty, "ns-stats-avg/call")
	fmt.Printf("getpid, best of %d rounds of %d: %.1f ns no program, %.1f ns syscalls program (statistics off), %.1f ns statistics on\n"+
		"  program's own cost %.1f ns/event; statistics add %.1f ns/event while on (%.0f%% of it); run_time/run_cnt while on %.1f ns\n"+
		"  duty %.3f (%v in %v): %.2f ns/event on average = %.1f%% of the program's own cost\n",
		rounds, calls, bare, off, on, own, added, 100*added/own, float64(onTime.Nanoseconds())/float64(max(onRuns, 1)),
		duty, budget.DefaultWindow, budget.DefaultPeriod, added*duty, 100*added*duty/own)
}

// BenchmarkBundledCPU loads every bundled program and runs, one after the
// other for KE_BUDGET_SECONDS (default 10) each, the loads of the
// integration tests: "mixed" (execs of /bin/true every 10 ms and loopback
// TCP every 5 ms as in TestPerfLoad, O_DIRECT 4 KiB I/O, failing open()
// calls), "storm-1" (a tight getpid() loop on one thread, the heaviest
// syscall load: BenchmarkGetpidOverhead's) and "storm-all" (one such loop
// per CPU). It prints each config's BPF CPU seconds per second.
func BenchmarkBundledCPU(b *testing.B) {
	needRoot(b)
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		b.Fatal(err)
	}
	defer stats.Close()
	e := load(b, programs.Names()...)
	defer e.Close()
	d := 10 * time.Second
	if v, err := time.ParseDuration(os.Getenv("KE_BUDGET_SECONDS") + "s"); err == nil && v > 0 {
		d = v
	}
	configs := budget.StatusConfigs(e.Status)
	read := func() map[budget.Program]time.Duration {
		out := map[budget.Program]time.Duration{}
		for _, c := range configs() {
			for _, p := range c.Programs {
				if s, err := p.Stats(); err == nil {
					out[p] = s.Runtime
				}
			}
		}
		return out
	}
	dir := b.TempDir()
	loads := []struct {
		name string
		run  func(stop <-chan struct{}) error
	}{
		{"mixed", func(stop <-chan struct{}) error { return mixed(dir, stop) }},
		{"storm-1", func(stop <-chan struct{}) error { return storm(1, stop) }},
		{"storm-all", func(stop <-chan struct{}) error { return storm(runtime.NumCPU(), stop) }},
	}
	results := map[string]map[string]float64{}
	for _, l := range loads {
		stop := make(chan struct{})
		errc := make(chan error, 1)
		go func() { errc <- l.run(stop) }()
		start := read()
		t0 := time.Now()
		time.Sleep(d)
		end := read()
		el := time.Since(t0)
		close(stop)
		if err := <-errc; err != nil {
			b.Fatalf("%s: %v", l.name, err)
		}
		results[l.name] = budget.Rates(configs(), start, end, el)
	}
	var names []string
	for n := range results["mixed"] {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Printf("\nBPF CPU s/s per config (%d CPUs, %v per load, statistics on)\n%-16s %10s %10s %10s\n", runtime.NumCPU(), d, "config", "mixed", "storm-1", "storm-all")
	for _, n := range names {
		fmt.Printf("%-16s %10.5f %10.5f %10.5f\n", n, results["mixed"][n], results["storm-1"][n], results["storm-all"][n])
	}
	for _, st := range e.Failed() {
		fmt.Printf("%-16s down on this kernel\n", st.Name)
	}
}

// storm runs n threads of tight getpid() loops until stop.
func storm(n int, stop <-chan struct{}) error {
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Go(func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			for {
				select {
				case <-stop:
					return
				default:
				}
				workload.Getpid(10000)
			}
		})
	}
	wg.Wait()
	return nil
}

// mixed runs TestPerfLoad's workload (execs, loopback TCP), O_DIRECT I/O
// and failing open() calls until stop.
func mixed(dir string, stop <-chan struct{}) error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("hello\n"))
			c.Close()
		}
	}()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	every := func(d time.Duration, fn func() error) {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(d):
				}
				if err := fn(); err != nil {
					mu.Lock()
					first = cmpOr(first, err)
					mu.Unlock()
					return
				}
			}
		})
	}
	every(5*time.Millisecond, func() error {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			return err
		}
		buf := make([]byte, 16)
		c.Read(buf)
		return c.Close()
	})
	every(10*time.Millisecond, func() error { return exec.Command("/bin/true").Run() })
	every(time.Millisecond, func() error { return workload.DirectIO(filepath.Join(dir, "direct.dat"), 64) })
	every(time.Millisecond, func() error {
		return workload.FailingOpens(1000)
	})
	wg.Wait()
	return first
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestDiffRunqlat compares the runqlat program with Debian's libbpf-tools
// runqlat on the same events, over the same window, while this process
// keeps more threads runnable than there are CPUs: a spinner pinned to
// each CPU (so that every CPU always has a task and preempts the others),
// four pairs of threads bouncing a byte over pipes (a wakeup and a switch
// per hop), and /bin/true forked and executed in a loop (a
// sched_wakeup_new, then the new task's first wait, and a wakeup of the
// parent, which vfork blocks).
//
// Three comparisons:
//
//   - Ours against runqlat -T 1 (every task), bucket by bucket, with issue
//     24's criteria (compareHist). runqlat runs twice, attached before and
//     after the exporter, and waits under 16 µs count as one bucket: two
//     programs on the same events read the clock up to half a microsecond
//     apart (see compareHist). Each instance prints a table every second,
//     and the exporter is scraped at each table's timestamp line; a window
//     runs from an instance's last table before the stress to its first
//     after it. runqlat counts whole microseconds (ns / 1000) into log2
//     slots, ours nanoseconds into exp2 slots: their slot s is our slot
//     s+11, whose edges are 2.4% above theirs (usecsShift).
//
//   - Ours against the kernel's count: with a spinner on each CPU no CPU
//     ever switches to idle, so every context switch (/proc/stat ctxt)
//     switches a waiting task in, which is what we count. Read inside the
//     stress around two scrapes (ctxt before and after each), our count
//     must lie within 2% of the kernel's inner and outer windows.
//
//   - runqlat -p <this process> against the kernel's per-thread counts:
//     every switch-in of a thread of this process follows one switch-out,
//     which /proc/<pid>/task/<tid>/status counts as a voluntary or
//     nonvoluntary context switch; summed over the threads between the
//     tool's marks, within 2%. This checks the tool and the marks, not
//     ours: more than the kernel's count means a wrong window and fails;
//     fewer means runqlat lost switches, which is logged, since a
//     differential test fails only when ours is wrong.
func TestDiffRunqlat(t *testing.T) {
	const (
		metric    = "kernel_run_queue_latency_seconds"
		stressFor = 6 * time.Second
		slots     = 26 // runqlat's MAX_SLOTS
	)
	e, before, after := startAround(t, "runqlat", nil, "runqlat", "-T", "1")
	self := os.Getpid()
	own := startScraped(t, e, func() (any, error) { return taskSwitches(self) }, bccTimeMark, "runqlat", "-T", "-p", strconv.Itoa(self), "1")
	runs := []*scrapedRun{before, after, own}
	a := nextMarks(t, runs...)
	stress := startRunqStress(t)
	time.Sleep(time.Second)
	p1 := procStatCtxt(t)
	s1 := e.Scrape()
	p3 := procStatCtxt(t)
	time.Sleep(stressFor - 2*time.Second)
	p4 := procStatCtxt(t)
	s2 := e.Scrape()
	p2 := procStatCtxt(t)
	time.Sleep(time.Second)
	counts := stress.stop(t)
	b := nextMarks(t, runs...)
	t.Logf("stress: %d ping-pong round trips, %d spinner processes, %d fork+exec of /bin/true", counts.roundTrips, counts.spins, counts.execs)
	if counts.execs < 10 || counts.roundTrips < 1000 {
		t.Fatalf("the stress did too little: %+v", counts)
	}

	// Ours against runqlat, bucket by bucket.
	var ours, refs [2][]uint64
	for i, r := range runs[:2] {
		ma, mb, _, _, tables := r.window(t, a[i], b[i])
		ours[i] = alignOurs(subSlots(t, mb.expSlots(t, metric, nil), ma.expSlots(t, metric, nil)), slots, usecsShift)
		refs[i] = alignRef(parseLog2Tables(t, tables)[""], slots)
		t.Logf("runqlat attached %s ours: tables %d..%d", [2]string{"before", "after"}[i], a[i]+1, b[i])
	}
	compareHist(t, "run-queue latency, ours against runqlat", usecsHist(slots), ours, refs, 16000, [2]bool{true, true})

	// Ours against the kernel's context switches, inside the stress.
	c1, _, _ := s1.Hist(metric, nil, 1)
	c2, _, _ := s2.Hist(metric, nil, 1)
	got, inner, outer := c2-c1, p4-p3, p2-p1
	t.Logf("inside the stress: ours +%d switch-ins; /proc/stat ctxt +%d inside, +%d around the scrapes (%+.2f%% of inside)",
		got, inner, outer, 100*(float64(got)/float64(max(inner, 1))-1))
	if float64(got) < 0.98*float64(inner) || float64(got) > 1.02*float64(outer) {
		t.Errorf("%s count moved by %d while the kernel switched %d (inside) to %d (around) times: not within 2%%", metric, got, inner, outer)
	}

	// runqlat -p against this process's context switches.
	_, _, xa, xb, tables := own.window(t, a[2], b[2])
	var tool uint64
	for _, n := range parseLog2Tables(t, tables)[""] {
		tool += n
	}
	kernel := xb.(uint64) - xa.(uint64)
	t.Logf("this process: runqlat -p %d counted %d switch-ins, /proc/%d/task/*/status %d context switches (%+.2f%%)",
		self, tool, self, kernel, 100*(float64(tool)/float64(max(kernel, 1))-1))
	if kernel < 1000 || float64(tool) > 1.02*float64(kernel) {
		t.Errorf("runqlat -p %d counted %d switch-ins, the kernel %d context switches of its threads: not within 2%%", self, tool, kernel)
	} else if float64(tool) < 0.98*float64(kernel) {
		t.Logf("runqlat -p %d counted %d switch-ins, below the kernel's %d context switches of its threads by more than 2%%: runqlat lost %d", self, tool, kernel, kernel-tool)
	}
}

// procStatCtxt returns the context switches since boot, /proc/stat's ctxt.
func procStatCtxt(t *testing.T) uint64 {
	t.Helper()
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "ctxt "); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			if err != nil {
				t.Fatalf("/proc/stat: %q: %v", line, err)
			}
			return n
		}
	}
	t.Fatal("/proc/stat has no ctxt line")
	return 0
}

// taskSwitches returns the voluntary and nonvoluntary context switches of
// every thread of process pid, summed (/proc/<pid>/task/*/status).
func taskSwitches(pid int) (uint64, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	if err != nil || len(tasks) == 0 {
		return 0, fmt.Errorf("threads of %d: %v", pid, err)
	}
	var total uint64
	for _, f := range tasks {
		data, err := os.ReadFile(f)
		if err != nil {
			return 0, err
		}
		for _, line := range strings.Split(string(data), "\n") {
			for _, p := range []string{"voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:"} {
				if v, ok := strings.CutPrefix(line, p); ok {
					n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
					if err != nil {
						return 0, fmt.Errorf("%s: %q: %v", f, line, err)
					}
					total += n
				}
			}
		}
	}
	return total, nil
}

// runqStress is the scheduler stress of TestDiffRunqlat, running.
type runqStress struct {
	done                     chan struct{}
	wg                       sync.WaitGroup
	roundTrips, spins, execs atomic.Uint64
	pps                      []*pingPong
	spinners                 []*exec.Cmd
}

type runqCounts struct{ roundTrips, spins, execs uint64 }

// startRunqStress starts a spinner process pinned to each CPU this process
// may use, four ping-pong thread pairs and a fork+exec loop.
func startRunqStress(t *testing.T) *runqStress {
	t.Helper()
	s := &runqStress{done: make(chan struct{})}
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		t.Fatal(err)
	}
	stopped := func() bool {
		select {
		case <-s.done:
			return true
		default:
			return false
		}
	}
	// The spinners are processes of their own: this process's garbage
	// collector stops its threads at every cycle, and a CPU whose spinner
	// thread waits for it would switch to idle.
	for cpu := range runtime.NumCPU() * 4 {
		if !allowed.IsSet(cpu) {
			continue
		}
		cmd := exec.Command("taskset", "-c", strconv.Itoa(cpu), "sh", "-c", "while :; do :; done")
		if err := cmd.Start(); err != nil {
			t.Fatalf("start a spinner on CPU %d (taskset, from util-linux): %v", cpu, err)
		}
		s.spinners = append(s.spinners, cmd)
		s.spins.Add(1)
	}
	for range 4 {
		pp, err := newPingPong()
		if err != nil {
			t.Fatal(err)
		}
		s.pps = append(s.pps, pp)
		go pp.serve()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			for !stopped() {
				if err := pp.roundTrip(); err != nil {
					return
				}
				s.roundTrips.Add(100)
			}
		}()
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for !stopped() {
			if exec.Command("/bin/true").Run() == nil {
				s.execs.Add(1)
			}
		}
	}()
	t.Cleanup(func() { s.stop(t) })
	return s
}

// stop ends the stress, waits for it, and returns what it did.
func (s *runqStress) stop(t *testing.T) runqCounts {
	select {
	case <-s.done:
	default:
		close(s.done)
		for _, cmd := range s.spinners {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		s.wg.Wait()
		for _, pp := range s.pps {
			pp.close()
		}
	}
	return runqCounts{s.roundTrips.Load(), s.spins.Load(), s.execs.Load()}
}

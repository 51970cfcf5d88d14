// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// churnYAML exports testdata/perf/churn.bpf.c: execs by cgroup and pid.
const churnYAML = `metrics:
  counters:
    - name: soak_execs_total
      help: execs by cgroup and pid (soak test)
      max_series: 100000
      labels:
        - name: cgroup
          size: 8
          decoders:
            - name: cgroup
        - name: pid
          size: 4
          padding: 4
          decoders:
            - name: uint
`

// TestPerfSoak scrapes once a second for KE_SOAK_SECONDS (default 600,
// 90 with CI=true) an exporter running every bundled program plus a test
// config labelled by cgroup and pid, while two workers spawn short-lived
// processes, each in a new cgroup and under a new command name (label
// churn in the exec, churn and cgroup-decoded series). Every scrape must
// succeed, and resident memory must stay within 10% of its level at the
// end of the warm-up (KE_SOAK_WARMUP_SECONDS, default 60, 30 with
// CI=true): the decode caches must follow the maps instead of growing with
// every pid and cgroup ever seen.
func TestPerfSoak(t *testing.T) {
	total := perfSeconds("KE_SOAK_SECONDS", 600, 90)
	warmup := perfSeconds("KE_SOAK_WARMUP_SECONDS", 60, 30)
	if warmup >= total {
		t.Fatalf("warm-up %v must be shorter than the soak %v", warmup, total)
	}
	_, _, v2, ok := cgroupMounts(t)
	if !ok {
		t.Fatal("no cgroup2 file system in /proc/self/mountinfo: the soak test needs one")
	}
	dir := t.TempDir()
	compileChurn(t, dir)
	writeProbeConfig(t, dir, "churn", churnYAML)
	e := Start(t, "--programs=all", "--config.dir="+dir, "--config.names=churn")
	if v := e.Scrape().Value("kernel_exporter_config_up", L("config", "churn")); v != 1 {
		t.Fatalf("churn config is not up\n%s", e.Logs())
	}

	w := startChurn(t, v2.dir, filepath.Join(dir, "bin"))
	client := &http.Client{Timeout: 10 * time.Second}
	start := time.Now()
	type sample struct {
		at  time.Duration
		rss int
	}
	var samples []sample
	var baseline int
	var firstCgroups map[string]bool
	var execs0 float64
	var goal0 float64 // the GC's heap goal after the warm-up: twice the live heap
	// The GC's heap goal at each second of the last 10 s of the warm-up
	// and of the soak: one reading depends on what was in flight at the
	// last collection (a scrape's buffers are live while it runs).
	var goalsWarm, goalsEnd []float64
	var headroom int // KiB the heap may still grow to that goal without any leak
	var spawned0 int64
	failed := 0
	for tick := time.NewTicker(time.Second); ; <-tick.C {
		at := time.Since(start)
		if at > total {
			tick.Stop()
			break
		}
		if at >= warmup-10*time.Second && baseline == 0 || at >= total-10*time.Second {
			// The last 10 s of the warm-up and of the soak: the scrape
			// also reads the GC's heap goal (see goalsWarm, goalsEnd).
			g := e.Scrape().Value("go_memstats_next_gc_bytes", nil)
			if baseline == 0 {
				goalsWarm = append(goalsWarm, g)
			} else {
				goalsEnd = append(goalsEnd, g)
			}
		} else if _, err := scrapeBody(client, e.URL); err != nil {
			failed++
			if failed <= 5 {
				t.Errorf("scrape at %v: %v", at.Round(time.Second), err)
			}
		}
		samples = append(samples, sample{at, rssKB(t, e.pid())})
		if at >= warmup && baseline == 0 {
			// The level at the end of the warm-up: the highest of its
			// last 10 samples, so that one sample taken just after a
			// garbage collection does not set a low bar.
			for _, s := range samples[max(0, len(samples)-10):] {
				baseline = max(baseline, s.rss)
			}
			ms := e.Scrape()
			goal0 = ms.Value("go_memstats_next_gc_bytes", nil)
			headroom = int((goal0 - ms.Value("go_memstats_heap_alloc_bytes", nil)) / 1024)
			firstCgroups = setOf(ms.LabelValues("kernel_soak_execs_total", "cgroup"))
			execs0 = ms.Value("kernel_process_execs_total", nil)
			spawned0 = w.spawned.Load()
			t.Logf("after %v of warm-up: RSS %d KiB, %d processes and cgroups so far, %d churn series; %s",
				at.Round(time.Second), baseline, w.spawned.Load(), len(firstCgroups), goHeap(ms))
		}
	}
	w.stop()

	ms := e.Scrape()
	// Every process runs in a new cgroup, whose id is never reused (pids
	// are, after pid_max processes): a series's cgroup identifies it.
	lastCgroups := ms.LabelValues("kernel_soak_execs_total", "cgroup")
	common := 0
	for _, c := range lastCgroups {
		if firstCgroups[c] {
			common++
		}
	}
	peak, last := 0, samples[len(samples)-1].rss
	for _, s := range samples {
		if s.at > warmup {
			peak = max(peak, s.rss)
		}
	}
	execs := ms.Value("kernel_process_execs_total", nil) - execs0
	t.Logf("soak %v: %d scrapes, %d failed; %d processes and cgroups spawned; RSS after warm-up %d KiB, peak after %d KiB (%+.1f%%), last %d KiB; churn series %d at the end, %d of them already there after the warm-up; execs counted after warm-up %.0f",
		total, len(samples), failed, w.spawned.Load(), baseline, peak, 100*float64(peak-baseline)/float64(baseline), last,
		len(lastCgroups), common, execs)
	t.Logf("at the end: %s", goHeap(ms))
	if err := w.err(); err != nil {
		t.Fatalf("churn workload: %v", err)
	}
	if n := w.spawned.Load(); n < 1000 {
		t.Errorf("only %d processes spawned: not enough churn", n)
	}
	if len(lastCgroups) < 500 || common > len(lastCgroups)/10 {
		t.Errorf("cgroup and pid labels did not churn: %d series at the end, %d also present after the warm-up", len(lastCgroups), common)
	}
	// Processes counted as spawned after the warm-up scrape all exec'd
	// after it, except at most one per worker that was already running.
	if after := w.spawned.Load() - spawned0 - 2; ms.Value("kernel_exporter_config_up", L("config", "exec")) == 1 && execs < float64(after) {
		t.Errorf("kernel_process_execs_total moved by %.0f after the warm-up, less than the %d processes spawned", execs, after)
	}
	// A leak grows the live heap, and with it the GC's goal (GOGC=100:
	// twice the live heap after the last collection). RSS alone also
	// moves with the GC's pacing: between two collections the heap fills
	// up to the goal, and pages the scavenger gave back are faulted in
	// again, with a live heap that does not grow at all (seen: goal 21.7
	// then 21.8 MiB while RSS rose 8.6%). So the goal must not grow more
	// than 10%, and RSS not more than 10% or the heap's headroom to its
	// goal at the end of the warm-up, whichever is more.
	// One reading of the goal moves with what a collection found in
	// flight: the lowest of the soak's last 10 s, which a leak raises
	// too, against the highest of the warm-up's last 10 s (seen: one
	// reading 34.8 MiB after the warm-up, 40.0 at the end, with 5% more
	// churn series).
	warmGoal, endGoal := slices.Max(append(goalsWarm, goal0)), slices.Min(append(goalsEnd, ms.Value("go_memstats_next_gc_bytes", nil)))
	t.Logf("GC heap goal: last 10 s of the warm-up %.1f-%.1f MiB, of the soak %.1f-%.1f MiB", slices.Min(append(goalsWarm, goal0))/(1<<20), warmGoal/(1<<20), endGoal/(1<<20), slices.Max(append(goalsEnd, endGoal))/(1<<20))
	if warmGoal > 0 && endGoal > warmGoal*1.1 {
		t.Errorf("the Go GC's heap goal (twice the live heap) grew from at most %.1f MiB in the warm-up's last 10 s to at least %.1f MiB in the soak's, more than 10%%", warmGoal/(1<<20), endGoal/(1<<20))
	}
	if limit := baseline + max(baseline/10, headroom); peak > limit {
		t.Errorf("RSS grew from %d KiB after the warm-up to a peak of %d KiB, more than 10%% or the GC's headroom of %d KiB (limit %d KiB)", baseline, peak, headroom, limit)
	}
}

func setOf(v []string) map[string]bool {
	m := make(map[string]bool, len(v))
	for _, s := range v {
		m[s] = true
	}
	return m
}

// compileChurn builds testdata/perf/churn.bpf.c into dir/churn.bpf.o.
func compileChurn(t *testing.T, dir string) {
	t.Helper()
	compileBPF(t, filepath.Join("integration", "testdata", "perf", "churn.bpf.c"), filepath.Join(dir, "churn.bpf.o"))
}

// churn is the soak workload: workers that each, in a loop, create a
// cgroup under a parent made for the test, start /bin/true in it (clone3
// CLONE_INTO_CGROUP) through a symlink with one of 1500 names (so the
// command name changes), wait for it, and remove the cgroup.
type churn struct {
	parent  string
	spawned atomic.Int64
	done    chan struct{}
	wg      sync.WaitGroup
	first   atomic.Pointer[error]
	once    sync.Once
}

const churnNames = 1500

func startChurn(t *testing.T, cgroup2, bin string) *churn {
	t.Helper()
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < churnNames; i++ {
		if err := os.Symlink("/bin/true", filepath.Join(bin, fmt.Sprintf("kxs-%04d", i))); err != nil {
			t.Fatal(err)
		}
	}
	w := &churn{parent: filepath.Join(cgroup2, randomName(t, "kx-soak-")), done: make(chan struct{})}
	if err := os.Mkdir(w.parent, 0o755); err != nil {
		t.Fatalf("create cgroup: %v", err)
	}
	t.Cleanup(func() {
		w.stop()
		// Children are removed by the workers; remove leftovers, then
		// the parent.
		entries, _ := os.ReadDir(w.parent)
		for _, e := range entries {
			if e.IsDir() {
				unix.Rmdir(filepath.Join(w.parent, e.Name()))
			}
		}
		if err := unix.Rmdir(w.parent); err != nil {
			t.Errorf("remove cgroup %s: %v", w.parent, err)
		}
	})
	for i := 0; i < 2; i++ {
		w.wg.Add(1)
		go w.run(i, bin)
	}
	return w
}

func (w *churn) run(id int, bin string) {
	defer w.wg.Done()
	for n := 0; ; n++ {
		select {
		case <-w.done:
			return
		default:
		}
		if err := w.once1(fmt.Sprintf("w%d-%d", id, n), filepath.Join(bin, fmt.Sprintf("kxs-%04d", (2*n+id)%churnNames))); err != nil {
			w.first.CompareAndSwap(nil, &err)
			return
		}
		w.spawned.Add(1)
		time.Sleep(5 * time.Millisecond)
	}
}

// once1 runs one process in a new cgroup named name.
func (w *churn) once1(name, path string) error {
	cg := filepath.Join(w.parent, name)
	if err := os.Mkdir(cg, 0o755); err != nil {
		return fmt.Errorf("create cgroup: %w", err)
	}
	fd, err := unix.Open(cg, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Rmdir(cg)
		return fmt.Errorf("open cgroup: %w", err)
	}
	cmd := exec.Command(path)
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	runErr := cmd.Run()
	unix.Close(fd)
	// An exited child can take a moment to leave its cgroup.
	var rmErr error
	for i := 0; i < 100; i++ {
		if rmErr = unix.Rmdir(cg); !errors.Is(rmErr, unix.EBUSY) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if runErr != nil {
		return fmt.Errorf("run %s in %s: %w", path, cg, runErr)
	}
	if rmErr != nil {
		return fmt.Errorf("remove cgroup %s: %w", cg, rmErr)
	}
	return nil
}

func (w *churn) stop() {
	w.once.Do(func() {
		close(w.done)
		w.wg.Wait()
	})
}

func (w *churn) err() error {
	if p := w.first.Load(); p != nil {
		return *p
	}
	return nil
}

// goHeap summarises the exporter's Go heap from its go_memstats metrics, to
// tell a heap that grows (a leak) from a GC that lets it grow to its goal.
func goHeap(ms Metrics) string {
	mib := func(name string) float64 { return ms.Value(name, nil) / (1 << 20) }
	return fmt.Sprintf("Go heap in use %.1f MiB, allocated %.1f MiB, GC goal %.1f MiB, heap from the OS %.1f MiB (released %.1f)",
		mib("go_memstats_heap_inuse_bytes"), mib("go_memstats_heap_alloc_bytes"), mib("go_memstats_next_gc_bytes"),
		mib("go_memstats_heap_sys_bytes"), mib("go_memstats_heap_released_bytes"))
}

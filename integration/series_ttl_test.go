// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ttlYAML exports testdata/ttl/getppid.bpf.c: getppid calls per process,
// expiring after 5 s idle.
const ttlYAML = `metrics:
  counters:
    - name: ttl_calls_total
      help: getppid calls by process (series ttl test)
      ttl: 5s
      labels:
        - name: pid
          size: 4
          decoders:
            - name: uint
`

// ttlChildEnv makes this test binary a child that calls getppid
// ttlChildCalls times and exits (see init).
const (
	ttlChildEnv   = "KERNEL_EXPORTER_IT_TTL_CHILD"
	ttlChildCalls = 10
)

func init() {
	if os.Getenv(ttlChildEnv) == "" {
		return
	}
	for range ttlChildCalls {
		syscall.Getppid()
	}
	os.Exit(0)
}

// TestSeriesTTL runs a config keyed by pid with ttl: 5s. 40 short-lived
// processes each make 10 getppid calls: their 40 series appear with 10
// each; then, with no scrape (the exporter's background reads do it),
// within 20 s their keys are gone from the BPF map, the next scrape serves
// none of them, and kernel_exporter_series_expired_total counts at least
// 40. Meanwhile the test process calls getppid 50 times every 200 ms: its
// key stays, and at the end its series equals the number of calls it
// made, exactly.
func TestSeriesTTL(t *testing.T) {
	dir := t.TempDir()
	compileBPF(t, filepath.Join("integration", "testdata", "ttl", "getppid.bpf.c"), filepath.Join(dir, "ttl.bpf.o"))
	writeProbeConfig(t, dir, "ttl", ttlYAML)
	e := Start(t, "--config.dir="+dir, "--config.names=ttl")
	if v := e.Scrape().Value("kernel_exporter_config_up", L("config", "ttl")); v != 1 {
		t.Fatalf("ttl config is not up\n%s", e.Logs())
	}
	const metric = "kernel_ttl_calls_total"
	self := strconv.Itoa(os.Getpid())

	// The long-lived process: this one, 50 calls every 200 ms.
	var (
		mu    sync.Mutex
		calls int
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			mu.Lock()
			for range 50 {
				syscall.Getppid()
			}
			calls += 50
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	})
	stopCalls := func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}
	defer stopCalls()

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var pids []string
	for range 40 {
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), ttlChildEnv+"=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		pids = append(pids, strconv.Itoa(cmd.Process.Pid))
	}
	done := time.Now()
	ms := e.Scrape()
	for _, pid := range pids {
		if v := ms.Value(metric, L("pid", pid)); v != ttlChildCalls {
			t.Fatalf("pid %s: %v getppid calls, want %d\n%s", pid, v, ttlChildCalls, ms.seriesDump(metric))
		}
	}

	// With no scrape at all (the exporter's background reads expire
	// keys), within 20 s of the last child every child's key is gone from
	// the BPF map, and this process's key stays.
	m := findMap(t, "ttl_calls_total", 0)
	left := func() (int, bool) {
		keys := map[uint32]bool{}
		var k uint32
		var v uint64
		it := m.Iterate()
		for it.Next(&k, &v) {
			keys[k] = true
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, pid := range pids {
			p, _ := strconv.Atoi(pid)
			if keys[uint32(p)] {
				n++
			}
		}
		return n, keys[uint32(os.Getpid())]
	}
	for {
		n, active := left()
		if !active {
			t.Fatal("the active process's key was deleted from the BPF map")
		}
		if n == 0 {
			t.Logf("the 40 short-lived keys left the BPF map %.1f s after the last process ended, with no scrape", time.Since(done).Seconds())
			break
		}
		if time.Since(done) > 20*time.Second {
			t.Fatalf("%d of 40 short-lived keys still in the BPF map 20 s after their process ended", n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	ms = e.Scrape()
	for _, pid := range pids {
		if ms.Series(metric, L("pid", pid)) != 0 {
			t.Fatalf("pid %s still served after its key was deleted\n%s", pid, ms.seriesDump(metric))
		}
	}
	if n := ms.Value("kernel_exporter_series_expired_total", L("config", "ttl", "metric", metric)); n < 40 {
		t.Errorf("kernel_exporter_series_expired_total = %v, want at least 40", n)
	}
	if ms.Series(metric, L("pid", self)) != 1 {
		t.Fatalf("the active process's series is gone\n%s", ms.seriesDump(metric))
	}

	// No increment of the active process is lost.
	stopCalls()
	mu.Lock()
	want := calls
	mu.Unlock()
	if got := e.Scrape().Value(metric, L("pid", self)); got != float64(want) {
		t.Errorf("active process: %v getppid calls served, want the %d it made", got, want)
	} else {
		t.Logf("active process: %d getppid calls, all counted", want)
	}
}

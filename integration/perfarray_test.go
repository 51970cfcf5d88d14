// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// perfArrayComm is the thread name perf_getpgid.bpf.c counts.
const perfArrayComm = "ke_perfarray"

// getpgidCalls calls getpgid(pid) calls[pid] times for each pid, on a
// thread named ke_perfarray. The pids do not exist (ESRCH): only the
// argument matters. The thread ends with the goroutine (it stays locked),
// so the name never leaks to other goroutines.
func getpgidCalls(t *testing.T, calls map[int]int) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // not unlocked: the renamed thread exits
		name, _ := unix.BytePtrFromString(perfArrayComm)
		if err := unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(name)), 0, 0, 0); err != nil {
			errc <- err
			return
		}
		for pid, n := range calls {
			for range n {
				if _, err := unix.Getpgid(pid); err != unix.ESRCH {
					errc <- fmt.Errorf("getpgid(%d): %v, want ESRCH", pid, err)
					return
				}
			}
		}
		errc <- nil
	}()
	if err := <-errc; err != nil {
		t.Fatalf("%s thread: %v", perfArrayComm, err)
	}
}

// perfArrayConfig writes testdata/compat/perf_getpgid.{bpf.o,yaml} into a
// temporary --config.dir, with extra lines appended to the counter's keys
// (as "      flush_interval: 2s\n"), and returns the directory.
func perfArrayConfig(t *testing.T, extra string) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join("integration", "testdata", "compat", "perf_getpgid")
	compileBPF(t, src+".bpf.c", filepath.Join(dir, "perf_getpgid.bpf.o"))
	y, err := os.ReadFile(filepath.Join(repoRoot, src+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(y), "      perf_event_array: true\n", "      perf_event_array: true\n"+extra, 1)
	if err := os.WriteFile(filepath.Join(dir, "perf_getpgid.yaml"), []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestPerfEventArrayCounter runs a config in cloudflare/ebpf_exporter's
// perf_event_array format (testdata/compat/perf_getpgid: one record per
// getpgid call of a thread named ke_perfarray, its pid argument and
// comm), calls getpgid 3, 5 and 7 times with three pids that do not
// exist, and checks that each pid's series counts exactly its calls,
// with the comm decoded from the record's second label (past 4 bytes of
// padding), that no record was dropped, and that the counts carry on
// across scrapes.
func TestPerfEventArrayCounter(t *testing.T) {
	dir := perfArrayConfig(t, "")
	e := Start(t, "--programs=none", "--config.dir="+dir, "--config.names=perf_getpgid", "--capabilities.keep=perfmon")
	const metric = "kernel_getpgid_calls_total"
	if v := e.Scrape().Value("kernel_exporter_config_up", L("config", "perf_getpgid")); v != 1 {
		t.Fatalf("config_up{config=perf_getpgid} = %v, want 1\n%s", v, e.Logs())
	}
	calls := map[int]int{4000001: 3, 4000002: 5, 4000003: 7}
	getpgidCalls(t, calls)
	var m Metrics
	Eventually(t, 5*time.Second, func() bool {
		m = e.Scrape()
		return m.Value(metric, L("pid", "4000003")) >= 7
	}, "%s{pid=4000003} did not reach 7", metric)
	for pid, n := range calls {
		labels := L("pid", fmt.Sprint(pid), "comm", perfArrayComm)
		if v := m.Value(metric, labels); v != float64(n) {
			t.Errorf("%s%v = %v, want %d", metric, labels, v, n)
		}
	}
	if n := m.Series(metric, nil); n != len(calls) {
		t.Errorf("%s has %d series, want %d", metric, n, len(calls))
	}
	for _, reason := range []string{"lost", "short"} {
		if v := m.Value("kernel_exporter_perf_event_array_dropped_total", L("config", "perf_getpgid", "metric", metric, "reason", reason)); v != 0 {
			t.Errorf("perf_event_array_dropped_total{reason=%s} = %v, want 0", reason, v)
		}
	}
	// Counts carry on: 2 more calls of one pid.
	getpgidCalls(t, map[int]int{4000001: 2})
	Eventually(t, 5*time.Second, func() bool {
		return e.Scrape().Value(metric, L("pid", "4000001")) == 5
	}, "%s{pid=4000001} did not move from 3 to 5", metric)

	// A reload (changed help) replaces the reader: the old version's
	// perf events are closed (as many open after as before, but the
	// tracepoint's), and the new version counts from 0.
	pid := e.cmd.Process.Pid
	perfFDs := perfEventFDs(t, pid)
	y := filepath.Join(dir, "perf_getpgid.yaml")
	b, err := os.ReadFile(y)
	if err != nil {
		t.Fatal(err)
	}
	b = []byte(strings.Replace(string(b), "by pid argument", "by pid argument (reloaded)", 1))
	if err := os.WriteFile(y, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := e.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	Eventually(t, 20*time.Second, func() bool {
		f := e.Scrape()[metric]
		return f == nil || strings.Contains(f.GetHelp(), "(reloaded)")
	}, "the reload did not happen\n%s", e.Logs)
	getpgidCalls(t, map[int]int{4000001: 2})
	Eventually(t, 5*time.Second, func() bool {
		return e.Scrape().Value(metric, L("pid", "4000001")) == 2
	}, "%s{pid=4000001} after the reload and 2 calls: want 2\n%s", metric, e.Logs)
	// The new version was loaded by the privileged helper: its
	// tracepoint's perf event is held by its BPF link alone, one fd fewer.
	if n := perfEventFDs(t, pid); n > perfFDs || n < perfFDs-1 {
		t.Errorf("the exporter holds %d perf event fds after the reload, %d before: the old reader's were not closed", n, perfFDs)
	}
	if err := e.Stop(); err != nil {
		t.Errorf("exporter exit: %v, want a clean exit\n%s", err, e.Logs())
	}
}

// perfEventFDs counts the perf event file descriptors process pid holds.
func perfEventFDs(t *testing.T, pid int) int {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && l == "anon_inode:[perf_event]" {
			n++
		}
	}
	if n == 0 {
		t.Fatalf("process %d holds no perf event fd", pid)
	}
	return n
}

// TestPerfEventArrayFlush runs perf_getpgid with flush_interval: 2s:
// the series of 4 calls shows 4, leaves /metrics at the next flush, and
// 6 more calls start it again from 0 (it shows 6). A flush may fall
// between the calls and the scrape: the test then tries again.
func TestPerfEventArrayFlush(t *testing.T) {
	dir := perfArrayConfig(t, "      flush_interval: 2s\n")
	e := Start(t, "--programs=none", "--config.dir="+dir, "--config.names=perf_getpgid")
	const metric = "kernel_getpgid_calls_total"
	pid := L("pid", "4000009")
	// seen calls getpgid n times and reports whether a scrape showed
	// exactly n before the series went away.
	seen := func(n int) bool {
		getpgidCalls(t, map[int]int{4000009: n})
		var got float64
		start := time.Now()
		for time.Since(start) < 5*time.Second {
			m := e.Scrape()
			if m.Series(metric, pid) == 0 {
				if got > 0 || time.Since(start) > 3*time.Second {
					break // flushed (after or before the records arrived)
				}
				time.Sleep(50 * time.Millisecond)
				continue
			}
			got = m.Value(metric, pid)
			if got > float64(n) {
				t.Fatalf("%s%v = %v, more than the %d calls since the last flush", metric, pid, got, n)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if got == float64(n) {
			return true
		}
		t.Logf("%d calls: a flush came before a scrape showed them (last seen %v); again", n, got)
		return false
	}
	for _, n := range []int{4, 6} {
		ok := false
		for try := 0; try < 3 && !ok; try++ {
			ok = seen(n)
		}
		if !ok {
			t.Fatalf("%s%v never showed %d calls\n%s", metric, pid, n, e.Logs())
		}
		// seen returns once the series left /metrics: flushed.
		Eventually(t, 5*time.Second, func() bool { return e.Scrape().Series(metric, pid) == 0 },
			"%s%v still in /metrics 5 s after showing %d: no flush", metric, pid, n)
	}
}

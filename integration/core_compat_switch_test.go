// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"runtime"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// compatCalls runs preads pread64(-1) and getppids getppid() calls on a
// thread named ke_compat (onNamedThread) and returns its CPU.
func compatCalls(t *testing.T, preads, getppids int) int {
	t.Helper()
	return onNamedThread(t, "ke_compat", func() error {
		buf := make([]byte, 8)
		for range preads {
			if _, err := unix.Pread(-1, buf, 0); err != unix.EBADF {
				return err
			}
		}
		for range getppids {
			unix.Getppid()
		}
		return nil
	})
}

// onNamedThread runs fn on a thread named name pinned to the highest CPU
// this process may use, and returns that CPU. The thread ends with the
// goroutine (it stays locked), so the name never leaks to other
// goroutines. An error of fn fails the test.
func onNamedThread(t *testing.T, name string, fn func() error) int {
	t.Helper()
	cpu, err := runNamedThread(name, fn)
	if err != nil {
		t.Fatalf("%s thread: %v", name, err)
	}
	return cpu
}

// runNamedThread is onNamedThread returning fn's error (for child
// processes, which have no testing.T).
func runNamedThread(name string, fn func() error) (int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return -1, err
	}
	cpu := -1
	for i := range 1024 {
		if set.IsSet(i) {
			cpu = i
		}
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // not unlocked: the renamed thread exits
		var one unix.CPUSet
		one.Set(cpu)
		if err := unix.SchedSetaffinity(0, &one); err != nil {
			errc <- err
			return
		}
		p, _ := unix.BytePtrFromString(name)
		if err := unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(p)), 0, 0, 0); err != nil {
			errc <- err
			return
		}
		errc <- fn()
	}()
	return cpu, <-errc
}

// TestCompatEbpfExporter runs a config written for cloudflare/ebpf_exporter
// (testdata/compat: a per-CPU map of syscall counts whose config lists the
// reference's trailing "cpu" label) under --compat.ebpf-exporter, makes 120
// pread64 and 45 getppid calls on one CPU, and checks the series a
// reference user's dashboards query: the metric named
// ebpf_exporter_compat_syscalls_total (the reference's namespace), the
// syscall labelled "pread" (the reference's name for pread64), and every
// call counted under that CPU's cpu label. Without the switch the same
// config serves kernel_compat_syscalls_total with syscall="pread64".
func TestCompatEbpfExporter(t *testing.T) {
	const preads, getppids = 120, 45
	dir := buildConfigDir(t, compatSrc, "compat_syscalls")
	for _, tc := range []struct {
		flags                []string
		metric, other, pread string
	}{
		{[]string{"--compat.ebpf-exporter"}, "ebpf_exporter_compat_syscalls_total", "kernel_compat_syscalls_total", "pread"},
		{nil, "kernel_compat_syscalls_total", "ebpf_exporter_compat_syscalls_total", "pread64"},
		{[]string{"--config.default-namespace=node_bpf"}, "node_bpf_compat_syscalls_total", "kernel_compat_syscalls_total", "pread64"},
	} {
		t.Run(tc.metric, func(t *testing.T) {
			args := append([]string{"--programs=none", "--config.dir=" + dir, "--config.names=compat_syscalls"}, tc.flags...)
			e := Start(t, args...)
			before := e.Scrape()
			if v := before.Value("kernel_exporter_config_up", L("config", "compat_syscalls")); v != 1 {
				t.Fatalf("config_up{config=compat_syscalls} = %v, want 1\n%s", v, e.Logs())
			}
			cpu := compatCalls(t, preads, getppids)
			c := strconv.Itoa(cpu)
			pread, getppid := L("syscall", tc.pread), L("syscall", "getppid")
			var after Metrics
			Eventually(t, 5*time.Second, func() bool {
				after = e.Scrape()
				return after.Value(tc.metric, pread)-before.Value(tc.metric, pread) >= preads &&
					after.Value(tc.metric, getppid)-before.Value(tc.metric, getppid) >= getppids
			}, "%s{syscall=%s} and {syscall=getppid} did not move by %d and %d", tc.metric, tc.pread, preads, getppids)
			for _, w := range []struct {
				labels map[string]string
				want   float64
			}{
				{L("syscall", tc.pread, "cpu", c), preads},
				{pread, preads},
				{L("syscall", "getppid", "cpu", c), getppids},
				{getppid, getppids},
			} {
				if d := after.Value(tc.metric, w.labels) - before.Value(tc.metric, w.labels); d != w.want {
					t.Errorf("%s%v moved by %v, want %v", tc.metric, w.labels, d, w.want)
				}
			}
			if n := after.Series(tc.other, nil); n != 0 {
				t.Errorf("%d series of %s, want none", n, tc.other)
			}
			if n := after.Series(tc.metric, nil); n < 2 || len(after.LabelValues(tc.metric, "cpu")) != n {
				t.Errorf("%s: %d series, %d with a cpu label; want each of them with one", tc.metric, n, len(after.LabelValues(tc.metric, "cpu")))
			}
			t.Logf("%s{syscall=%s,cpu=%s}: +%d, {syscall=getppid,cpu=%s}: +%d", tc.metric, tc.pread, c, preads, c, getppids)
		})
	}
}

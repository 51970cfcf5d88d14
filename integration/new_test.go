// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/internal/testenv"
)

// TestNewProgram is a user writing a program from the bare binary: the
// exporter built for these tests sits alone in a temporary directory, so
// `kernel_exporter new` writes its embedded headers beside each program.
// It writes a counter and a histogram on the getppid syscall tracepoints,
// builds each with the Makefile it wrote (clang), loads each with make
// check (--config.check), then serves both and makes n getppid calls from
// a thread with a name of its own: the counter of that comm must move by
// exactly n, and the histogram's count too, with a positive sum.
func TestNewProgram(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		testenv.SkipOrFail(t, "make not found: %v", err)
	}
	if _, err := exec.LookPath("clang-19"); err != nil {
		testenv.SkipOrFail(t, "clang-19 not found: make test-deps installs it (%v)", err)
	}
	if _, err := os.Stat("/sys/kernel/tracing/events/syscalls/sys_enter_getppid"); err != nil {
		if err := unix.Mount("tracefs", "/sys/kernel/tracing", "tracefs", 0, ""); err != nil && err != unix.EBUSY {
			t.Fatalf("mount tracefs: %v", err)
		}
		if _, err := os.Stat("/sys/kernel/tracing/events/syscalls/sys_enter_getppid"); err != nil {
			testenv.SkipLacking(t, "tracepoint", "no syscalls:sys_enter_getppid tracepoint (CONFIG_FTRACE_SYSCALLS): %v", err)
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(binary), "include")); err == nil {
		t.Fatalf("%s has an include/ beside it: this test wants the bare binary", binary)
	}
	work := t.TempDir()
	run := func(dir string, name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	const attach = "tracepoint:syscalls:sys_enter_getppid"
	configs := filepath.Join(work, "configs")
	if err := os.Mkdir(configs, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct{ name, kind string }{{"kenew_count", "counter"}, {"kenew_hist", "histogram"}} {
		out := run(work, binary, "new", p.name, "--attach", attach, "--kind", p.kind)
		for _, want := range []string{"wrote " + p.name + "/Makefile", "headers: 5 files in " + p.name + "/include", "cd " + p.name, "make check"} {
			if !strings.Contains(out, want) {
				t.Errorf("new %s: output lacks %q:\n%s", p.name, want, out)
			}
		}
		dir := filepath.Join(work, p.name)
		out = run(dir, "make", "--no-print-directory")
		t.Logf("%s: make: %s", p.name, strings.TrimSpace(out))
		out = run(dir, "make", "--no-print-directory", "check")
		if !strings.Contains(out, "ok    "+p.name+" ") {
			t.Errorf("%s: make check:\n%s", p.name, out)
		}
		for _, f := range []string{p.name + ".bpf.o", p.name + ".yaml"} {
			b, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(configs, f), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}

	e := Start(t, "--config.dir="+configs, "--config.names=kenew_count,kenew_hist")
	before := e.Scrape()
	for _, c := range []string{"kenew_count", "kenew_hist"} {
		if v := before.Value("kernel_exporter_config_up", L("config", c)); v != 1 {
			t.Fatalf("config %s not up (%v)\n%s", c, v, e.Logs())
		}
	}
	const n = 777
	comm := fmt.Sprintf("kenew%d", os.Getpid()%1000000)
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // not unlocked: the renamed thread exits
		p, _ := unix.BytePtrFromString(comm)
		if err := unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(p)), 0, 0, 0); err != nil {
			errc <- err
			return
		}
		for range n {
			syscall.Getppid()
		}
		errc <- nil
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	after := e.Scrape()
	labels := L("comm", comm)
	if d := after.Value("kernel_kenew_count_total", labels) - before.Value("kernel_kenew_count_total", labels); d != n {
		t.Errorf("kernel_kenew_count_total{comm=%q} moved by %v after %d getppid calls, want %d\n%s", comm, d, n, n, after.seriesDump("kernel_kenew_count_total"))
	}
	count, sum, _ := after.Hist("kernel_kenew_hist_seconds", labels, 1)
	if count != n || sum <= 0 || sum > 10 {
		t.Errorf("kernel_kenew_hist_seconds{comm=%q}: count %d sum %v s after %d getppid calls, want count %d and a positive sum under 10 s",
			comm, count, sum, n, n)
	}
	t.Logf("new: counter kernel_kenew_count_total{comm=%q} +%d, histogram count %d sum %.6f s (mean %.0f ns)", comm, n, count, sum, sum/float64(count)*1e9)
}

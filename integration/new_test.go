// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/include"
	"github.com/kernel-exporter/kernel_exporter/internal/testenv"
)

// TestNewProgram is a user writing a program from the bare binary: the
// exporter built for these tests sits alone in a temporary directory, so
// `kernel_exporter new` writes its embedded headers beside each program.
// It writes a counter and a histogram on the getppid syscall tracepoints,
// and README's signal counter (a counter on signal:signal_generate whose
// key gains the signal, decoded by the signal decoder), builds each with
// the Makefile it wrote (clang), loads each with make check
// (--config.check), then serves all three. A thread with a name of its
// own makes n getppid calls and sends n SIGCONT to a sleeping child: the
// counter of that comm must move by exactly n, the histogram's count too
// (with a positive sum), and the signal counter's {signal="SIGCONT"} too.
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
	for _, p := range []struct{ name, kind, attach string }{
		{"kenew_count", "counter", attach}, {"kenew_hist", "histogram", attach},
		{"kenew_sig", "counter", "tracepoint:signal:signal_generate"},
	} {
		out := run(work, binary, "new", p.name, "--attach", p.attach, "--kind", p.kind)
		for _, want := range []string{"wrote " + p.name + "/Makefile", fmt.Sprintf("headers: %d files in %s/include", len(include.Files()), p.name), "cd " + p.name, "make check"} {
			if !strings.Contains(out, want) {
				t.Errorf("new %s: output lacks %q:\n%s", p.name, want, out)
			}
		}
		dir := filepath.Join(work, p.name)
		if p.name == "kenew_sig" {
			signalKey(t, dir, p.name)
		}
		out = run(dir, "make", "--no-print-directory")
		t.Logf("%s: make: %s", p.name, strings.TrimSpace(out))
		out = run(dir, "make", "--no-print-directory", "check")
		if !strings.Contains(out, "ok    "+p.name+" ") {
			t.Errorf("%s: make check:\n%s", p.name, out)
		}
		// new's YAML gives no sizes: the layout is the key's, from BTF.
		out = run(dir, binary, "--config.check", "--verbose", "--config.dir=.", "--config.names="+p.name)
		want := []string{"-byte key): labels inferred from BTF"}
		if p.name == "kenew_sig" {
			want = append(want, "signal off   0 size   4  signal\n", "comm   off   4 size  16  string\n")
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: --config.check --verbose lacks %q (labels from BTF):\n%s", p.name, w, out)
			}
		}
		for _, f := range []string{p.name + ".bpf.o", p.name + ".yaml"} {
			copyProbeFile(t, filepath.Join(dir, f), filepath.Join(configs, f))
		}
	}

	e := Start(t, "--config.dir="+configs, "--config.names=kenew_count,kenew_hist,kenew_sig")
	before := e.Scrape()
	for _, c := range []string{"kenew_count", "kenew_hist", "kenew_sig"} {
		if v := before.Value("kernel_exporter_config_up", L("config", c)); v != 1 {
			t.Fatalf("config %s not up (%v)\n%s", c, v, e.Logs())
		}
	}
	const n = 777
	comm := fmt.Sprintf("kenew%d", os.Getpid()%1000000)
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() }()
	onNamedThread(t, comm, func() error {
		for range n {
			syscall.Getppid()
			if err := unix.Kill(sleeper.Process.Pid, unix.SIGCONT); err != nil {
				return err
			}
		}
		return nil
	})
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
	sig := L("signal", "SIGCONT", "comm", comm)
	if d := after.Value("kernel_kenew_sig_total", sig) - before.Value("kernel_kenew_sig_total", sig); d != n {
		t.Errorf("kernel_kenew_sig_total{signal=SIGCONT,comm=%q} moved by %v after %d kill(SIGCONT), want %d\n%s", comm, d, n, n, after.seriesDump("kernel_kenew_sig_total"))
	}
	t.Logf("new: counter kernel_kenew_count_total{comm=%q} +%d, histogram count %d sum %.6f s (mean %.0f ns), kernel_kenew_sig_total{signal=SIGCONT} +%d",
		comm, n, count, sum, sum/float64(count)*1e9, n)
}

// signalKey makes the counter new wrote at signal:signal_generate count
// by signal and comm, as README's "Writing your own program" shows: the
// key gains a field signal, the tracepoint's sig, whose label comes from
// BTF and which the YAML only gives the signal decoder.
func signalKey(t *testing.T, dir, name string) {
	t.Helper()
	src := filepath.Join(dir, name+".bpf.c")
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	c := string(b)
	for old, repl := range map[string]string{
		"struct " + name + "_key {\n\tchar comm[16];\n};": "struct " + name + "_key {\n\t__u32 signal;\n\tchar comm[16];\n};",
		"int " + name + "_count(void *ctx)":               "int " + name + "_count(struct trace_event_raw_signal_generate *ctx)",
		"struct " + name + "_key key = {};":               "struct " + name + "_key key = { .signal = ctx->sig };",
	} {
		if !strings.Contains(c, old) {
			t.Fatalf("%s lacks %q: new's template changed, and README's example with it?", src, old)
		}
		c = strings.Replace(c, old, repl, 1)
	}
	if err := os.WriteFile(src, []byte(c), 0o644); err != nil {
		t.Fatal(err)
	}
	y := filepath.Join(dir, name+".yaml")
	b, err = os.ReadFile(y)
	if err != nil {
		t.Fatal(err)
	}
	label := "      labels:\n"
	if !strings.Contains(string(b), label) {
		t.Fatalf("%s has no labels:\n%s", y, b)
	}
	// The new field is a label without a size (BTF gives it): only its
	// decoder is set.
	b = []byte(strings.Replace(string(b), label, label+"        - name: signal\n          decoders:\n            - name: signal\n", 1))
	if err := os.WriteFile(y, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestNewRefusesMissingKprobes: on a kernel without kprobes (as this
// project's test machines, CONFIG_KPROBES off), `new --attach kprobe:...`
// writes nothing and exits 2 with the reason and the tracepoints named
// like the function that work here; --no-kernel-check writes the program
// anyway, for another kernel. On a kernel with kprobes it is skipped
// (the kprobe is then fine; scaffold's unit tests cover the message).
func TestNewRefusesMissingKprobes(t *testing.T) {
	for _, p := range []string{"/sys/bus/event_source/devices/kprobe/type", "/sys/kernel/tracing/kprobe_events", "/sys/kernel/debug/tracing/kprobe_events"} {
		if _, err := os.Stat(p); err == nil {
			t.Skipf("this kernel has kprobes (%s): new writes kprobe programs here", p)
		}
	}
	if _, err := os.Stat("/sys/kernel/tracing/events/syscalls/sys_enter_nanosleep"); err != nil {
		if err := unix.Mount("tracefs", "/sys/kernel/tracing", "tracefs", 0, ""); err != nil && err != unix.EBUSY {
			t.Fatalf("mount tracefs: %v", err)
		}
	}
	work := t.TempDir()
	cmd := exec.Command(binary, "new", "kenew_kp", "--attach", "kprobe:do_nanosleep")
	cmd.Dir = work
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("new --attach kprobe:do_nanosleep: %v, want exit 2\n%s%s", err, stdout.String(), stderr.String())
	}
	const want = "kernel_exporter new: --attach kprobe:do_nanosleep: kprobes not supported by this kernel (no kprobe PMU or kprobe_events); " +
		"what works here, by name: tracepoint:syscalls:sys_enter_nanosleep, tracepoint:syscalls:sys_enter_clock_nanosleep; " +
		"or --no-kernel-check to write it anyway (for another kernel)\n"
	if stderr.String() != want {
		t.Errorf("new --attach kprobe:do_nanosleep printed\n%s\nwant\n%s", stderr.String(), want)
	}
	if _, err := os.Stat(filepath.Join(work, "kenew_kp")); !os.IsNotExist(err) {
		t.Errorf("refused, but wrote %s (%v)", filepath.Join(work, "kenew_kp"), err)
	}

	cmd = exec.Command(binary, "new", "kenew_kp", "--attach", "kprobe:do_nanosleep", "--no-kernel-check")
	cmd.Dir = work
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "wrote kenew_kp/Makefile") {
		t.Fatalf("new --no-kernel-check: %v\n%s", err, out)
	}
	if src, err := os.ReadFile(filepath.Join(work, "kenew_kp", "kenew_kp.bpf.c")); err != nil || !strings.Contains(string(src), `SEC("kprobe/do_nanosleep")`) {
		t.Errorf("new --no-kernel-check did not write the kprobe program: %v", err)
	}
}

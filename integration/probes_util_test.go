// SPDX-License-Identifier: Apache-2.0

package integration

// Helpers for the uprobe, USDT and perf event tests: building the traced
// program (testdata/probes/target.c) and the test BPF objects, and driving
// the traced program.

import (
	"bufio"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// bpfCFlags are the BPF compiler flags of tools/bpf-build.sh, for objects
// built at test time (never compared byte for byte).
var bpfCFlags = []string{"-target", "bpf", "-D__TARGET_ARCH_x86", "-O2", "-g", "-Wall", "-Werror"}

// probeNeedTool returns the path of the first of names found in PATH. Missing
// all of them skips the test, or fails it under CI=true.
func probeNeedTool(t *testing.T, why string, names ...string) string {
	t.Helper()
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("none of %v found (%s; make test-deps installs it); CI=true forbids skipping", names, why)
	}
	t.Skipf("none of %v found (%s)", names, why)
	return ""
}

// compileBPF compiles the repository-relative BPF C source src into obj
// with clang-19 and include/ on the include path; extra flags (such as
// -DNAME=value) come last.
func compileBPF(t *testing.T, src, obj string, extra ...string) {
	t.Helper()
	clang := probeNeedTool(t, "BPF compiler", "clang-19")
	args := append(append([]string{}, bpfCFlags...), "-I"+filepath.Join(repoRoot, "include"))
	args = append(append(args, extra...), "-c", filepath.Join(repoRoot, src), "-o", obj)
	if out, err := exec.Command(clang, args...).CombinedOutput(); err != nil {
		t.Fatalf("compile %s: %v\n%s", src, err, out)
	}
}

// buildProbeBPF compiles testdata/probes/<src>.bpf.c into dir/<name>.bpf.o.
func buildProbeBPF(t *testing.T, src, dir, name string) {
	t.Helper()
	compileBPF(t, filepath.Join("integration", "testdata", "probes", src+".bpf.c"), filepath.Join(dir, name+".bpf.o"))
}

// buildProbeTarget compiles testdata/probes/target.c (with its USDT probes) into
// dir/ke_target with optimization opt ("-O0", "-O2").
func buildProbeTarget(t *testing.T, dir, opt string) string {
	t.Helper()
	return buildProbeProgram(t, dir, "ke_target", opt, "target.c", "target_gated.c")
}

// buildProbeProgram compiles the C files srcs of testdata/probes into
// dir/name with optimization opt, and returns its path.
func buildProbeProgram(t *testing.T, dir, name, opt string, srcs ...string) string {
	t.Helper()
	cc := probeNeedTool(t, "C compiler for the traced program", "gcc", "cc", "clang-19")
	out := filepath.Join(dir, name)
	args := []string{opt, "-Wall", "-o", out}
	for _, s := range srcs {
		args = append(args, filepath.Join(repoRoot, "integration", "testdata", "probes", s))
	}
	cmd := exec.Command(cc, args...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s(<sys/sdt.h> is in Debian's systemtap-sdt-dev)", cmd, err, b)
	}
	return out
}

// writeProbeConfig writes dir/<name>.yaml.
func writeProbeConfig(t *testing.T, dir, name, yaml string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
}

// copyProbeFile copies src to dst.
func copyProbeFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// symbolFileOffset returns the file offset of function sym in the ELF
// file bin: its address translated through the executable segment.
func symbolFileOffset(t *testing.T, bin, sym string) uint64 {
	t.Helper()
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range syms {
		if s.Name != sym {
			continue
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 && s.Value >= p.Vaddr && s.Value < p.Vaddr+p.Filesz {
				return s.Value - p.Vaddr + p.Off
			}
		}
	}
	t.Fatalf("%s: no function %s in an executable segment", bin, sym)
	return 0
}

// probeTarget is a running "ke_target calls N": it has printed "ready" and waits
// for run.
type probeTarget struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
	// Pid is the process id; ReadySema the semaphore of ketest:gated when
	// the process was ready.
	Pid       int
	ReadySema int
}

// startProbeTarget starts bin in "calls n" mode and waits until it is ready.
// It is ended at cleanup.
func startProbeTarget(t *testing.T, bin string, n int) *probeTarget {
	t.Helper()
	cmd := exec.Command(bin, "calls", strconv.Itoa(n))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tg := &probeTarget{t: t, cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout), Pid: cmd.Process.Pid}
	t.Cleanup(func() {
		tg.stdin.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	tg.ReadySema = tg.expect("ready")
	return tg
}

// expect reads the next line, which must be "<word> sema=<n>", and returns n.
func (tg *probeTarget) expect(word string) int {
	tg.t.Helper()
	type result struct {
		line string
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		l, err := tg.out.ReadString('\n')
		ch <- result{l, err}
	}()
	var r result
	select {
	case r = <-ch:
	case <-time.After(30 * time.Second):
		tg.t.Fatalf("ke_target %d: no %q line within 30s", tg.Pid, word)
	}
	var sema int
	if _, err := fmt.Sscanf(strings.TrimSpace(r.line), word+" sema=%d", &sema); err != nil {
		tg.t.Fatalf("ke_target %d: got %q (%v), want %q", tg.Pid, r.line, r.err, word+" sema=N")
	}
	return sema
}

// run makes the process do its N iterations and returns the semaphore of
// ketest:gated when it finished them.
func (tg *probeTarget) run() int {
	tg.t.Helper()
	if _, err := io.WriteString(tg.stdin, "go\n"); err != nil {
		tg.t.Fatal(err)
	}
	return tg.expect("done")
}

// startWithSemaphore starts the exporter with config from dir, whose USDT
// probes in bin have a semaphore, and checks that the attachment raised
// it: a "calls n" process of bin started before the exporter sees 0 at
// first and 1 once attached (it is run: its probes fire n times), and one
// started after (the kernel updates the semaphore when the file is mapped)
// sees 1; that one is returned ready, not run.
func startWithSemaphore(t *testing.T, dir, config, bin string, n int) (*Exporter, *probeTarget) {
	t.Helper()
	before := startProbeTarget(t, bin, n)
	if before.ReadySema != 0 {
		t.Fatalf("semaphore %d before any attachment, want 0", before.ReadySema)
	}
	e := Start(t, "--programs=none", "--config.dir="+dir, "--config.names="+config)
	if v := e.Scrape().Value("kernel_exporter_config_up", L("config", config)); v != 1 {
		t.Fatalf("%s config down\n%s", config, e.Logs())
	}
	after := startProbeTarget(t, bin, n)
	if after.ReadySema != 1 {
		t.Errorf("semaphore %d in a process started after attaching, want 1", after.ReadySema)
	}
	if s := before.run(); s != 1 {
		t.Errorf("semaphore %d in a process started before attaching, want 1", s)
	}
	return e, after
}

// stopLowersSemaphore stops the exporter and checks that detaching lowered
// the semaphore again: after runs with it at 0 (its probes do not fire).
func stopLowersSemaphore(t *testing.T, e *Exporter, after *probeTarget) {
	t.Helper()
	if err := e.Stop(); err != nil {
		t.Errorf("exporter exit: %v", err)
	}
	if s := after.run(); s != 0 {
		t.Errorf("semaphore %d after the exporter stopped, want 0", s)
	}
}

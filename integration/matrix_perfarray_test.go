// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The kprobe programs of the perf_event_array and self-uprobe matrix
// tests, precompiled (make bpf): the matrix VM has no clang and no source
// tree.
//
//go:embed testdata/perfarray/*.bpf.o testdata/perfarray/*.yaml
var perfArrayFS embed.FS

// writePerfArrayConfig writes testdata/perfarray/<name>.{bpf.o,yaml} into
// a new --config.dir and returns it.
func writePerfArrayConfig(t *testing.T, name string) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{name + ".bpf.o", name + ".yaml"} {
		b, err := fs.ReadFile(perfArrayFS, "testdata/perfarray/"+f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// needKprobes skips the test, after recording it in the matrix table, on
// a kernel without kprobes (the CI host): the program hooks a kprobe.
func needKprobes(t *testing.T, r *matrixRow) {
	t.Helper()
	if !kernelCaps(t).kprobes {
		r.result = "unsupported: no kprobes"
		t.Skip("this kernel has no kprobes: the test program is a kprobe (the 6.1 and 5.10 guests of make test-kernels run it)")
	}
}

// TestMatrixPerfEventArrayOOMKill runs testdata/perfarray/oomkill_perf
// (cloudflare/ebpf_exporter's oomkill example in shape: a kprobe on
// oom_kill_process writes the memory cgroup's id to a perf event array,
// and the counter has perf_event_array: true), has a child process
// OOM-killed in a cgroup limited to 32 MiB, and checks that exactly one
// kill was counted under that cgroup's path.
func TestMatrixPerfEventArrayOOMKill(t *testing.T) {
	const metric = "kernel_oom_kills_total"
	r := matrixReport(t, "oomkill_perf (test)", "kprobe")
	needKprobes(t, r)
	r.attach = "kprobe (1 program)"
	cg := newMemCgroup(t, 32<<20)
	dir := writePerfArrayConfig(t, "oomkill_perf")
	e := Start(t, "--programs=none", "--config.dir="+dir, "--config.names=oomkill_perf")
	if v := e.Scrape().Value("kernel_exporter_config_up", L("config", "oomkill_perf")); v != 1 {
		t.Fatalf("config_up{config=oomkill_perf} = %v, want 1\n%s", v, e.Logs())
	}
	m := oomKill(t, e, cg, metric, 10*time.Second)
	if v := m.Value(metric, L("cgroup", cg.V2Path)); v != 1 {
		t.Errorf("%s{cgroup=%q} = %v, want exactly 1\n%s", metric, cg.V2Path, v, m.seriesDump(metric))
	}
	lost := m.Value("kernel_exporter_perf_event_array_dropped_total", L("config", "oomkill_perf", "reason", "lost"))
	if lost != 0 {
		t.Errorf("perf_event_array_dropped_total{reason=lost} = %v, want 0", lost)
	}
	r.result = fmt.Sprintf("moved: 1 OOM kill counted under %s from a perf event array", cg.V2Path)
}

// TestMatrixSelfProbeBPFJit runs testdata/perfarray/bpf_jit_self
// (cloudflare/ebpf_exporter's bpf-jit example in shape: kaddrs gives the
// program the address of the kernel variable bpf_jit_current, and
// programs on kprobe/bpf_jit_binary_alloc and on
// uprobe//proc/self/exe:post_attach_mark store the JIT's pages), and
// checks at the first scrape that the uprobe ran exactly once, after
// attach, and stored a number of pages above 0 (the exporter's own
// programs are JIT-compiled) and below the kernel's limit, and that a
// second scrape reads no fewer (nothing was freed).
func TestMatrixSelfProbeBPFJit(t *testing.T) {
	const pages = "kernel_bpf_jit_pages"
	r := matrixReport(t, "bpf_jit_self (test)", "kprobe")
	needKprobes(t, r)
	r.attach = "kprobe+uprobe (2 programs)"
	dir := writePerfArrayConfig(t, "bpf_jit_self")
	e := Start(t, "--programs=none", "--config.dir="+dir, "--config.names=bpf_jit_self")
	m := e.Scrape()
	if v := m.Value("kernel_exporter_config_up", L("config", "bpf_jit_self")); v != 1 {
		t.Fatalf("config_up{config=bpf_jit_self} = %v, want 1\n%s", v, e.Logs())
	}
	if v := m.Value("kernel_bpf_jit_reads_total", nil); v != 1 {
		t.Errorf("kernel_bpf_jit_reads_total = %v, want 1 (the post_attach_mark uprobe once)", v)
	}
	first := m.Value(pages, nil)
	// bpf_jit_limit is at most a quarter of the module area (about 1 GiB
	// of 4 KiB pages on x86-64).
	if first <= 0 || first > 1<<18 {
		t.Fatalf("%s = %v right after start, want between 1 and 2^18 pages", pages, first)
	}
	again := e.Scrape().Value(pages, nil)
	if again < first {
		t.Errorf("%s went from %v to %v with nothing freed", pages, first, again)
	}
	r.result = fmt.Sprintf("ok: post_attach_mark ran once, %v JIT pages via kaddrs", first)
}

// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestSelfProbePostAttachMark loads a config in cloudflare/ebpf_exporter's
// format whose program is on uprobe//proc/self/exe:post_attach_mark
// (testdata/compat/self_mark: counts its calls, stores 424242) and checks,
// at the first scrape after the config is up, that the program ran exactly
// once and stored the value: the exporter calls the hook once after
// attaching the config, before serving it. It runs the test binary (built
// with its symbol table) and a binary linked as the Makefile links
// releases, with -s -w, which has no symbol table: the hook is found by
// its address in the running process, not by symbol.
func TestSelfProbePostAttachMark(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join("integration", "testdata", "compat", "self_mark")
	compileBPF(t, src+".bpf.c", filepath.Join(dir, "self_mark.bpf.o"))
	copyProbeFile(t, filepath.Join(repoRoot, src+".yaml"), filepath.Join(dir, "self_mark.yaml"))

	stripped := filepath.Join(t.TempDir(), "kernel_exporter")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", stripped, "./cmd/kernel_exporter")
	build.Dir = repoRoot
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build with -s -w: %v\n%s", err, out)
	}
	ef, err := elf.Open(stripped)
	if err != nil {
		t.Fatal(err)
	}
	if ef.Section(".symtab") != nil {
		t.Fatalf("%s linked with -s -w still has .symtab", stripped)
	}
	ef.Close()

	for _, tc := range []struct {
		name    string
		wrapper []string
	}{
		{"symbols", nil},
		// sh runs the stripped binary in place of the test binary, with
		// the same arguments.
		{"stripped", []string{"sh", "-c", `shift; exec "$0" "$@"`, stripped}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := startWrapped(t, tc.wrapper, "--programs=none", "--config.dir="+dir, "--config.names=self_mark")
			m := e.Scrape()
			if v := m.Value("kernel_exporter_config_up", L("config", "self_mark")); v != 1 {
				t.Fatalf("config_up{config=self_mark} = %v, want 1\n%s", v, e.Logs())
			}
			if v := m.Value("kernel_self_mark_calls_total", nil); v != 1 {
				t.Errorf("kernel_self_mark_calls_total = %v, want 1 (one post_attach_mark call after attach)\n%s", v, e.Logs())
			}
			if v := m.Value("kernel_self_mark_value", nil); v != 424242 {
				t.Errorf("kernel_self_mark_value = %v, want 424242", v)
			}
		})
	}
}

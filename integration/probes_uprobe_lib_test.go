// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// uprobeLibConfig is the YAML of testdata/probes/uprobe_lib.bpf.c with the
// given target of its bare SEC("uprobe") program.
func uprobeLibConfig(namespace, target string) string {
	return fmt.Sprintf(`namespace: %s
metrics:
  counters:
    - name: libc_getppid_calls_total
      help: Calls of libc's getppid by ke_target, by how the uprobe was placed
      labels:
        - name: how
          size: 4
          decoders:
            - name: uint
            - name: static_map
              static_map: {"0": section, "1": config}
uprobes:
  - program: on_getppid_config
%s
`, namespace, target)
}

// TestUprobeBareLibrary places uprobes on libc's getppid through the bare
// library name libc.so.6, resolved through /etc/ld.so.cache: by the section
// SEC("uprobe/libc.so.6:getppid") (counting calls by tasks named
// ke_target) and by a config entry "binary: libc.so.6" for one pid. The
// target process calls getppid exactly N times: both counters move by N.
// A library that is nowhere to be found fails its own config with a reason
// naming it and the places searched.
func TestUprobeBareLibrary(t *testing.T) {
	const n = 300
	dir := t.TempDir()
	bin := buildProbeTarget(t, dir, "-O2")
	buildProbeBPF(t, "uprobe_lib", dir, "uplib")
	copyProbeFile(t, filepath.Join(dir, "uplib.bpf.o"), filepath.Join(dir, "uplib_missing.bpf.o"))
	tg := startProbeTarget(t, bin, n)
	writeProbeConfig(t, dir, "uplib", uprobeLibConfig("uplib", fmt.Sprintf("    binary: libc.so.6\n    symbol: getppid\n    pid: %d", tg.Pid)))
	writeProbeConfig(t, dir, "uplib_missing", uprobeLibConfig("uplib_missing", "    binary: libke-no-such-library.so.7\n    symbol: getppid"))

	e := Start(t, "--programs=none", "--config.dir="+dir, "--config.names=uplib,uplib_missing")
	ms := e.Scrape()
	if v := ms.Value("kernel_exporter_config_up", L("config", "uplib")); v != 1 {
		t.Fatalf("config uplib is not up\n%s", e.Logs())
	}
	if v := ms.Value("kernel_exporter_program_attached", L("config", "uplib")); v != 2 {
		t.Errorf("uplib: %v programs attached, want 2", v)
	}
	if v := ms.Value("kernel_exporter_config_up", L("config", "uplib_missing")); v != 0 {
		t.Errorf("config uplib_missing is up, want down")
	}
	reasons := strings.Join(ms.LabelValues("kernel_exporter_config_error_info", "reason"), "\n")
	want := "library libke-no-such-library.so.7 not found in /etc/ld.so.cache or /lib/"
	if !strings.Contains(reasons, want) || !strings.Contains(reasons, "/usr/lib") {
		t.Errorf("uplib_missing: no reason containing %q and /usr/lib in:\n%s", want, reasons)
	}
	base := map[string]float64{}
	for _, how := range []string{"section", "config"} {
		base[how] = ms.Value("uplib_libc_getppid_calls_total", L("how", how))
	}
	tg.run()
	ms = e.Scrape()
	for _, how := range []string{"section", "config"} {
		got := ms.Value("uplib_libc_getppid_calls_total", L("how", how)) - base[how]
		t.Logf("getppid calls counted by the %s uprobe: %v (want %d)", how, got, n)
		if got != n {
			t.Errorf("%s uprobe on libc.so.6:getppid counted %v calls, want %d", how, got, n)
		}
	}
}

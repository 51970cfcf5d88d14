// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// uprobeConfig is the YAML of testdata/probes/uprobe.bpf.c with the
// uprobes list given (for both programs: entry and return).
func uprobeConfig(namespace, target string) string {
	return fmt.Sprintf(`namespace: %s
metrics:
  counters:
    - name: uprobe_calls_total
      help: Calls of ke_work (what=calls) and the sum of its argument (what=arg_sum)
      labels:
        - name: what
          size: 4
          decoders:
            - name: uint
            - name: static_map
              static_map: {"0": calls, "1": arg_sum}
  histograms:
    - name: uprobe_return_values
      help: Return values of ke_work
      bucket_type: exp2
      bucket_min: 0
      bucket_max: 32
      labels:
        - name: bucket
          size: 4
uprobes:
  - program: on_work
%s
  - program: on_work_return
%s
`, namespace, target, target)
}

// TestUprobeTargets attaches uprobes and uretprobes chosen in YAML to a
// function of a C program, by symbol, by file offset, and by symbol for one
// pid only, then has two processes of that program call the function N
// times each: the per-symbol and per-offset configs count 2N calls, the
// per-pid one exactly N; argument sums and return value histograms match.
func TestUprobeTargets(t *testing.T) {
	const n = 250
	dir := t.TempDir()
	bin := buildProbeTarget(t, dir, "-O2")
	buildProbeBPF(t, "uprobe", dir, "up_symbol")
	copyProbeFile(t, filepath.Join(dir, "up_symbol.bpf.o"), filepath.Join(dir, "up_offset.bpf.o"))
	copyProbeFile(t, filepath.Join(dir, "up_symbol.bpf.o"), filepath.Join(dir, "up_pid.bpf.o"))

	a := startProbeTarget(t, bin, n)
	b := startProbeTarget(t, bin, n)
	off := symbolFileOffset(t, bin, "ke_work")
	writeProbeConfig(t, dir, "up_symbol", uprobeConfig("up_symbol", fmt.Sprintf("    binary: %s\n    symbol: ke_work", bin)))
	writeProbeConfig(t, dir, "up_offset", uprobeConfig("up_offset", fmt.Sprintf("    binary: %s\n    offset: %#x", bin, off)))
	writeProbeConfig(t, dir, "up_pid", uprobeConfig("up_pid", fmt.Sprintf("    binary: %s\n    symbol: ke_work\n    pid: %d", bin, a.Pid)))

	e := Start(t, "--programs=none", "--config.dir="+dir, "--config.names=up_symbol,up_offset,up_pid")
	ms := e.Scrape()
	for _, c := range []string{"up_symbol", "up_offset", "up_pid"} {
		if v := ms.Value("kernel_exporter_config_up", L("config", c)); v != 1 {
			t.Fatalf("config %s is not up\n%s", c, e.Logs())
		}
		if v := ms.Value("kernel_exporter_program_attached", L("config", c)); v != 2 {
			t.Errorf("config %s: %v programs attached, want 2", c, v)
		}
	}
	a.run()
	b.run()

	ms = e.Scrape()
	argSum := float64(n * (n + 1) / 2)
	for _, tc := range []struct {
		config string
		procs  float64
	}{{"up_symbol", 2}, {"up_offset", 2}, {"up_pid", 1}} {
		calls := ms.Value(tc.config+"_uprobe_calls_total", L("what", "calls"))
		sum := ms.Value(tc.config+"_uprobe_calls_total", L("what", "arg_sum"))
		count, retSum, _ := ms.Hist(tc.config+"_uprobe_return_values", nil, 1)
		t.Logf("%s: calls %v, argument sum %v, returns %d (sum %v)", tc.config, calls, sum, count, retSum)
		if calls != tc.procs*n || sum != tc.procs*argSum {
			t.Errorf("%s: calls %v, argument sum %v; want %v and %v", tc.config, calls, sum, tc.procs*n, tc.procs*argSum)
		}
		if float64(count) != tc.procs*n || retSum != 3*tc.procs*argSum {
			t.Errorf("%s: %d returns with sum %v; want %v with sum %v", tc.config, count, retSum, tc.procs*n, 3*tc.procs*argSum)
		}
	}
	// Returns are 3, 6, ..., 3n: 3 is the only one at or below 4 (le=4).
	if _, _, le4 := ms.Hist("up_pid_uprobe_return_values", nil, 4); le4 != 1 {
		t.Errorf("up_pid: %d returns <= 4, want 1", le4)
	}
}

// TestUprobeBadTargets checks that bad uprobe targets fail their own config
// with a clear reason, and nothing else.
func TestUprobeBadTargets(t *testing.T) {
	dir := t.TempDir()
	bin := buildProbeTarget(t, dir, "-O2")
	buildProbeBPF(t, "uprobe", dir, "good")
	bad := map[string]struct{ target, reason string }{
		"nosym":  {fmt.Sprintf("    binary: %s\n    symbol: no_such_function", bin), "symbol no_such_function: not found"},
		"nofile": {"    binary: /nonexistent/ke_target\n    symbol: ke_work", "/nonexistent/ke_target: no such file or directory"},
		// The kernel's PID_MAX_LIMIT is 4194304: a pid in range that no
		// process has, and one out of range that validation refuses.
		"nopid":  {fmt.Sprintf("    binary: %s\n    symbol: ke_work\n    pid: 4194303", bin), "process 4194303 does not exist"},
		"bigpid": {fmt.Sprintf("    binary: %s\n    symbol: ke_work\n    pid: 2147483600", bin), "uprobes[0].pid: must be 0 (every process) to 4194304, got 2147483600"},
	}
	names := []string{"good"}
	writeProbeConfig(t, dir, "good", uprobeConfig("good", fmt.Sprintf("    binary: %s\n    symbol: ke_work", bin)))
	for name, tc := range bad {
		copyProbeFile(t, filepath.Join(dir, "good.bpf.o"), filepath.Join(dir, name+".bpf.o"))
		writeProbeConfig(t, dir, name, uprobeConfig(name, tc.target))
		names = append(names, name)
	}
	// A bare SEC("uprobe") program with no target is an error too.
	copyProbeFile(t, filepath.Join(dir, "good.bpf.o"), filepath.Join(dir, "notarget.bpf.o"))
	writeProbeConfig(t, dir, "notarget", strings.Split(uprobeConfig("notarget", ""), "uprobes:")[0])
	names = append(names, "notarget")
	bad["notarget"] = struct{ target, reason string }{"", `program on_work has section "uprobe" without a target: list it under "uprobes"`}

	e := Start(t, "--programs=none", "--config.dir="+dir, "--config.names="+strings.Join(names, ","))
	ms := e.Scrape()
	if v := ms.Value("kernel_exporter_config_up", L("config", "good")); v != 1 {
		t.Errorf("good config down\n%s", e.Logs())
	}
	for name, tc := range bad {
		if v := ms.Value("kernel_exporter_config_up", L("config", name)); v != 0 {
			t.Errorf("config %s up, want down", name)
		}
		reasons := ms.LabelValues("kernel_exporter_config_error_info", "reason")
		found := false
		for _, r := range reasons {
			if strings.Contains(r, tc.reason) {
				found = true
			}
		}
		if !found {
			t.Errorf("config %s: no reason containing %q in %q", name, tc.reason, reasons)
		}
	}
	for _, r := range ms.LabelValues("kernel_exporter_config_error_info", "reason") {
		t.Logf("reason: %s", r)
	}
}

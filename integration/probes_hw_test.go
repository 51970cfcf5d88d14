// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/kernel-exporter/kernel_exporter/internal/testenv"
)

// TestHardwarePerfPrograms runs the bundled ipc and llc programs next to
// timers. Where the machine exposes no hardware PMU (this CI's VMs), both
// are down with the reason "hardware perf events not supported by this
// kernel or machine" and timers is up and counting; where it has one, a
// memory-heavy dd on CPU 0 moves all four counters of CPU 0. Of the
// subtests <config>/down_without_pmu and <config>/counts, the one that
// does not apply to this machine reports SKIP with the reason.
func TestHardwarePerfPrograms(t *testing.T) {
	e := Start(t, "--programs=ipc,llc,timers")
	ms := e.Scrape()
	if v := ms.Value("kernel_exporter_config_up", L("config", "timers")); v != 1 {
		t.Fatalf("timers down next to ipc and llc\n%s", e.Logs())
	}
	metrics := map[string][]string{
		"ipc": {"kernel_cpu_cycles_total", "kernel_cpu_instructions_total"},
		"llc": {"kernel_cpu_llc_references_total", "kernel_cpu_llc_misses_total"},
	}
	configs := []string{"ipc", "llc"}
	up := map[string]bool{}
	for _, c := range configs {
		up[c] = ms.Value("kernel_exporter_config_up", L("config", c)) == 1
		t.Run(c+"/down_without_pmu", func(t *testing.T) {
			if up[c] {
				t.Skipf("%s is up: this machine has a hardware PMU, so the not-supported status cannot be checked", c)
			}
			var reason string
			for _, m := range ms["kernel_exporter_config_error_info"].GetMetric() {
				if matches(m, L("config", c)) {
					for _, lp := range m.GetLabel() {
						if lp.GetName() == "reason" {
							reason = lp.GetValue()
						}
					}
				}
			}
			t.Logf("%s: %s", c, reason)
			if !strings.Contains(reason, "hardware perf events not supported by this kernel or machine") {
				t.Errorf("%s down with reason %q, want hardware perf events not supported", c, reason)
			}
			if n := ms.Series("kernel_exporter_program_attached", L("config", c)); n < 1 {
				t.Errorf("%s: no program_attached series for the program that failed", c)
			}
			if v := ms.Value("kernel_exporter_program_attached", L("config", c)); v != 0 {
				t.Errorf("%s: %v programs attached, want 0", c, v)
			}
		})
	}
	before := ms
	// Work on CPU 0 that misses the LLC: clearing a 64 MiB buffer 16 times.
	taskset := probeNeedTool(t, "pin the workload to CPU 0", "taskset")
	if out, err := exec.Command(taskset, "-c", "0", "dd", "if=/dev/zero", "of=/dev/null", "bs=64M", "count=16").CombinedOutput(); err != nil {
		t.Fatalf("dd on CPU 0: %v\n%s", err, out)
	}
	after := e.Scrape()
	if v := after.Value("kernel_exporter_config_up", L("config", "timers")); v != 1 {
		t.Errorf("timers went down")
	}
	for _, c := range configs {
		names := metrics[c]
		t.Run(c+"/counts", func(t *testing.T) {
			if !up[c] {
				if n := after.Series(names[0], nil); n != 0 {
					t.Errorf("%s is down but %s has %d series", c, names[0], n)
				}
				testenv.SkipLacking(t, "a hardware PMU", "%s is down, so its counters cannot be checked", c)
			}
			for _, m := range names {
				d := after.Value(m, L("cpu", "0")) - before.Value(m, L("cpu", "0"))
				t.Logf("%s{cpu=\"0\"} moved by %v", m, d)
				if d <= 0 {
					t.Errorf("%s{cpu=\"0\"} did not move during a busy loop on CPU 0", m)
				}
			}
		})
	}
}

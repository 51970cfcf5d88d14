// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/kernel-exporter/kernel_exporter/internal/testenv"
)

// perfConfig is the YAML of testdata/probes/perf.bpf.c with one perf event.
func perfConfig(namespace, event string) string {
	return fmt.Sprintf(`namespace: %s
metrics:
  counters:
    - name: perf_samples_total
      help: Perf event samples by CPU and command
      labels:
        - name: cpu
          size: 4
          decoders:
            - name: uint
        - name: comm
          size: 16
          decoders:
            - name: string
perf_events:
  - program: on_sample
%s
`, namespace, event)
}

// TestPerfEventSoftware samples cpu-clock on every CPU at 1000 Hz (by
// frequency, and by a period of 1 ms) while a process spins on CPU 0 for
// one second: CPU 0 gets 1000 ± 20% samples per second, the process gets
// 1000 ± 25% per second of CPU time it used, and none on other CPUs. A
// hardware event config in the same exporter is down with a "not
// supported" reason; on a machine with a PMU it counts samples, which the
// subtest hardware_cycles checks (SKIP with the reason elsewhere).
func TestPerfEventSoftware(t *testing.T) {
	dir := t.TempDir()
	bin := buildProbeTarget(t, dir, "-O2")
	buildProbeBPF(t, "perf", dir, "perf_freq")
	copyProbeFile(t, dir+"/perf_freq.bpf.o", dir+"/perf_period.bpf.o")
	copyProbeFile(t, dir+"/perf_freq.bpf.o", dir+"/perf_hw.bpf.o")
	writeProbeConfig(t, dir, "perf_freq", perfConfig("perf_freq", "    type: software\n    name: cpu-clock\n    frequency: 1000"))
	writeProbeConfig(t, dir, "perf_period", perfConfig("perf_period", "    type: software\n    name: cpu-clock\n    period: 1000000"))
	writeProbeConfig(t, dir, "perf_hw", perfConfig("perf_hw", "    type: hardware\n    name: cycles\n    period: 1000000"))

	e := Start(t, "--programs=none", "--config.dir="+dir, "--config.names=perf_freq,perf_period,perf_hw")
	ms := e.Scrape()
	for _, c := range []string{"perf_freq", "perf_period"} {
		if v := ms.Value("kernel_exporter_config_up", L("config", c)); v != 1 {
			t.Fatalf("config %s down\n%s", c, e.Logs())
		}
	}
	hwSupported := ms.Value("kernel_exporter_config_up", L("config", "perf_hw")) == 1
	if !hwSupported {
		reasons := strings.Join(ms.LabelValues("kernel_exporter_config_error_info", "reason"), "\n")
		want := `hardware perf events not supported by this kernel or machine (no PMU for this event): cannot open hardware event "cycles" on CPU 0`
		if !strings.Contains(reasons, want) {
			t.Errorf("perf_hw down without the reason %q:\n%s", want, reasons)
		}
	}

	ms = checkCPUClockSampling(t, e, bin, ms, "perf")
	t.Run("hardware_cycles", func(t *testing.T) {
		if !hwSupported {
			testenv.SkipLacking(t, "a hardware PMU", "config perf_hw is down (its reason was checked), so cycles sampling cannot be checked")
		}
		if v := ms.Value("perf_hw_perf_samples_total", L("comm", "ke_target")); v == 0 {
			t.Errorf("hardware cycles: no samples of ke_target")
		}
	})
}

// checkCPUClockSampling runs ke_target's 1 s busy loop pinned to CPU 0 and
// checks the configs <prefix>_freq and <prefix>_period, which sample
// cpu-clock at 1000 Hz (by frequency and by period), against it. ms is a
// scrape from before; it returns the scrape after.
func checkCPUClockSampling(t *testing.T, e *Exporter, bin string, ms Metrics, prefix string) Metrics {
	t.Helper()
	configs := []string{prefix + "_freq", prefix + "_period"}
	// cpu-clock samples every CPU at 1000 Hz whatever runs there (the idle
	// task too), so a window of d seconds has about 1000·d samples on CPU 0;
	// of those, ke_target gets about 1000 per second of CPU time it used
	// (other tests may share CPU 0, so its share is not asserted).
	base := map[string]float64{}
	for _, c := range configs {
		base[c] = ms.Value(c+"_perf_samples_total", L("cpu", "0"))
	}
	// taskset pins before exec, so no sample of ke_target lands elsewhere.
	taskset := probeNeedTool(t, "pin the busy loop to CPU 0", "taskset")
	start := time.Now()
	cmd := exec.Command(taskset, "-c", "0", bin, "spin", "1000")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ke_target spin: %v\n%s", err, out)
	}
	cpuTime := (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	ms = e.Scrape()
	window := time.Since(start).Seconds()
	for _, c := range configs {
		name := c + "_perf_samples_total"
		mine := ms.Value(name, L("cpu", "0", "comm", "ke_target"))
		all := ms.Value(name, L("comm", "ke_target"))
		total := ms.Value(name, L("cpu", "0")) - base[c]
		t.Logf("%s: CPU 0 had %v samples in %.3f s; ke_target had %v there for %.3f s of CPU time, %v elsewhere",
			c, total, window, mine, cpuTime, all-mine)
		if total < 800*window || total > 1200*window {
			t.Errorf("%s: %v samples on CPU 0 in %.3f s at 1000 Hz, want %.0f..%.0f", c, total, window, 800*window, 1200*window)
		}
		if want := 1000 * cpuTime; mine < 0.75*want-20 || mine > 1.25*want+20 {
			t.Errorf("%s: %v samples of ke_target for %.3f s of CPU time at 1000 Hz, want %.0f ± 25%%", c, mine, cpuTime, want)
		}
		if cpuTime < 0.05 {
			t.Errorf("ke_target got only %.3f s of CPU time in 1 s of spinning: too little to check sampling", cpuTime)
		}
		if all != mine {
			t.Errorf("%s: %v samples of ke_target on other CPUs, want 0 (pinned to CPU 0)", c, all-mine)
		}
	}
	return ms
}

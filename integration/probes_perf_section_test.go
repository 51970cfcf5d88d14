// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/kernel-exporter/kernel_exporter/internal/testenv"
)

// TestPerfEventSection samples cpu-clock with the event given in the
// section name, as ebpf_exporter's llcstat example does:
// SEC("perf_event/type=1,config=0,frequency=1000") and
// SEC("perf_event/type=1,config=0,period=1000000"), with no perf_events list
// in the config. While a process spins on CPU 0 for one second, CPU 0 gets
// 1000 ± 20% samples per second and the process 1000 ± 25% per second of
// CPU time it used. type=0 (hardware) is down with "hardware perf events
// not supported" where there is no PMU, and a section missing its
// frequency is down with a reason naming the section.
func TestPerfEventSection(t *testing.T) {
	dir := t.TempDir()
	bin := buildProbeTarget(t, dir, "-O2")
	src := filepath.Join("integration", "testdata", "probes", "perf.bpf.c")
	sections := map[string]string{
		"psec_freq":   "perf_event/type=1,config=0,frequency=1000",
		"psec_period": "perf_event/type=1,config=0,period=1000000",
		"psec_hw":     "perf_event/type=0,config=0,frequency=1000",
		"psec_bad":    "perf_event/type=1,config=0",
	}
	var names []string
	for name, sec := range sections {
		compileBPF(t, src, filepath.Join(dir, name+".bpf.o"), `-DPERF_SECTION="`+sec+`"`)
		writeProbeConfig(t, dir, name, strings.Split(perfConfig(name, ""), "perf_events:")[0])
		names = append(names, name)
	}

	e := Start(t, "--programs=none", "--config.dir="+dir, "--config.names="+strings.Join(names, ","))
	ms := e.Scrape()
	for _, c := range []string{"psec_freq", "psec_period"} {
		if v := ms.Value("kernel_exporter_config_up", L("config", c)); v != 1 {
			t.Fatalf("config %s down\n%s", c, e.Logs())
		}
	}
	reasons := strings.Join(ms.LabelValues("kernel_exporter_config_error_info", "reason"), "\n")
	if v := ms.Value("kernel_exporter_config_up", L("config", "psec_bad")); v != 0 {
		t.Errorf("config psec_bad up, want down")
	}
	if want := `section "perf_event/type=1,config=0": missing frequency or period`; !strings.Contains(reasons, want) {
		t.Errorf("psec_bad: no reason %q in:\n%s", want, reasons)
	}
	hwSupported := ms.Value("kernel_exporter_config_up", L("config", "psec_hw")) == 1
	if !hwSupported {
		want := "hardware perf events not supported by this kernel or machine (no PMU for this event): cannot open hardware event config=0 (section perf_event/type=0,config=0,frequency=1000) on CPU 0"
		if !strings.Contains(reasons, want) {
			t.Errorf("psec_hw down without the reason %q:\n%s", want, reasons)
		}
	}

	ms = checkCPUClockSampling(t, e, bin, ms, "psec")
	t.Run("hardware_cycles", func(t *testing.T) {
		if !hwSupported {
			testenv.SkipLacking(t, "a hardware PMU", "config psec_hw is down (its reason was checked), so cycles sampling cannot be checked")
		}
		if v := ms.Value("psec_hw_perf_samples_total", L("comm", "ke_target")); v == 0 {
			t.Errorf("hardware cycles: no samples of ke_target")
		}
	})
}

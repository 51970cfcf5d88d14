// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kernel-exporter/kernel_exporter/budget"
	"github.com/kernel-exporter/kernel_exporter/loader"
)

// hogYAML exports testdata/budget/hog.bpf.c.
const hogYAML = `metrics:
  counters:
    - name: mem_hog_total
      help: never filled; the memory budget refuses the map
      labels:
        - name: a
          size: 4
          decoders:
            - name: uint
        - name: b
          size: 4
          decoders:
            - name: uint
`

// TestMemoryBudgetRefusesBigMap runs a user program with a 4-million-entry
// hash map (about 320 MiB) next to the bundled timers under
// --bpf.memory-budget=64MiB: the big config is down with a reason that
// says "budget" and gives its need and what is left,
// budget_exceeded_total{resource="memory"} is 1, timers serves, and the
// kernel holds no map of the refused config.
func TestMemoryBudgetRefusesBigMap(t *testing.T) {
	dir := t.TempDir()
	obj := filepath.Join(dir, "mem_hog.bpf.o")
	compileBPF(t, filepath.Join("integration", "testdata", "budget", "hog.bpf.c"), obj)
	writeProbeConfig(t, dir, "mem_hog", hogYAML)

	// The need the exporter will compute, from the same object.
	data, err := os.ReadFile(obj)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := loader.ParseObject(obj, data)
	if err != nil {
		t.Fatal(err)
	}
	need, err := budget.EstimateSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	if need.Total < 256<<20 {
		t.Fatalf("the fixture's maps are estimated at %s: want at least 256 MiB (4194304 elements of 64 bytes)", budget.FormatBytes(need.Total))
	}

	e := Start(t, "--programs=timers", "--config.dir="+dir, "--config.names=mem_hog", "--bpf.memory-budget=64MiB")
	ms := e.Scrape()
	if v := ms.Value("kernel_exporter_config_up", L("config", "mem_hog")); v != 0 {
		t.Errorf("config_up{config=mem_hog} = %v, want 0", v)
	}
	var reason string
	for _, m := range ms["kernel_exporter_config_error_info"].GetMetric() {
		if matches(m, L("config", "mem_hog")) {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "reason" {
					reason = lp.GetValue()
				}
			}
		}
	}
	// What is left is the whole budget or the budget less timers' maps,
	// whichever config reserved first.
	left := regexp.MustCompile(`over the memory budget: (64 MiB|63\.9 MiB) of 64 MiB left \(--bpf\.memory-budget\)$`)
	if !strings.HasPrefix(reason, "maps need "+budget.FormatBytes(need.Total)+" (map mem_hog_total: ") || !left.MatchString(reason) {
		t.Errorf("config_error_info{config=mem_hog} reason = %q, want \"maps need %s (map mem_hog_total: ...), over the memory budget: <64 or 63.9> MiB of 64 MiB left (--bpf.memory-budget)\"\n%s",
			reason, budget.FormatBytes(need.Total), e.Logs())
	}
	t.Logf("reason: %s", reason)
	if v := ms.Value("kernel_exporter_budget_exceeded_total", L("config", "mem_hog", "resource", "memory")); v != 1 {
		t.Errorf("budget_exceeded_total{config=mem_hog,resource=memory} = %v, want 1", v)
	}
	if row := landingRow(e.Get("/"), "mem_hog"); !strings.Contains(row, "over its memory budget") {
		t.Errorf("landing page row of mem_hog does not mark it over the memory budget: %s", row)
	}
	if v := ms.Value("kernel_exporter_config_up", L("config", "timers")); v != 1 {
		t.Errorf("config_up{config=timers} = %v, want 1\n%s", v, e.Logs())
	}
	// timers serves: its counter moves (timers start all the time).
	first := ms.Value("kernel_timer_starts_total", nil)
	Eventually(t, 10*time.Second, func() bool { return e.Scrape().Value("kernel_timer_starts_total", nil) > first },
		"kernel_timer_starts_total stayed at %v: the small config does not serve", first)

	// Nothing was allocated: the kernel has no map of the refused config,
	// while timers' map is there (the enumeration works).
	names := kernelMapNames(t)
	if names["mem_hog_total"] {
		t.Errorf("a map named mem_hog_total exists in the kernel: the refused config allocated its map")
	}
	if !names["timer_starts_to"] { // map names are cut to 15 bytes
		t.Errorf("no map named timer_starts_to in the kernel: the enumeration missed timers' map (names %v)", names)
	}
}

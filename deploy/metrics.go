// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/kernel-exporter/kernel_exporter/programs"
)

// SelfMetrics are the exporter's own metrics that the dashboard and the
// rules use (collector/status.go, collector/self.go, collector/maphealth.go,
// budget/exceeded.go), and the host BPF collector's (bpfstats).
// kernel_exporter_budget_exceeded_total has no series until a budget trips.
var SelfMetrics = []string{
	"kernel_bpf_program_run_seconds_total",
	"kernel_bpf_program_runs_total",
	"kernel_bpf_program_info",
	"kernel_bpf_map_memory_bytes",
	"kernel_cpus_online",
	"kernel_exporter_config_up",
	"kernel_exporter_config_loading",
	"kernel_exporter_budget_exceeded_total",
	"kernel_exporter_map_info",
	"kernel_exporter_map_entries",
	"kernel_exporter_map_max_entries",
	"kernel_exporter_map_update_errors_total",
	"kernel_exporter_series_overflow_entries_total",
	"kernel_exporter_scrape_duration_seconds",
	"kernel_exporter_audit_ratio",
	"kernel_exporter_audit_events_total",
}

// ProgramMetrics maps every series name a bundled program exports to the
// program's name: "kernel_" + the metric's name for counters, and its
// _bucket, _sum and _count series for histograms (from programs/*.yaml).
func ProgramMetrics() (map[string]string, error) {
	names, err := fs.Glob(programs.FS, "*.yaml")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, n := range names {
		b, err := fs.ReadFile(programs.FS, n)
		if err != nil {
			return nil, err
		}
		type named struct {
			Name   string
			Values []struct{ Name string } `yaml:"values"`
		}
		var c struct {
			Metrics struct {
				Counters   []named `yaml:"counters"`
				Gauges     []named `yaml:"gauges"`
				Histograms []named `yaml:"histograms"`
			} `yaml:"metrics"`
		}
		if err := yaml.Unmarshal(b, &c); err != nil {
			return nil, fmt.Errorf("programs/%s: %w", n, err)
		}
		prog := strings.TrimSuffix(n, ".yaml")
		// A metric with values exports one metric per value, named there.
		for _, m := range append(c.Metrics.Counters, c.Metrics.Gauges...) {
			if len(m.Values) == 0 {
				out["kernel_"+m.Name] = prog
			}
			for _, v := range m.Values {
				out["kernel_"+v.Name] = prog
			}
		}
		for _, m := range c.Metrics.Histograms {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				out["kernel_"+m.Name+s] = prog
			}
		}
	}
	return out, nil
}

var metricRE = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)

// Metrics returns the sorted, distinct metric names q selects: the
// identifiers that start with "kernel_" or hold a ":" (recording rules),
// outside label matchers and strings.
func Metrics(q string) []string {
	// Drop label matchers and strings, which may hold anything.
	var b strings.Builder
	depth := 0
	scan(q, func(i int) bool {
		switch c := q[i]; {
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			depth--
			b.WriteByte(' ')
		case depth == 0:
			b.WriteByte(c)
		}
		return true
	})
	seen := map[string]bool{}
	var out []string
	for _, id := range metricRE.FindAllString(b.String(), -1) {
		if (strings.HasPrefix(id, "kernel_") || strings.Contains(id, ":")) && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"os"
	"strings"
	"testing"
	"time"
)

// TestAuditDefaultsHealthy runs the default programs (timers, biolatency,
// runqlat) with the audit every 500 ms for 6 s on this healthy host: no
// audit interval fails (kernel_exporter_audit_errors_total 0 for every
// pair), nothing of the audit is logged at WARN or ERROR, and runqlat's
// pair against /proc/schedstat, which this Firecracker kernel lacks
// (CONFIG_SCHEDSTATS off), is "not available on this kernel", logged once
// at INFO, with no ratio, and shown so on the landing page.
func TestAuditDefaultsHealthy(t *testing.T) {
	e := Start(t, "--audit.interval=500ms")
	time.Sleep(6 * time.Second)
	ms := e.Scrape()
	pairs := ms.LabelValues("kernel_exporter_audit_errors_total", "source")
	if !strings.Contains(strings.Join(pairs, " "), "block_reads") || !strings.Contains(strings.Join(pairs, " "), "schedstat_switch_ins") {
		t.Fatalf("audited sources %v, want biolatency's and runqlat's\n%s", pairs, e.Logs())
	}
	for _, src := range pairs {
		if v := ms.Value("kernel_exporter_audit_errors_total", L("source", src)); v != 0 {
			t.Errorf("kernel_exporter_audit_errors_total{source=%q} = %v after 12 intervals on a healthy host, want 0", src, v)
		}
	}
	logs := e.Logs()
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, "audit") && (strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR")) {
			t.Errorf("audit logged at WARN/ERROR on a healthy host: %s", line)
		}
	}
	const msg = `msg="audit: kernel counter not available on this kernel, not compared" config=runqlat kernel_counter=schedstat_switch_ins reason="/proc/schedstat is absent (CONFIG_SCHEDSTATS off)"`
	if _, err := os.Stat("/proc/schedstat"); err == nil {
		t.Logf("this kernel has /proc/schedstat: runqlat's pair is compared (ratio series: %d)",
			ms.Series("kernel_exporter_audit_ratio", L("config", "runqlat")))
		return
	}
	var lines []string
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, msg) {
			lines = append(lines, line)
		}
	}
	if len(lines) != 1 || !strings.Contains(lines[0], "level=INFO ") {
		t.Errorf("log lines %s: %q, want 1 at INFO\n%s", msg, lines, logs)
	}
	if n := ms.Series("kernel_exporter_audit_ratio", L("config", "runqlat")); n != 0 {
		t.Errorf("runqlat has %d ratio series without /proc/schedstat, want 0", n)
	}
	if !strings.Contains(e.Get("/"), `schedstat_switch_ins <span class="">not available on this kernel: /proc/schedstat is absent (CONFIG_SCHEDSTATS off)</span>`) {
		t.Errorf("the landing page does not say runqlat's pair is not available:\n%s", landingRow(e.Get("/"), "runqlat"))
	}
}

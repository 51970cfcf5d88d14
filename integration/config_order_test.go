// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDuplicateMetricFirstListedServes runs two user configs that define
// the same metric (kernel_ttl_calls_total, the getppid counter), dupa
// listed before dupb: dupa serves it and dupb is down with a reason naming
// the metric and dupa, whichever load ends first. Once with dupa's load
// slowed down by 3 s (the test hook of exporter/testdelay.go: before,
// the faster dupb took the name), once with dupb's, once with neither.
func TestDuplicateMetricFirstListedServes(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"dupa", "dupb"} {
		compileBPF(t, filepath.Join("integration", "testdata", "ttl", "getppid.bpf.c"), filepath.Join(dir, n+".bpf.o"))
		writeProbeConfig(t, dir, n, reloadYAML("ttl_calls_total", "getppid calls (config "+n+")"))
	}
	for _, delay := range []string{"dupa=3s", "dupb=3s", ""} {
		t.Run("delay_"+delay, func(t *testing.T) {
			t.Setenv(loadDelayEnv, delay)
			e := Start(t, "--config.dir="+dir, "--config.names=dupa,dupb", "--programs=none")
			syscall.Getppid() // a series to serve
			var m Metrics
			Eventually(t, 5*time.Second, func() bool {
				m = e.Scrape()
				return m["kernel_ttl_calls_total"] != nil
			}, "kernel_ttl_calls_total not served\n%s", e.Logs)
			if v := m.Value("kernel_exporter_config_up", L("config", "dupa")); v != 1 {
				t.Errorf("dupa (listed first) is not up: %s\n%s", errorReason(m, "dupa"), e.Logs())
			}
			if v := m.Value("kernel_exporter_config_up", L("config", "dupb")); v != 0 {
				t.Errorf("dupb (listed second) is up")
			}
			r := errorReason(m, "dupb")
			if !strings.Contains(r, "kernel_ttl_calls_total") || !strings.Contains(r, "config dupa") || !strings.Contains(r, "listed first") {
				t.Errorf("dupb's reason %q: want it to name the metric and dupa, listed first", r)
			}
			f := m["kernel_ttl_calls_total"]
			if f == nil || !strings.Contains(f.GetHelp(), "config dupa") {
				t.Errorf("kernel_ttl_calls_total served with help %q, want dupa's", f.GetHelp())
			}
			t.Logf("delay %q: dupb down: %s", delay, r)
		})
	}
}

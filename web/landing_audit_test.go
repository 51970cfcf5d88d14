// SPDX-License-Identifier: Apache-2.0

package web

import (
	"strings"
	"testing"

	"github.com/kernel-exporter/kernel_exporter/collector"
)

// TestLandingAudit checks each config's audit on the landing page: the
// ratio in the band plain, out of it or not compared marked, the sources
// without kernel events said so once, nothing for a config without an
// audit section; a kernel counter this kernel does not keep said so,
// unmarked.
func TestLandingAudit(t *testing.T) {
	status := &collector.Status{}
	for _, n := range []string{"biolatency", "softirq", "timers", "runqlat", "oomkill"} {
		status.Add(&collector.State{Name: n, Source: "bundled"})
	}
	page := landingPage(t, status, Options{Audit: func() map[string][]AuditState {
		return map[string][]AuditState{
			"biolatency": {{Source: "block_discards"}, {Source: "block_flushes", HasRatio: true, Ratio: 0.9991, InBand: true}, {Source: "block_reads"}},
			"softirq":    {{Source: "softirqs_net_rx", HasRatio: true, Ratio: 0.5}},
			"runqlat":    {{Source: "schedstat_switch_ins", Unavailable: "/proc/schedstat is absent (CONFIG_SCHEDSTATS off)"}},
			"timers":     {{Source: "context_switches", Err: "/proc/stat: no ctxt line"}},
		}
	}}, nil)
	for name, want := range map[string]string{
		"biolatency": `audit: block_flushes <span class="">0.999</span> block_discards, block_reads <span class="">no kernel events</span>`,
		"softirq":    `audit: softirqs_net_rx <span class="mark">0.500</span>`,
		"runqlat":    `audit: schedstat_switch_ins <span class="">not available on this kernel: /proc/schedstat is absent (CONFIG_SCHEDSTATS off)</span>`,
		"timers":     `audit: context_switches <span class="mark">not compared: /proc/stat: no ctxt line</span>`,
	} {
		if r := rowOf(page, name); !strings.Contains(r, want) {
			t.Errorf("row of %s lacks %q:\n%s", name, want, r)
		}
	}
	if r := rowOf(page, "oomkill"); r == "" || strings.Contains(r, "audit:") {
		t.Errorf("oomkill has no audit here, yet its row shows one:\n%s", r)
	}
}

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
// audit section.
func TestLandingAudit(t *testing.T) {
	status := &collector.Status{}
	for _, n := range []string{"biolatency", "softirq", "timers", "runqlat"} {
		status.Add(&collector.State{Name: n, Source: "bundled"})
	}
	page := landingPage(t, status, Options{Audit: func() map[string][]AuditState {
		return map[string][]AuditState{
			"biolatency": {{Source: "block_discards"}, {Source: "block_flushes", HasRatio: true, Ratio: 0.9991, InBand: true}, {Source: "block_reads"}},
			"softirq":    {{Source: "softirqs_net_rx", HasRatio: true, Ratio: 0.5}},
			"runqlat":    {{Source: "schedstat_switch_ins", Err: "/proc/schedstat: no such file or directory"}},
		}
	}}, nil)
	for name, want := range map[string]string{
		"biolatency": `audit: block_flushes <span class="">0.999</span> block_discards, block_reads <span class="">no kernel events</span>`,
		"softirq":    `audit: softirqs_net_rx <span class="mark">0.500</span>`,
		"runqlat":    `audit: schedstat_switch_ins <span class="mark">not compared: /proc/schedstat: no such file or directory</span>`,
	} {
		if r := rowOf(page, name); !strings.Contains(r, want) {
			t.Errorf("row of %s lacks %q:\n%s", name, want, r)
		}
	}
	if r := rowOf(page, "timers"); strings.Contains(r, "audit:") {
		t.Errorf("timers has no audit section, yet its row shows one:\n%s", r)
	}
}

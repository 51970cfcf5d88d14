// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"io/fs"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/kernel-exporter/kernel_exporter/config"
	"github.com/kernel-exporter/kernel_exporter/programs"
)

// TestBundledAuditPairs checks the bundled programs' audit sections: each
// pair counts the same events as its kernel counter, so that the shipped
// alert stays silent on a healthy host. tcp_retransmits has none:
// RetransSegs counts segments (a TSO skb as several), only in the
// exporter's network namespace, and SYN-ACK retransmits
// (docs/programs.md).
func TestBundledAuditPairs(t *testing.T) {
	want := map[string]string{
		"biolatency":     "block_discards block_flushes block_reads",
		"direct_reclaim": "direct_reclaims",
		"oomkill":        "oom_kills",
		"runqlat":        "schedstat_switch_ins",
		"softirq":        "softirqs_block softirqs_hi softirqs_hrtimer softirqs_irq_poll softirqs_net_rx softirqs_net_tx softirqs_rcu softirqs_sched softirqs_tasklet softirqs_timer",
	}
	got := map[string]string{}
	for _, name := range programs.Names() {
		b, err := fs.ReadFile(programs.FS, name+".yaml")
		if err != nil {
			t.Fatal(err)
		}
		c, err := config.Parse(name+".yaml", b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(c.Audit) == 0 {
			continue
		}
		var src []string
		for _, a := range c.Audit {
			src = append(src, a.Source)
		}
		slices.Sort(src)
		got[name] = strings.Join(src, " ")
	}
	if !maps.Equal(got, want) {
		t.Errorf("bundled audit pairs:\n got %v\nwant %v", got, want)
	}
	if _, ok := got["tcp_retransmits"]; ok {
		t.Error("tcp_retransmits is audited against RetransSegs, which counts segments of one network namespace")
	}
}

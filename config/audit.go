// SPDX-License-Identifier: Apache-2.0

package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Audit is one entry of a config's audit section: a metric of the config
// whose events the kernel also counts, and the kernel counter to compare
// it with over each audit interval (package audit):
//
//	audit:
//	  - metric: bio_latency_seconds   # a counter or histogram of this config
//	    source: block_reads           # one of AuditSources
//	    labels: {operation: read}     # only the series with these label values
//
// Our count is the counter's sum, or the histogram's count, over the
// metric's series whose label values equal every one in Labels (all series
// when Labels is empty), as decoded, so as served.
type Audit struct {
	Metric string            `yaml:"metric"`
	Source string            `yaml:"source"`
	Labels map[string]string `yaml:"labels"`
}

// Limits of the audit section.
const (
	// MaxAudits bounds the entries of a config's audit section.
	MaxAudits = 32
	// MaxAuditLabels bounds an entry's labels.
	MaxAuditLabels = 8
)

// AuditSources are the kernel counters an audit entry may name, with what
// each counts. Package audit reads them (every name here has a reader
// there, which its tests check).
var AuditSources = map[string]string{
	"block_reads":          "read requests completed, summed over the request-based whole disks (/sys/block/<disk>/stat field 1)",
	"block_writes":         "write requests completed, summed over the request-based whole disks (/sys/block/<disk>/stat field 5)",
	"block_discards":       "discard requests completed, summed over the request-based whole disks (/sys/block/<disk>/stat field 12)",
	"block_flushes":        "flush requests completed, summed over the request-based whole disks (/sys/block/<disk>/stat field 16)",
	"context_switches":     "context switches of every CPU, to the idle task included (/proc/stat ctxt)",
	"schedstat_switch_ins": "switch-ins of a task other than the idle task, summed over CPUs (/proc/schedstat pcount, CONFIG_SCHEDSTATS)",
	"softirqs":             "softirq handler runs, every vector, summed over CPUs (/proc/softirqs)",
	"softirqs_hi":          "HI softirq runs (/proc/softirqs)",
	"softirqs_timer":       "TIMER softirq runs (/proc/softirqs)",
	"softirqs_net_tx":      "NET_TX softirq runs (/proc/softirqs)",
	"softirqs_net_rx":      "NET_RX softirq runs (/proc/softirqs)",
	"softirqs_block":       "BLOCK softirq runs (/proc/softirqs)",
	"softirqs_irq_poll":    "IRQ_POLL softirq runs (/proc/softirqs)",
	"softirqs_tasklet":     "TASKLET softirq runs (/proc/softirqs)",
	"softirqs_sched":       "SCHED softirq runs (/proc/softirqs)",
	"softirqs_hrtimer":     "HRTIMER softirq runs (/proc/softirqs)",
	"softirqs_rcu":         "RCU softirq runs (/proc/softirqs)",
	"tcp_retrans_segs":     "TCP segments retransmitted, in the exporter's network namespace (/proc/net/snmp Tcp RetransSegs)",
	"oom_kills":            "tasks killed by the OOM killer (/proc/vmstat oom_kill)",
	"direct_reclaims":      "direct reclaims by allocating tasks, every zone (/proc/vmstat allocstall_*)",
}

// AuditSourceNames returns the names of AuditSources, sorted.
func AuditSourceNames() []string {
	names := make([]string, 0, len(AuditSources))
	for n := range AuditSources {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// validateAudit checks the audit section: at most MaxAudits entries, each
// naming a counter or histogram of the config (not a gauge: a level counts
// no events), a known source, each source at most once, and at most
// MaxAuditLabels labels, each a label the metric lists (when it lists its
// labels; a metric whose labels come from BTF is checked at load) with a
// value of at most MaxNameLen bytes. A metric whose labels come from BTF
// (it lists none, or only overrides) has its label names checked when the
// audit first reads it.
func (c *Config) validateAudit() error {
	if len(c.Audit) > MaxAudits {
		return c.Errorf("audit", "%d entries, more than the limit of %d", len(c.Audit), MaxAudits)
	}
	seen := map[string]int{}
	for i, a := range c.Audit {
		path := fmt.Sprintf("audit[%d]", i)
		if a.Metric == "" {
			return c.Errorf(path+".metric", "missing: name a counter or histogram of this config")
		}
		labels, ok := c.auditMetric(a.Metric)
		if !ok {
			return c.Errorf(path+".metric", "%s is no counter or histogram of this config", Quote(a.Metric))
		}
		if a.Source == "" {
			return c.Errorf(path+".source", "missing: name a kernel counter (%s)", strings.Join(AuditSourceNames(), ", "))
		}
		if _, ok := AuditSources[a.Source]; !ok {
			return c.Errorf(path+".source", "unknown kernel counter %s (known: %s)", Quote(a.Source), strings.Join(AuditSourceNames(), ", "))
		}
		if j, ok := seen[a.Source]; ok {
			return c.Errorf(path+".source", "%s already audited by audit[%d]", Quote(a.Source), j)
		}
		seen[a.Source] = i
		if len(a.Labels) > MaxAuditLabels {
			return c.Errorf(path+".labels", "%d labels, more than the limit of %d", len(a.Labels), MaxAuditLabels)
		}
		for _, k := range slices.Sorted(maps.Keys(a.Labels)) {
			if labels != nil && !slices.Contains(labels, k) {
				return c.Errorf(path+".labels", "metric %s has no label %s", Quote(a.Metric), Quote(k))
			}
			if len(a.Labels[k]) > MaxNameLen {
				return c.Errorf(path+".labels."+k, "longer than %d bytes (%d)", MaxNameLen, len(a.Labels[k]))
			}
		}
	}
	return nil
}

// auditMetric returns whether name is a counter or histogram of the
// config, and the label names it lists (nil when it lists none, so that
// they come from BTF).
func (c *Config) auditMetric(name string) ([]string, bool) {
	names := func(ls []Label) []string {
		var out []string
		for _, l := range ls {
			if l.Size == 0 {
				return nil // overrides of labels from BTF: not all of them
			}
			out = append(out, l.Name)
		}
		return out
	}
	for _, m := range c.Metrics.Counters {
		if m.Name == name && len(m.Values) == 0 {
			return names(m.Labels), true
		}
	}
	for _, h := range c.Metrics.Histograms {
		if h.Name == name {
			return names(h.Labels), true
		}
	}
	return nil, false
}

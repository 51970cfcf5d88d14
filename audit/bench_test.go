// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"strings"
	"testing"
	"time"

	"github.com/kernel-exporter/kernel_exporter/collector"
	"github.com/kernel-exporter/kernel_exporter/config"
)

// BenchmarkTick measures one audit interval of the bundled audits
// (biolatency's 3 entries, softirq's 10, a context_switches one, a
// tcp_retrans_segs one as a user config may name, oomkill's and
// direct_reclaim's) on this machine's
// kernel files (/sys/block, /proc): the counters read twice, the
// snapshots counted. The maps' reads are the collector's
// (collector.Config.Read, measured by its own benchmarks) and are left
// out: Read returns snapshots built once.
func BenchmarkTick(b *testing.B) {
	vectors := []string{"HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU"}
	upper := make([]float64, 27)
	for i := range upper {
		upper[i] = float64(uint64(1)<<i) * 1e-6
	}
	hist := func(name string, labels []string, values [][]string) *collector.Snapshot {
		var sd []collector.SeriesData
		for _, v := range values {
			sd = append(sd, collector.SeriesData{Labels: v, Cum: make([]uint64, len(upper)), Count: 100})
		}
		return &collector.Snapshot{Families: []*collector.Family{collector.NewFamily(name, "h", collector.KindHistogram, labels, upper, sd)}}
	}
	var bio, soft [][]string
	for _, d := range []string{"253:0", "253:16", "7:0"} {
		for _, op := range []string{"read", "write", "flush", "discard"} {
			bio = append(bio, []string{d, op})
		}
	}
	var softEntries []config.Audit
	for _, v := range vectors {
		soft = append(soft, []string{v})
		softEntries = append(softEntries, config.Audit{Metric: "softirq", Source: "softirqs_" + strings.ToLower(v), Labels: map[string]string{"vector": v}})
	}
	one := func(name string) *collector.Snapshot {
		return &collector.Snapshot{Families: []*collector.Family{collector.NewFamily(name, "h", collector.KindCounter, nil, nil, []collector.SeriesData{{Value: 1}})}}
	}
	same := func(s string) string { return s }
	snaps := map[string]*collector.Snapshot{
		"biolatency": hist("bio", []string{"device", "operation"}, bio),
		"softirq":    hist("softirq", []string{"vector"}, soft),
		"runqlat":    hist("runq", nil, [][]string{{}}),
		"tcp":        one("retrans"), "oom": one("oom"), "reclaim": hist("reclaim", []string{"kind"}, [][]string{{"global"}, {"memcg"}}),
	}
	read := func(c string) func() *collector.Snapshot {
		s := snaps[c]
		s.Start = time.Unix(1, 0)
		return func() *collector.Snapshot { return s }
	}
	targets := []Target{
		{Config: "biolatency", Read: read("biolatency"), MetricName: same, Entries: []config.Audit{
			{Metric: "bio", Source: "block_reads", Labels: map[string]string{"operation": "read"}},
			{Metric: "bio", Source: "block_discards", Labels: map[string]string{"operation": "discard"}},
			{Metric: "bio", Source: "block_flushes", Labels: map[string]string{"operation": "flush"}}}},
		{Config: "softirq", Read: read("softirq"), MetricName: same, Entries: softEntries},
		{Config: "runqlat", Read: read("runqlat"), MetricName: same, Entries: []config.Audit{{Metric: "runq", Source: "context_switches"}}},
		{Config: "tcp", Read: read("tcp"), MetricName: same, Entries: []config.Audit{{Metric: "retrans", Source: "tcp_retrans_segs"}}},
		{Config: "oom", Read: read("oom"), MetricName: same, Entries: []config.Audit{{Metric: "oom", Source: "oom_kills"}}},
		{Config: "reclaim", Read: read("reclaim"), MetricName: same, Entries: []config.Audit{{Metric: "reclaim", Source: "direct_reclaims", Labels: map[string]string{"kind": "global"}}}},
	}
	a := New(Options{Targets: func() []Target { return targets }})
	a.Tick()
	for c, ss := range a.States() {
		for _, s := range ss {
			if s.Err != "" {
				b.Fatalf("%s/%s: %s", c, s.Source, s.Err)
			}
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		a.Tick()
	}
}

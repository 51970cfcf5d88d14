// SPDX-License-Identifier: Apache-2.0

package audit

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kernel-exporter/kernel_exporter/collector"
	"github.com/kernel-exporter/kernel_exporter/config"
)

// fakeRoot writes a file system root with the kernel files every source
// reads, the counters scaled by n.
func fakeRoot(t testing.TB, root string, n uint64) {
	t.Helper()
	u := func(v uint64) string { return strconv.FormatUint(v*n, 10) }
	files := map[string]string{
		"proc/stat":      "cpu  1 2 3\nintr 5 6 7\nctxt " + u(1000) + "\nbtime 1\n",
		"proc/schedstat": "version 17\ntimestamp 1\ncpu0 0 0 5 1 4 2 100 200 " + u(300) + "\ndomain0 MC 3 0 0\ncpu1 0 0 5 1 4 2 100 200 " + u(400) + "\n",
		"proc/softirqs": "                    CPU0       CPU1\n          HI:          0          0\n       TIMER:      " + u(10) + "      " + u(20) +
			"\n      NET_TX:          1          0\n      NET_RX:        " + u(7) + "          0\n       BLOCK:          0          0\n    IRQ_POLL:          0          0\n     TASKLET:          0          0\n       SCHED:          3          4\n     HRTIMER:          0          0\n         RCU:          9          9\n",
		"proc/net/snmp":        "Ip: Forwarding DefaultTTL\nIp: 1 64\nTcp: RtoAlgorithm RtoMin RtoMax MaxConn RetransSegs InErrs\nTcp: 1 200 120000 -1 " + u(42) + " 0\nUdp: InDatagrams\nUdp: 5\n",
		"proc/vmstat":          "nr_free_pages 100\nallocstall_dma 0\nallocstall_normal " + u(3) + "\nallocstall_movable " + u(2) + "\noom_kill " + u(1) + "\n",
		"sys/block/vda/stat":   " " + u(100) + " 2 3 4 " + u(200) + " 6 7 8 0 10 11 " + u(30) + " 13 14 15 " + u(40) + " 17\n",
		"sys/block/loop0/stat": " " + u(1) + " 0 0 0 " + u(2) + " 0 0 0 0 0 0 " + u(3) + " 0 0 0 " + u(4) + " 0\n",
		"sys/block/dm-0/stat":  " 999 0 0 0 999 0 0 0 0 0 0 999 0 0 0 999 0\n", // bio-based: no mq
	}
	for p, s := range files {
		p = filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"vda", "loop0"} {
		if err := os.MkdirAll(filepath.Join(root, "sys/block", d, "mq"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSources reads every source from a fake root and checks its value.
func TestSources(t *testing.T) {
	root := t.TempDir()
	fakeRoot(t, root, 1)
	want := map[string]uint64{
		"block_reads": 101, "block_writes": 202, "block_discards": 33, "block_flushes": 44,
		"context_switches": 1000, "schedstat_switch_ins": 700,
		"softirqs": 0 + 30 + 1 + 7 + 7 + 18, "softirqs_hi": 0, "softirqs_timer": 30, "softirqs_net_tx": 1, "softirqs_net_rx": 7,
		"softirqs_block": 0, "softirqs_irq_poll": 0, "softirqs_tasklet": 0, "softirqs_sched": 7, "softirqs_hrtimer": 0, "softirqs_rcu": 18,
		"tcp_retrans_segs": 42, "oom_kills": 1, "direct_reclaims": 5,
	}
	k := NewKernel(root)
	for _, name := range config.AuditSourceNames() {
		w, ok := want[name]
		if !ok {
			t.Errorf("source %s: no expected value in this test", name)
			continue
		}
		got, err := k.Read(name)
		if err != nil || got != w {
			t.Errorf("source %s = %d, %v; want %d", name, got, err, w)
		}
	}
	if len(want) != len(config.AuditSources) {
		t.Errorf("%d sources tested, config.AuditSources has %d", len(want), len(config.AuditSources))
	}
	// A file or line the kernel does not have: not available, with the
	// reason.
	for _, tc := range []struct{ source, file, content, reason string }{
		{"oom_kills", "proc/vmstat", "", "/proc/vmstat is absent (no CONFIG_PROC_FS)"},
		{"schedstat_switch_ins", "proc/schedstat", "", "/proc/schedstat is absent (CONFIG_SCHEDSTATS off)"},
		{"tcp_retrans_segs", "proc/net/snmp", "", "/proc/net/snmp is absent (no CONFIG_NET or CONFIG_PROC_FS)"},
		{"block_reads", "sys/block", "", "/sys/block is absent (sysfs not mounted, or no CONFIG_BLOCK)"},
		{"oom_kills", "proc/vmstat", "nr_free_pages 1\n", "/proc/vmstat: no oom_kill line"},
		{"schedstat_switch_ins", "proc/schedstat", "version 18\ncpu0 1 2 3 4 5 6 7 8 9\n", "/proc/schedstat: version 18, want 15 to 17"},
		{"tcp_retrans_segs", "proc/net/snmp", "Tcp: RtoAlgorithm\nTcp: 1\n", "/proc/net/snmp: Tcp: no field RetransSegs"},
		{"softirqs_rcu", "proc/softirqs", "CPU0\nHI: 1\n", "/proc/softirqs: no RCU row"},
	} {
		r := t.TempDir()
		if tc.content != "" {
			p := filepath.Join(r, tc.file)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		_, err := NewKernel(r).Read(tc.source)
		var ue *UnavailableError
		if !errors.As(err, &ue) || ue.Reason != tc.reason {
			t.Errorf("%s from %q: %v, want not available: %s", tc.source, tc.content, err, tc.reason)
		}
	}
	// A file that exists but cannot be read is a read error.
	r := t.TempDir()
	if err := os.MkdirAll(filepath.Join(r, "proc/vmstat"), 0o755); err != nil {
		t.Fatal(err)
	}
	var ue *UnavailableError
	if _, err := NewKernel(r).Read("oom_kills"); err == nil || errors.As(err, &ue) || !strings.Contains(err.Error(), "/proc/vmstat") {
		t.Errorf("/proc/vmstat a directory: %v, want a read error", err)
	}
}

// TestParseErrors checks that the parsers refuse malformed files and
// name the fault, not the content.
func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  func() error
		want string
	}{
		{"disk short", func() error { _, err := ParseDiskStat([]byte("1 2 3 4 5 6 7 8 9 10 11")); return err }, "11 fields, want 16 or more"},
		{"disk word", func() error {
			_, err := ParseDiskStat([]byte("1 2 3 4 SECRET 6 7 8 9 10 11 12 13 14 15 16"))
			return err
		}, "field 5: not a decimal number (6 bytes)"},
		{"no ctxt", func() error { _, err := ParseProcStatCtxt([]byte("cpu 1\n")); return err }, "no ctxt line"},
		{"schedstat version", func() error {
			_, err := ParseSchedstatSwitchIns([]byte("version 14\ncpu0 1 2 3 4 5 6 7 8 9\n"))
			return err
		}, "version 14, want 15 to 17"},
		{"schedstat short", func() error { _, err := ParseSchedstatSwitchIns([]byte("version 15\ncpu0 1 2 3\n")); return err }, "cpu line with 4 fields"},
		{"softirqs wide", func() error { _, err := ParseSoftirqs([]byte("CPU0\nHI: 1 2\n")); return err }, "row 1: 2 counts for 1 CPUs"},
		{"snmp mismatch", func() error {
			_, err := ParseSNMP([]byte("Tcp: A RetransSegs\nTcp: 1\n"), "Tcp", "RetransSegs")
			return err
		}, "Tcp: 2 names but 1 values"},
		{"vmstat missing", func() error { _, err := ParseVmstat([]byte("nr_free_pages 1\n"), "oom_kill", true); return err }, "no oom_kill line"},
	} {
		err := tc.err()
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "SECRET") {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// snapshot returns a snapshot of config c with a counter by (op) and a
// histogram by (vector).
func snapshot(start time.Time, reads, writes float64, hist map[string]uint64) *collector.Snapshot {
	cnt := collector.NewFamily("kernel_ops_total", "h", collector.KindCounter, []string{"op"}, nil, []collector.SeriesData{
		{Labels: []string{"read"}, Value: reads}, {Labels: []string{"write"}, Value: writes}})
	var sd []collector.SeriesData
	for v, n := range hist {
		sd = append(sd, collector.SeriesData{Labels: []string{v}, Cum: []uint64{n / 2, n}, Count: n})
	}
	h := collector.NewFamily("kernel_softirq_seconds", "h", collector.KindHistogram, []string{"vector"}, []float64{1, 2}, sd)
	g := collector.NewFamily("kernel_level", "h", collector.KindGauge, nil, nil, []collector.SeriesData{{Value: 1}})
	return &collector.Snapshot{Config: "c", Families: []*collector.Family{cnt, h, g}, Start: start}
}

func TestCount(t *testing.T) {
	s := snapshot(time.Time{}, 5, 7, map[string]uint64{"NET_RX": 10, "TIMER": 3})
	for _, tc := range []struct {
		metric string
		labels map[string]string
		want   float64
		err    string
	}{
		{"kernel_ops_total", nil, 12, ""},
		{"kernel_ops_total", map[string]string{"op": "read"}, 5, ""},
		{"kernel_ops_total", map[string]string{"op": "trim"}, 0, ""},
		{"kernel_softirq_seconds", map[string]string{"vector": "NET_RX"}, 10, ""},
		{"kernel_softirq_seconds", nil, 13, ""},
		{"kernel_ops_total", map[string]string{"cpu": "0"}, 0, `metric kernel_ops_total has no label "cpu" (labels: op)`},
		{"kernel_level", nil, 0, "is a gauge"},
		{"kernel_none", nil, 0, "not in the config's read"},
	} {
		got, err := Count(s, tc.metric, tc.labels)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s %v: err %v, want %q", tc.metric, tc.labels, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s %v = %v, %v; want %v", tc.metric, tc.labels, got, err, tc.want)
		}
	}
}

// TestAuditor runs intervals over a fake root and fake snapshots and
// checks the ratio and counters served: the first interval sets the
// baseline, the next ones compare, a reload (new Start) rebases, a
// kernel counter that did not move leaves the ratio absent.
func TestAuditor(t *testing.T) {
	root := t.TempDir()
	start := time.Unix(1000, 0)
	var snap *collector.Snapshot
	a := New(Options{Root: root, Targets: func() []Target {
		return []Target{{Config: "c", Read: func() *collector.Snapshot { return snap },
			MetricName: func(s string) string { return "kernel_" + s },
			Entries: []config.Audit{{Metric: "ops_total", Source: "block_reads", Labels: map[string]string{"op": "read"}},
				{Metric: "softirq_seconds", Source: "softirqs_net_rx", Labels: map[string]string{"vector": "NET_RX"}}}}}
	}})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(a)
	step := func(n uint64, reads float64, netrx uint64, s time.Time) {
		fakeRoot(t, root, n)
		snap = snapshot(s, reads, 0, map[string]uint64{"NET_RX": netrx})
		a.Tick()
	}
	step(1, 100, 7, start) // baseline: block_reads 101, NET_RX 7
	if n := testutil.CollectAndCount(a, "kernel_exporter_audit_ratio"); n != 0 {
		t.Errorf("ratios after the first interval: %d, want none", n)
	}
	step(3, 100+303-101, 7+14-1, start) // kernel +202 reads, +14 NET_RX; ours +202, +13
	want := `
# HELP kernel_exporter_audit_ratio Our events over the kernel's in the last audit interval (--audit.interval), by config and kernel counter (source); absent while the kernel counted none
# TYPE kernel_exporter_audit_ratio gauge
kernel_exporter_audit_ratio{config="c",source="block_reads"} 1
kernel_exporter_audit_ratio{config="c",source="softirqs_net_rx"} 0.9285714285714286
`
	if err := testutil.CollectAndCompare(a, strings.NewReader(want), "kernel_exporter_audit_ratio"); err != nil {
		t.Error(err)
	}
	st := a.States()["c"]
	if len(st) != 2 || !st[0].InBand || st[1].InBand || st[0].Kernel != 202 || st[1].Ours != 13 {
		t.Errorf("states = %+v", st)
	}
	// Nothing moves: no ratio. Then a reload: rebased, no ratio.
	step(3, 302, 20, start)
	step(4, 5, 3, start.Add(time.Minute))
	if n := testutil.CollectAndCount(a, "kernel_exporter_audit_ratio"); n != 0 {
		t.Errorf("ratios after an idle interval and a reload: %d, want none", n)
	}
	step(5, 5+101, 3+7, start.Add(time.Minute))
	want = `
# HELP kernel_exporter_audit_events_total Events counted over the audit's compared intervals, by config and kernel counter (source): side="ours" by the config's metric, side="kernel" by the kernel's own counter
# TYPE kernel_exporter_audit_events_total counter
kernel_exporter_audit_events_total{config="c",side="kernel",source="block_reads"} 303
kernel_exporter_audit_events_total{config="c",side="kernel",source="softirqs_net_rx"} 21
kernel_exporter_audit_events_total{config="c",side="ours",source="block_reads"} 303
kernel_exporter_audit_events_total{config="c",side="ours",source="softirqs_net_rx"} 20
`
	if err := testutil.CollectAndCompare(a, strings.NewReader(want), "kernel_exporter_audit_events_total"); err != nil {
		t.Error(err)
	}
	// A kernel file that cannot be parsed: an error, counted, and the
	// interval after it only sets a new baseline.
	if err := os.WriteFile(filepath.Join(root, "proc/softirqs"), []byte("CPU0\nNET_RX: SECRET\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a.Tick()
	if st := a.States()["c"]; st[1].Err != "/proc/softirqs: row 1: not a decimal number (6 bytes)" || st[1].Unavailable != "" {
		t.Errorf("state with a malformed /proc/softirqs: %+v", st[1])
	}
	if err := testutil.CollectAndCompare(a, strings.NewReader(`
# HELP kernel_exporter_audit_errors_total Audit intervals not compared because the metric or the kernel counter could not be read, by config and kernel counter (source); a counter this kernel does not keep (no /proc/schedstat) counts none
# TYPE kernel_exporter_audit_errors_total counter
kernel_exporter_audit_errors_total{config="c",source="block_reads"} 0
kernel_exporter_audit_errors_total{config="c",source="softirqs_net_rx"} 1
`), "kernel_exporter_audit_errors_total"); err != nil {
		t.Error(err)
	}
	if _, err := reg.Gather(); err != nil {
		t.Error(err)
	}
}

// TestAuditorUnavailable checks a pair whose kernel counter this kernel
// does not keep (no /proc/schedstat, as on a kernel without
// CONFIG_SCHEDSTATS): not available with the reason, logged once at info
// level, no ratio, no error counted over many intervals; then a
// /proc/schedstat that appears malformed is a read error, counted.
func TestAuditorUnavailable(t *testing.T) {
	root := t.TempDir()
	fakeRoot(t, root, 1)
	if err := os.Remove(filepath.Join(root, "proc/schedstat")); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	h := slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug, ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}})
	reads := 0.0
	a := New(Options{Root: root, Logger: slog.New(h), Targets: func() []Target {
		return []Target{{Config: "runqlat", Read: func() *collector.Snapshot { return snapshot(time.Unix(1, 0), reads, 0, nil) },
			MetricName: func(s string) string { return "kernel_" + s },
			Entries:    []config.Audit{{Metric: "ops_total", Source: "schedstat_switch_ins"}}}}
	}})
	for range 5 {
		reads += 100
		a.Tick()
	}
	st := a.States()["runqlat"]
	if len(st) != 1 || st[0].Unavailable != "/proc/schedstat is absent (CONFIG_SCHEDSTATS off)" || st[0].Err != "" || st[0].HasRatio {
		t.Errorf("states = %+v", st)
	}
	if got := logs.String(); got != "level=INFO msg=\"audit: kernel counter not available on this kernel, not compared\" config=runqlat kernel_counter=schedstat_switch_ins reason=\"/proc/schedstat is absent (CONFIG_SCHEDSTATS off)\"\n" {
		t.Errorf("logs after 5 intervals:\n%s", got)
	}
	errs := func() float64 {
		return testutil.ToFloat64(prometheus.CollectorFunc(func(ch chan<- prometheus.Metric) {
			m := make(chan prometheus.Metric, 8)
			a.Collect(m)
			close(m)
			for x := range m {
				if strings.Contains(x.Desc().String(), "kernel_exporter_audit_errors_total") {
					ch <- x
				}
			}
		}))
	}
	if n := errs(); n != 0 {
		t.Errorf("errors after 5 intervals without /proc/schedstat: %v, want 0", n)
	}
	if n := testutil.CollectAndCount(a, "kernel_exporter_audit_ratio"); n != 0 {
		t.Errorf("ratios: %d, want none", n)
	}
	// A real read error still counts, every interval.
	if err := os.WriteFile(filepath.Join(root, "proc/schedstat"), []byte("version 17\ncpu0 1 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a.Tick()
	a.Tick()
	if st := a.States()["runqlat"]; st[0].Unavailable != "" || st[0].Err != "/proc/schedstat: cpu line with 3 fields, want 10 or more" {
		t.Errorf("state with a malformed /proc/schedstat: %+v", st[0])
	}
	if n := errs(); n != 2 {
		t.Errorf("errors after 2 intervals with a malformed /proc/schedstat: %v, want 2", n)
	}
}

func TestCheckInterval(t *testing.T) {
	if err := CheckInterval(30 * time.Second); err != nil {
		t.Error(err)
	}
	if err := CheckInterval(0); err == nil || err.Error() != "--audit.interval 0s: must be 100ms to 1h0m0s" {
		t.Errorf("0s: %v", err)
	}
}

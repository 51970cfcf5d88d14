// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// auditRQConfig is runqlat's bundled object under another namespace,
// audited against /proc/stat's ctxt, as a user config may do: this kernel
// has no /proc/schedstat (CONFIG_SCHEDSTATS off), which the bundled
// runqlat is audited against, and ctxt, which also counts the switches to
// the idle task, equals our count only while no CPU idles, as under the
// CPU load below.
const auditRQConfig = `namespace: audit_it
metrics:
  histograms:
    - name: run_queue_latency_seconds
      help: Run-queue latency, audited against ctxt
      bucket_type: exp2
      bucket_min: 0
      bucket_max: 36
      bucket_multiplier: 0.000000001
audit:
  - metric: run_queue_latency_seconds
    source: context_switches
`

// auditInterval is the --audit.interval of the tests.
const auditInterval = 2 * time.Second

// auditSeen is one interval of a pair (config/source) as the test saw it
// through kernel_exporter_audit_events_total: the events each side added.
type auditSeen struct {
	pair         string
	ours, kernel float64
}

func (s auditSeen) ratio() float64 { return s.ours / s.kernel }

// auditTotals reads kernel_exporter_audit_events_total by pair.
func auditTotals(ms Metrics) map[string][2]float64 {
	out := map[string][2]float64{}
	mf := ms["kernel_exporter_audit_events_total"]
	if mf == nil {
		return out
	}
	for _, m := range mf.GetMetric() {
		var config, source, side string
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "config":
				config = l.GetValue()
			case "source":
				source = l.GetValue()
			case "side":
				side = l.GetValue()
			}
		}
		v := out[config+"/"+source]
		if side == "ours" {
			v[0] = m.GetCounter().GetValue()
		} else {
			v[1] = m.GetCounter().GetValue()
		}
		out[config+"/"+source] = v
	}
	return out
}

// auditWatch scrapes e every 250 ms while load runs and returns the
// intervals that ended during it: each change of a pair's kernel total is
// one interval (or more, when a scrape came late), the first change of
// each pair left out, since its interval began before the load.
func auditWatch(t *testing.T, e *Exporter, load func() error) []auditSeen {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- load() }()
	last := auditTotals(e.Scrape())
	changed := map[string]int{}
	var out []auditSeen
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			return out
		case <-time.After(250 * time.Millisecond):
		}
		now := auditTotals(e.Scrape())
		for p, v := range now {
			prev, ok := last[p]
			if !ok || v[1] == prev[1] && v[0] == prev[0] {
				continue
			}
			if changed[p]++; changed[p] > 1 {
				out = append(out, auditSeen{pair: p, ours: v[0] - prev[0], kernel: v[1] - prev[1]})
			}
		}
		last = now
	}
}

// TestAuditUnderLoad runs biolatency, softirq and runqlat (audited against
// ctxt through a user config) with --audit.interval=2s under three loads
// of 14 s each, the differential tests' kinds: O_DIRECT writes and reads
// with fsync; more runnable threads than CPUs; a loopback UDP storm. Each
// load has its own pairs: block_reads and block_flushes under the block
// load, context_switches under the CPU load, softirqs_net_rx under the
// storm. Every interval of a load's own pair that ended during the load
// with at least 100 kernel events must have a ratio within the alert's
// band, [0.98, 1.02], and those intervals together one within 1% of 1;
// there must be at least three such intervals. The other pairs are logged
// only: on this VM, shared with other test runs, they came out short now
// and then (never over): biolatency and softirq's BLOCK vector 0.987-0.996
// in some runs under the block load (with no stale_start drop), and
// TIMER, RCU and SCHED softirqs 0.3-1.7% short, once 4% (RCU, 4748 of 4949
// under the CPU load), with no recursion miss on the programs (bpftool):
// causes not found yet. context_switches also counts the switches to the idle
// task: it agrees only under the CPU load, where no CPU idles (0.9598
// under the block load, whose CPUs wait for the disk).
func TestAuditUnderLoad(t *testing.T) {
	dir := t.TempDir()
	obj, err := os.ReadFile(filepath.Join(repoRoot, "programs", "runqlat.bpf.o"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"rq_ctxt.bpf.o": obj, "rq_ctxt.yaml": []byte(auditRQConfig)} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ioDir := ioTempDir(t)
	e := Start(t, "--programs=biolatency,softirq", "--config.dir="+dir, "--config.names=rq_ctxt",
		"--audit.interval="+auditInterval.String())
	waitUp(t, e, "biolatency", "softirq", "rq_ctxt")
	const load = 14 * time.Second

	loads := []struct {
		name  string
		pairs []string // the pairs this load must exercise
		run   func() error
	}{
		{"O_DIRECT writes and reads with fsync", []string{"biolatency/block_reads", "biolatency/block_flushes"}, func() error {
			return auditBlockLoad(ioDir, load, 2, 1)
		}},
		{fmt.Sprintf("%d spinning processes on %d CPUs", 2*runtime.NumCPU()+1, runtime.NumCPU()), []string{"rq_ctxt/context_switches"}, func() error {
			return auditCPULoad(2*runtime.NumCPU()+1, load)
		}},
		{"loopback UDP storm", []string{"softirq/softirqs_net_rx"}, func() error {
			udpStorm(t, load)
			return nil
		}},
	}
	for _, l := range loads {
		seen := auditWatch(t, e, l.run)
		byPair := map[string][]string{}
		full := map[string]int{}
		sums := map[string][2]float64{}
		for _, s := range seen {
			if s.kernel == 0 {
				continue
			}
			byPair[s.pair] = append(byPair[s.pair], fmt.Sprintf("%.4f (%.0f/%.0f)", s.ratio(), s.ours, s.kernel))
			if !slices.Contains(l.pairs, s.pair) || s.kernel < 100 {
				continue
			}
			full[s.pair]++
			sum := sums[s.pair]
			sums[s.pair] = [2]float64{sum[0] + s.ours, sum[1] + s.kernel}
			if r := s.ratio(); r < 0.98 || r > 1.02 {
				t.Errorf("%s: %s: ratio %.4f (ours %.0f, kernel %.1f): outside the alert's band [0.98, 1.02]", l.name, s.pair, r, s.ours, s.kernel)
			}
		}
		pairs := slices.Sorted(func(yield func(string) bool) {
			for p := range byPair {
				if !yield(p) {
					return
				}
			}
		})
		for _, p := range pairs {
			line := strings.Join(byPair[p], ", ")
			if sum, ok := sums[p]; ok {
				r := sum[0] / sum[1]
				line += fmt.Sprintf("; checked intervals together %.4f (%.0f/%.0f)", r, sum[0], sum[1])
				if r < 0.99 || r > 1.01 {
					t.Errorf("%s: %s: ratio %.4f over the load's intervals (ours %.0f, kernel %.1f): not within 1%% of 1", l.name, p, r, sum[0], sum[1])
				}
			}
			t.Logf("%s: %s: %s", l.name, p, line)
		}
		ms := e.Scrape()
		t.Logf("%s: biolatency's samples dropped so far (kernel_exporter_bpf_dropped_total): stale_start %.0f",
			l.name, ms.Value("kernel_exporter_bpf_dropped_total", L("config", "biolatency", "reason", "stale_start")))
		for _, p := range l.pairs {
			if full[p] < 3 {
				t.Errorf("%s: %s: %d intervals with 100 kernel events or more, want 3 or more", l.name, p, full[p])
			}
		}
	}
}

// TestAuditDetached has the CPU budget detach softirq behind the audit's
// back (a budget no program can keep, measured every 2 s, with
// kernel.bpf_stats_enabled on for the exporter's run): the audit
// keeps reading its maps, which stop moving while the kernel's softirqs
// go on, and the TIMER ratio must fall to 0 within two intervals of the
// detach.
func TestAuditDetached(t *testing.T) {
	e := Start(t, "--programs=softirq", "--audit.interval="+auditInterval.String(),
		"--bpf.cpu-budget=0.000000001", "--bpf.budget-period=2s", "--bpf.budget-window=500ms", "--bpf.budget-backoff=1h",
		"--bpf.stats") // the budget measures with the sysctl on, with or without the privileged helper
	const pair = "softirq/softirqs_timer"
	deadline := time.Now().Add(60 * time.Second)
	var detached time.Time
	for time.Now().Before(deadline) {
		ms := e.Scrape()
		if ms.Value("kernel_exporter_budget_exceeded_total", L("config", "softirq")) > 0 {
			detached = time.Now()
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if detached.IsZero() {
		t.Fatalf("softirq was not detached by the CPU budget within 60 s\n%s", e.Logs())
	}
	// The first interval after the detach may have begun before it; the
	// second is wholly after.
	var ratios []string
	var last float64 = -1
	for time.Since(detached) < 2*auditInterval+time.Second {
		time.Sleep(250 * time.Millisecond)
	}
	ms := e.Scrape()
	if ms.Series("kernel_exporter_audit_ratio", L("config", "softirq", "source", "softirqs_timer")) == 1 {
		last = ms.Value("kernel_exporter_audit_ratio", L("config", "softirq", "source", "softirqs_timer"))
	}
	tot := auditTotals(ms)[pair]
	ratios = append(ratios, fmt.Sprintf("%.4f", last))
	t.Logf("softirqs_timer ratio two intervals after the detach: %s (totals ours %.0f, kernel %.0f)", strings.Join(ratios, ", "), tot[0], tot[1])
	if last != 0 {
		t.Errorf("softirqs_timer ratio %v two intervals after the detach, want 0 (our count stopped)", last)
	}
	for _, src := range []string{"softirqs_rcu", "softirqs_sched"} {
		if ms.Series("kernel_exporter_audit_ratio", L("config", "softirq", "source", src)) == 1 {
			t.Logf("%s ratio after the detach: %v", src, ms.Value("kernel_exporter_audit_ratio", L("config", "softirq", "source", src)))
		}
	}
	if !strings.Contains(e.Get("/"), `softirqs_timer <span class="mark">0.000</span>`) {
		t.Errorf("the landing page does not mark softirqs_timer's ratio 0.000:\n%s", landingRow(e.Get("/"), "softirq"))
	}
}

// auditBlockLoad writes 8 MiB files with O_DIRECT in 256 KiB writes and
// fsyncs them (writers at once) while readers read another with
// O_DIRECT in 128 KiB reads, for d, in dir.
func auditBlockLoad(dir string, d time.Duration, writers, readers int) error {
	readPath := filepath.Join(dir, "read")
	if err := writeDirect(readPath, 8<<20, 1<<20); err != nil {
		return err
	}
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	errs := make(chan error, writers+readers)
	for w := range writers {
		wg.Go(func() {
			p := filepath.Join(dir, fmt.Sprintf("w%d", w))
			for time.Now().Before(deadline) {
				if err := writeDirect(p, 8<<20, 256<<10); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for range readers {
		wg.Go(func() {
			if err := readDirectUntil(readPath, 128<<10, deadline, func() {}); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// TestAuditInflightFull builds biolatency with one in-flight slot
// (-DINFLIGHT_SLOTS=1) and an overflow map of 2 entries instead of 10,240,
// so that the requests in flight beyond 3 lose their start time and are
// not timed, and runs it with its bundled config under 6 O_DIRECT writers
// and 2 readers: every interval with 100 or more reads must read a
// block_reads ratio below the alert's 0.98, from the second interval of
// the load on.
func TestAuditInflightFull(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(repoRoot, "programs", "biolatency.bpf.c"))
	if err != nil {
		t.Fatal(err)
	}
	const overflow = "__uint(max_entries, 10240);"
	if strings.Count(string(src), overflow) != 1 {
		t.Fatalf("programs/biolatency.bpf.c: want one %q (the overflow map's size)", overflow)
	}
	cfg := t.TempDir()
	csrc := filepath.Join(cfg, "biolatency.bpf.c")
	if err := os.WriteFile(csrc, []byte(strings.Replace(string(src), overflow, "__uint(max_entries, 2);", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	clang := probeNeedTool(t, "BPF compiler", "clang-19")
	args := append(append([]string{}, bpfCFlags...), "-I"+filepath.Join(repoRoot, "include"), "-DINFLIGHT_SLOTS=1", "-c", csrc, "-o", filepath.Join(cfg, "biolatency.bpf.o"))
	if out, err := exec.Command(clang, args...).CombinedOutput(); err != nil {
		t.Fatalf("compile %s: %v\n%s", csrc, err, out)
	}
	y, err := os.ReadFile(filepath.Join(repoRoot, "programs", "biolatency.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfg, "biolatency.yaml"), y, 0o644); err != nil {
		t.Fatal(err)
	}
	dir := ioTempDir(t)
	e := Start(t, "--config.dir="+cfg, "--config.names=biolatency", "--audit.interval="+auditInterval.String())
	waitUp(t, e, "biolatency")
	seen := auditWatch(t, e, func() error { return auditBlockLoad(dir, 14*time.Second, 6, 2) })
	var ratios []string
	n := 0
	for _, s := range seen {
		if s.pair != "biolatency/block_reads" || s.kernel < 100 {
			continue
		}
		n++
		ratios = append(ratios, fmt.Sprintf("%.4f (%.0f/%.0f)", s.ratio(), s.ours, s.kernel))
		if s.ratio() >= 0.98 {
			t.Errorf("block_reads ratio %.4f (ours %.0f, kernel %.1f) with a full in-flight map: want below 0.98", s.ratio(), s.ours, s.kernel)
		}
	}
	t.Logf("block_reads with a full in-flight map: %s", strings.Join(ratios, ", "))
	if n < 2 {
		t.Errorf("%d intervals with 100 reads or more, want 2 or more", n)
	}
}

// auditCPULoad runs n shell loops that never sleep for d.
func auditCPULoad(n int, d time.Duration) error {
	var cmds []*exec.Cmd
	for range n {
		c := exec.Command("sh", "-c", "while :; do :; done")
		if err := c.Start(); err != nil {
			return err
		}
		cmds = append(cmds, c)
	}
	time.Sleep(d)
	for _, c := range cmds {
		c.Process.Kill()
		c.Wait()
	}
	return nil
}

// waitUp waits up to 60 s until every config is up.
func waitUp(t *testing.T, e *Exporter, configs ...string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ms := e.Scrape()
		up := 0
		for _, c := range configs {
			if ms.Value("kernel_exporter_config_up", L("config", c)) == 1 {
				up++
			}
		}
		if up == len(configs) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %v up after 60 s\n%s", up, configs, e.Logs())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

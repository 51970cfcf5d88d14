// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"fmt"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The host BPF collector (package bpfstats, --collector.bpf, on by
// default): every BPF program and map of the host, whoever loaded it.
// A separate process (testdata/bpfspin) loads a tracepoint program on
// sys_enter_ioprio_get that spins spinNs at every ioprio_get(2) of this
// test process; the test drives a known number of them and compares what
// the exporter serves with the syscalls driven and with bpftool.

const (
	spinNs  = 20000 // 20 µs per run
	spinRun = "kernel_bpf_program_runs_total"
	spinSec = "kernel_bpf_program_run_seconds_total"
)

// waitListed waits until e serves program id's info and returns its
// labels.
func waitListed(t *testing.T, e *Exporter, id uint32) map[string]string {
	t.Helper()
	want := L("id", strconv.FormatUint(uint64(id), 10))
	var labels map[string]string
	Eventually(t, 20*time.Second, func() bool {
		ms := e.Scrape()
		if mf, ok := ms["kernel_bpf_program_info"]; ok {
			for _, m := range mf.GetMetric() {
				if matches(m, want) {
					labels = map[string]string{}
					for _, lp := range m.GetLabel() {
						labels[lp.GetName()] = lp.GetValue()
					}
					return true
				}
			}
		}
		return false
	}, "program %d never listed\n%s", id, e.Logs())
	return labels
}

// checkSpinInfo checks the foreign program's info labels: its name, type,
// owner (bpfspin's command name and pid), attach point, and no config.
func checkSpinInfo(t *testing.T, info map[string]string, s *bpfSpin) {
	t.Helper()
	want := map[string]string{"name": "bpfstats_spin", "type": "tracepoint", "owner": "bpfspin",
		"pid": strconv.Itoa(s.pid), "attach_type": "perf_event", "links": "1", "config": ""}
	for k, v := range want {
		if info[k] != v {
			t.Errorf("kernel_bpf_program_info %s=%q, want %q (labels %v)", k, info[k], v, info)
		}
	}
	if !strings.Contains(info["attach_target"], "ioprio_get") {
		t.Errorf("attach_target %q, want the sys_enter_ioprio_get tracepoint", info["attach_target"])
	}
}

// TestBPFStatsForeignProgram checks the run count and run time the
// exporter serves for a program another process loaded:
//
//   - continuous: with --bpf.stats, statistics are always on and every
//     window's end is the next one's start, so the runs served move by
//     exactly the ioprio_get calls made (ours, plus any other process'
//     that the program counted), and the run time by what bpftool prog
//     show reports over the same span (within 20%);
//   - sampled: run as nobody with the systemd unit's capabilities, the
//     default way: statistics on only for 400 ms windows every 1 s, counts
//     scaled by the window's share of the time. 4000 calls paced over 10 s
//     must be served as 4000 within one period's worth of calls (the
//     window's scaling) plus 5%; the run time per run within 20% of
//     bpftool's over the same span; the serving process holds CAP_BPF
//     alone (the listing goes through the privileged helper); the map of
//     known size shows bpftool's memlock exactly and the 100 entries put
//     in it; and the landing page lists the program among the top five by
//     CPU.
func TestBPFStatsForeignProgram(t *testing.T) {
	probeNeedTool(t, "the kernel's own view of a BPF program", "bpftool")
	t.Run("continuous", func(t *testing.T) {
		e := Start(t, "--programs=timers", "--bpf.stats", "--bpf.budget-period=1s", "--bpf.budget-window=500ms")
		s := startBPFSpin(t, spinNs)
		checkSpinInfo(t, waitListed(t, e, s.prog), s)
		id := L("id", strconv.FormatUint(uint64(s.prog), 10))

		calls0, spun0 := s.counts(t)
		before := e.Scrape()
		bt0, bn0 := bpftoolProg(t, s.prog)
		const n = 1000
		ioprioGets(n, 0)
		bt1, bn1 := bpftoolProg(t, s.prog)
		calls1, spun1 := s.counts(t)
		if spun1-spun0 != n {
			t.Fatalf("the program spun %d times for %d calls", spun1-spun0, n)
		}
		// What other processes' ioprio_get ran of the program, meanwhile.
		others := (calls1 - calls0) - (spun1 - spun0)
		var after Metrics
		var runs float64
		Eventually(t, 10*time.Second, func() bool {
			after = e.Scrape()
			runs = after.Value(spinRun, id) - before.Value(spinRun, id)
			return runs >= float64(bn1-bn0)
		}, "runs served moved by %v, bpftool by %d\n%s", runs, bn1-bn0, e.Logs())
		calls2, spun2 := s.counts(t)
		others2 := (calls2 - calls0) - (spun2 - spun0)
		if runs < float64(n+others) || runs > float64(n+others2) {
			t.Errorf("runs served moved by %v for %d calls (and %d to %d of other processes)", runs, n, others, others2)
		}
		secs := after.Value(spinSec, id) - before.Value(spinSec, id)
		bsecs := float64(bt1-bt0) / 1e9
		if math.Abs(secs-bsecs) > 0.2*bsecs || secs < n*spinNs/1e9 {
			t.Errorf("run time served moved by %.6f s, bpftool's by %.6f s (want within 20%%, and at least %d x %d ns)", secs, bsecs, n, spinNs)
		}
		t.Logf("continuous: %d calls: runs +%v (bpftool +%d), run time +%.6f s (bpftool +%.6f s, %.0f ns/run)", n, runs, bn1-bn0, secs, bsecs, bsecs*1e9/float64(bn1-bn0))
	})

	t.Run("sampled", func(t *testing.T) {
		wrapper, unitSet := unitCapsWrapper(t)
		e := startWrapped(t, wrapper, "--programs=timers", "--bpf.budget-period=1s", "--bpf.budget-window=400ms")
		waitDropped(t, e)
		s := startBPFSpin(t, spinNs)
		checkSpinInfo(t, waitListed(t, e, s.prog), s)
		if got, want := procCaps(t, fmt.Sprintf("/proc/%d/status", exporterPid(t, e)))["CapEff"], unitSet&(1<<capBPF); got != want {
			t.Errorf("serving process CapEff %016x, want %016x (CAP_BPF alone): the listing must go through the helper", got, want)
		}
		id := L("id", strconv.FormatUint(uint64(s.prog), 10))

		// The map: bpftool's memlock (the kernel's own figure), exactly.
		var bm struct {
			BytesMemlock uint64 `json:"bytes_memlock"`
			MaxEntries   uint32 `json:"max_entries"`
		}
		bpftoolJSON(t, &bm, "map", "show", "id", strconv.FormatUint(uint64(s.mp), 10))
		mid := L("id", strconv.FormatUint(uint64(s.mp), 10))
		ms := e.Scrape()
		if got := ms.Value("kernel_bpf_map_memory_bytes", mid); got != float64(bm.BytesMemlock) || got == 0 {
			t.Errorf("kernel_bpf_map_memory_bytes{id=%d} = %v, bpftool map show says %d", s.mp, got, bm.BytesMemlock)
		}
		if got := ms.Value("kernel_bpf_map_max_entries", L("id", mid["id"], "name", "ke_spin_big", "type", "hash", "owner", "bpfspin")); got != 4096 || bm.MaxEntries != 4096 {
			t.Errorf("kernel_bpf_map_max_entries = %v (bpftool %d), want 4096 with name, type and owner", got, bm.MaxEntries)
		}
		if got := ms.Value("kernel_bpf_map_entries", mid); got != 100 || ms.Series("kernel_bpf_map_entries", mid) != 1 {
			t.Errorf("kernel_bpf_map_entries{id=%d} = %v, want the 100 entries bpfspin put in it (the kernel's count, 6.6+)", s.mp, got)
		}
		if ms.Series("kernel_bpf_map_info", L("id", mid["id"], "programs", id["id"])) != 1 {
			t.Errorf("kernel_bpf_map_info of map %d does not list program %d as its user", s.mp, s.prog)
		}

		// Counters move at the end of windows: start from one.
		time.Sleep(1500 * time.Millisecond)
		calls0, spun0 := s.counts(t)
		before := e.Scrape()
		bt0, bn0 := bpftoolProg(t, s.prog)
		const n, over = 4000, 10 * time.Second
		done := make(chan struct{})
		go func() { ioprioGets(n, over/n); close(done) }()
		// While the calls run, the landing page's top five has the program.
		time.Sleep(3 * time.Second)
		Eventually(t, 5*time.Second, func() bool {
			page := e.Get("/")
			return strings.Contains(page, fmt.Sprintf("<td>%d bpfstats_spin</td><td>tracepoint</td><td>bpfspin</td>", s.prog))
		}, "landing page does not list program %d among the top five by CPU", s.prog)
		<-done
		// The window in progress at the last call ends within a period.
		time.Sleep(2500 * time.Millisecond)
		after := e.Scrape()
		bt1, bn1 := bpftoolProg(t, s.prog)
		calls1, spun1 := s.counts(t)
		others := (calls1 - calls0) - (spun1 - spun0)
		runs := after.Value(spinRun, id) - before.Value(spinRun, id)
		want := float64(n + others)
		// One period's worth of calls: a window at the start or end of
		// the calls that covered more or less than its share.
		tol := want*float64(time.Second)/float64(over) + 0.05*want
		if math.Abs(runs-want) > tol {
			t.Errorf("runs served moved by %.0f for %d calls (%d of other processes): want within %.0f (one period of calls, and 5%%)", runs, n, others, tol)
		}
		secs := after.Value(spinSec, id) - before.Value(spinSec, id)
		if bn1 == bn0 || runs == 0 {
			t.Fatalf("no run counted: bpftool %d runs, exporter %v", bn1-bn0, runs)
		}
		nsServed, nsBpftool := secs*1e9/runs, float64(bt1-bt0)/float64(bn1-bn0)
		if math.Abs(nsServed-nsBpftool) > 0.2*nsBpftool || nsServed < spinNs {
			t.Errorf("run time per run served %.0f ns, bpftool %.0f ns over the same span: want within 20%%, and at least %d", nsServed, nsBpftool, spinNs)
		}
		// The gauge says how the interval since the previous listing was
		// measured: exact when statistics were on throughout it (inside
		// one of our windows), else sampled, at 400 ms of each 1 s. A
		// scrape outside the windows must come within a few periods.
		const ratioName = "kernel_bpf_stats_sampled_ratio"
		ratio := -1.0
		for deadline := time.Now().Add(3 * time.Second); ratio < 0 && time.Now().Before(deadline); time.Sleep(130 * time.Millisecond) {
			if ms := e.Scrape(); ms.Series(ratioName, L("mode", "sampled")) == 1 {
				ratio = ms.Value(ratioName, L("mode", "sampled"))
			}
		}
		if ratio < 0.3 || ratio > 0.45 {
			t.Errorf("%s{mode=\"sampled\"} %v over 3 s of scrapes (-1: never sampled), want about 0.4 (400 ms of 1 s)", ratioName, ratio)
		}
		t.Logf("sampled: %d calls (%d others): runs +%.0f (tolerance %.0f), %.0f ns/run (bpftool %.0f ns/run over %d runs counted while statistics were on), run time +%.4f s, sampled ratio %.3f",
			n, others, runs, tol, nsServed, nsBpftool, bn1-bn0, secs, ratio)
	})
}

// TestBPFStatsChurn loads and unloads 1000 programs (each with a map) in
// another process, in batches of 100 kept 1.1 s (a scrape lists the host
// again at most once a second), twice, while scraping every 250 ms: the
// programs are served while they live (most batches are seen), none of
// their series is left once
// their TTL (2 s) has passed, and the exporter's resident memory after
// the second thousand is what it was after the first (within 4 MiB).
func TestBPFStatsChurn(t *testing.T) {
	e := Start(t, "--programs=timers", "--collector.bpf.ttl=2s")
	pid := exporterPid(t, e)
	bin := bpfspin(t)
	churn := func() (seen int) {
		ids := map[string]bool{}
		cmd := bpfspinCmd(t, bin, "churn", "1000", "100", "1100ms")
		done := make(chan error, 1)
		go func() { done <- cmd.Run() }()
		for {
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("bpfspin churn: %v", err)
				}
				return len(ids)
			case <-time.After(250 * time.Millisecond):
				ms := e.Scrape()
				if mf, ok := ms["kernel_bpf_program_info"]; ok {
					for _, m := range mf.GetMetric() {
						if matches(m, L("name", "bpfstats_churn")) {
							for _, lp := range m.GetLabel() {
								if lp.GetName() == "id" {
									ids[lp.GetValue()] = true
								}
							}
						}
					}
				}
			}
		}
	}
	gone := func(round int) {
		Eventually(t, 10*time.Second, func() bool {
			ms := e.Scrape()
			return ms.Series("kernel_bpf_program_info", L("name", "bpfstats_churn")) == 0 &&
				ms.Series(spinRun, L("name", "bpfstats_churn")) == 0 &&
				ms.Series("kernel_bpf_map_info", L("name", "bpfstats_churn")) == 0
		}, "round %d: series of unloaded programs or maps still served 10 s after the churn ended (TTL 2s)", round)
	}
	seen1 := churn()
	gone(1)
	rss1 := vmRSS(t, pid)
	seen2 := churn()
	gone(2)
	rss2 := vmRSS(t, pid)
	// A scrape lists at most once a second and takes a while on a loaded
	// machine: a batch can be missed, but most must be served.
	if seen1 < 300 || seen2 < 300 {
		t.Errorf("programs served during the churns: %d and %d, want at least 300 of the 1000 each (each kept 1.1 s, scraped every 250 ms)", seen1, seen2)
	}
	if rss2 > rss1+4<<20 {
		t.Errorf("resident memory %d MiB after the first 1000 programs, %d MiB after the second: want flat (within 4 MiB)", rss1>>20, rss2>>20)
	}
	t.Logf("programs served: %d and %d of 1000; RSS %.1f MiB, then %.1f MiB", seen1, seen2, float64(rss1)/(1<<20), float64(rss2)/(1<<20))
}

// TestTermTopBPF runs kernel_exporter top bpf in a tmux pane while the
// foreign program spins 20 µs at each of 500 ioprio_get calls a second:
// a frame shows it with its name, type and owner, about 500 events/s,
// 20 µs or more per event and the CPU % those give; C-c exits 0 and
// leaves kernel.bpf_stats_enabled as it was.
func TestTermTopBPF(t *testing.T) {
	statsBefore, _ := os.ReadFile("/proc/sys/kernel/bpf_stats_enabled")
	s := startBPFSpin(t, spinNs)
	p := startTmux(t, "top", "bpf")
	header := regexp.MustCompile(`^kernel_exporter top bpf  \d\d:\d\d:\d\d  interval \S+  \d+ programs?  BPF: [\d.]+% of one CPU`)
	p.waitFor(60*time.Second, false, "first frame", func(sc string) bool { return header.MatchString(strings.SplitN(sc, "\n", 2)[0]) })
	row := regexp.MustCompile(fmt.Sprintf(`(?m)^ *%d  bpfstats_spin +tracepoint +bpfspin +(\d+) +(\d+) +([\d.]+)$`, s.prog))
	const rate, over = 500, 6 * time.Second
	done := make(chan time.Duration)
	go func() {
		t0 := time.Now()
		ioprioGets(rate*int(over/time.Second), time.Second/rate)
		done <- time.Since(t0)
	}()
	var frame string
	var seen [][3]float64
	var took time.Duration
	for driving := true; driving; {
		select {
		case took = <-done:
			driving = false
		case <-time.After(700 * time.Millisecond):
			sc := p.screen(false)
			if m := row.FindStringSubmatch(sc); m != nil {
				var v [3]float64
				for i := range v {
					v[i], _ = strconv.ParseFloat(m[i+1], 64)
				}
				if v[0] > 0 {
					seen, frame = append(seen, v), sc
				}
			}
		}
	}
	actual := float64(rate) * over.Seconds() / took.Seconds()
	good := false
	for _, v := range seen {
		events, ns, cpu := v[0], v[1], v[2]
		good = good || events >= actual*2/3 && events <= actual*4/3 && ns >= spinNs && ns <= 3*spinNs &&
			math.Abs(cpu-events*ns/1e7) <= 0.2*cpu+0.02
	}
	t.Logf("%d calls at %.0f/s; frames showed [events/s ns/event CPU%%] %v", rate*int(over/time.Second), actual, seen)
	if !good {
		t.Errorf("no frame showed program %d at %.0f events/s ±33%%, %d to %d ns per event and the CPU %% those give:\n%s", s.prog, actual, spinNs, 3*spinNs, frame)
	}
	if code := p.interrupt(); code != 0 {
		t.Errorf("exit status %d after C-c, want 0", code)
	}
	if after, _ := os.ReadFile("/proc/sys/kernel/bpf_stats_enabled"); string(after) != string(statsBefore) {
		t.Errorf("kernel.bpf_stats_enabled %q after top bpf, %q before", after, statsBefore)
	}
	logFrame(t, "top bpf", frame)
}

// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestBPFStatsExact checks that the run counts and run times served are
// the kernel's own when kernel.bpf_stats_enabled=1 was set from outside
// (as bpftop users do), and that every figure of one program agrees, with
// statistics on all the time or sampled in windows:
//
//   - exact: the sysctl set to 1 before the exporter starts (and restored
//     after the test), the exporter with its default programs, a foreign
//     program (testdata/bpfspin) driven by ioprio_get calls, getppid
//     calls and O_DIRECT writes as load. bpftool prog show read just
//     before and just after one scrape: for every program with at least
//     1000 runs, ours and foreign ones alike, the runs and run time
//     served lie between the two readings (2% slack).
//     kernel_bpf_stats_sampled_ratio says mode="exact".
//   - another holder: the same with the sysctl at 0 and top bpf holding
//     BPF_ENABLE_STATS all along (as bpftop does), which the statistics
//     probe sees.
//   - exact and sampled, over the same interval: the increase of
//     kernel_exporter_program_run_seconds_total (and _runs_total) of each
//     of our programs is that of kernel_bpf_program_* for the same
//     program within 5%, and the landing page's CPU for bpfspin among the
//     host's top five is what the served counters' rate gives, within
//     5%: exact, the page's rate since the window before against the
//     counters between the two page changes (window ends) that bound it;
//     sampled, the mean of the page's last-window rates over the
//     interval's windows.
//   - exact: top bpf shows bpfspin at the events per second and CPU the
//     served counters' rates give, within 5%, over its second frame's
//     interval (scraped right after top's first and second listings).
//     top bpf holds statistics on while it runs, so the exporter's counts
//     are exact meanwhile (the probe sees it): there is no sampled figure
//     to compare it with. Sampled (statistics on 400 ms every 1 s), the
//     runs served from one window's end to one 8 s later are the
//     program's own count of its runs (bpfspin's calls) within 5%.
//     The exact subtest's windows are 500 ms every 2 s, for the landing
//     page; the counts served do not depend on them.
func TestBPFStatsExact(t *testing.T) {
	probeNeedTool(t, "the kernel's own view of a BPF program", "bpftool")
	t.Run("exact", func(t *testing.T) {
		setBPFStatsSysctl(t, "1")
		s := startBPFSpin(t, spinNs)
		// The default programs; windows of 500 ms every 2 s, for the
		// landing page (the counts served do not depend on them).
		e := Start(t, "--bpf.budget-period=2s", "--bpf.budget-window=500ms")
		waitListed(t, e, s.prog)
		waitOurRuns(t, e)
		stop := startExactLoad(t)
		time.Sleep(3 * time.Second)
		// top bpf's second frame is over the interval between its first
		// and second listings: scraped right after each.
		frames := topBPF(t, 4*time.Second)
		nextFrame(t, frames)
		ms0, t0 := e.Scrape(), time.Now()
		top := nextFrame(t, frames)
		b0 := bpftoolAll(t)
		ms1, t1 := e.Scrape(), time.Now()
		b1 := bpftoolAll(t)
		// The landing page's rate is over the span since the window
		// before: compared with the served counters over the span
		// between the two page changes (window ends) that bound it.
		msA, tA, _ := nextPageChange(t, e, s.prog)
		msB, tB, page := nextPageChange(t, e, s.prog)
		loadMade := stop()
		t.Logf("load: %s", loadMade)

		if v := ms1.Value("kernel_bpf_stats_sampled_ratio", L("mode", "exact")); v != 1 {
			t.Errorf("kernel_bpf_stats_sampled_ratio{mode=\"exact\"} = %v, want 1 with kernel.bpf_stats_enabled=1", v)
		}
		checkBracket(t, b0, ms1, b1, s.prog, "kernel.bpf_stats_enabled=1")
		compareFamilies(t, ms0, ms1)
		compareTop(t, top, ms0, ms1, t1.Sub(t0), s.prog, "exact")
		compareLanding(t, page, msA, msB, tB.Sub(tA), s.prog, "exact")
	})

	t.Run("another holder", func(t *testing.T) {
		// The sysctl at 0, and another process holding statistics on
		// for the whole test (top bpf holds BPF_ENABLE_STATS, as bpftop
		// does): the statistics probe sees them on.
		setBPFStatsSysctl(t, "0")
		holder := exec.Command(binary, "top", "bpf", "--interval=1s")
		if err := holder.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
		time.Sleep(time.Second)
		s := startBPFSpin(t, spinNs)
		e := Start(t)
		waitListed(t, e, s.prog)
		waitOurRuns(t, e)
		stop := startExactLoad(t)
		time.Sleep(3 * time.Second)
		e.Scrape()
		time.Sleep(1100 * time.Millisecond)
		b0 := bpftoolAll(t)
		ms := e.Scrape()
		b1 := bpftoolAll(t)
		t.Logf("load: %s", stop())
		if v := ms.Value("kernel_bpf_stats_sampled_ratio", L("mode", "exact")); v != 1 {
			t.Errorf("kernel_bpf_stats_sampled_ratio{mode=\"exact\"} = %v, want 1 while another process holds statistics on\n%s", v, e.Logs())
		}
		checkBracket(t, b0, ms, b1, s.prog, "another process holding BPF_ENABLE_STATS")
	})

	t.Run("sampled", func(t *testing.T) {
		setBPFStatsSysctl(t, "0")
		s := startBPFSpin(t, spinNs)
		e := Start(t, "--bpf.budget-period=1s", "--bpf.budget-window=400ms")
		waitListed(t, e, s.prog)
		stop := startExactLoad(t)
		id := L("id", strconv.FormatUint(uint64(s.prog), 10))
		// From a window's end to a later one's (the served count moves
		// only there), against the program's own count of its runs
		// (bpfspin's calls), read at each.
		// The landing page shows the last window's rate: read after each
		// of the 8 windows, their mean is over the same interval.
		time.Sleep(2 * time.Second)
		ms0, c0, t0 := nextMove(t, e, s, id)
		var ms1 Metrics
		var c1 uint64
		var t1 time.Time
		var pages []float64
		for range 8 {
			ms1, c1, t1 = nextMove(t, e, s, id)
			if v, ok := landingCPU(e.Get("/"), s.prog); ok {
				pages = append(pages, v)
			}
		}
		t.Logf("load: %s", stop())
		// Statistics are the host's: another process (another test's
		// exporter with --bpf.stats, a top bpf) may hold them on
		// meanwhile, and then the counts are exact, as they should be.
		if ms1.Series("kernel_bpf_stats_sampled_ratio", L("mode", "exact")) == 1 {
			t.Logf("another process held statistics on meanwhile (the counts are exact): the sampled ratio is not checked")
		} else if v := ms1.Value("kernel_bpf_stats_sampled_ratio", L("mode", "sampled")); v < 0.3 || v > 0.45 {
			t.Errorf("kernel_bpf_stats_sampled_ratio{mode=\"sampled\"} = %v, want about 0.4\n%s", v, e.Logs())
		}
		runs := ms1.Value(spinRun, id) - ms0.Value(spinRun, id)
		t.Logf("sampled: program %d over %v: served %.0f runs (%.0f/s), the program counted %d", s.prog, t1.Sub(t0).Round(time.Millisecond), runs, runs/t1.Sub(t0).Seconds(), c1-c0)
		if math.Abs(runs-float64(c1-c0)) > 0.05*float64(c1-c0) {
			t.Errorf("sampled: program %d: served %.0f runs, the program counted %d: not within 5%%", s.prog, runs, c1-c0)
		}
		compareFamilies(t, ms0, ms1)
		served := 1000 * (ms1.Value(spinSec, id) - ms0.Value(spinSec, id)) / t1.Sub(t0).Seconds()
		mean := 0.0
		for _, v := range pages {
			mean += v / float64(len(pages))
		}
		t.Logf("sampled: program %d: landing page after each window %v ms/s, mean %.2f; served counters %.2f ms/s", s.prog, pages, mean, served)
		if len(pages) < 6 || math.Abs(mean-served) > 0.05*served+0.05 {
			t.Errorf("sampled: program %d: the landing page's CPU after %d of 8 windows averages %.2f ms/s, the served counters give %.2f ms/s: not within 5%%", s.prog, len(pages), mean, served)
		}
	})
}

// nextPageChange fetches the landing page every 20 ms until program id's
// CPU there changes (a window ended), then scrapes, and returns the scrape,
// its time and the page.
func nextPageChange(t *testing.T, e *Exporter, id uint32) (Metrics, time.Time, string) {
	t.Helper()
	first, _ := landingCPU(e.Get("/"), id)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		page := e.Get("/")
		if v, ok := landingCPU(page, id); ok && v != first {
			return e.Scrape(), time.Now(), page
		}
	}
	t.Fatalf("the landing page's CPU for program %d did not change in 10 s", id)
	return nil, time.Time{}, ""
}

// nextMove scrapes every 50 ms until the runs served for want move (the
// end of a measuring window), and returns that scrape, the program's own
// count of its runs just after, and when.
func nextMove(t *testing.T, e *Exporter, s *bpfSpin, want map[string]string) (Metrics, uint64, time.Time) {
	t.Helper()
	first := e.Scrape().Value(spinRun, want)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		ms := e.Scrape()
		if ms.Value(spinRun, want) != first {
			calls, _ := s.counts(t)
			return ms, calls, time.Now()
		}
	}
	t.Fatalf("the runs served for %v did not move in 10 s", want)
	return nil, 0, time.Time{}
}

// setBPFStatsSysctl sets kernel.bpf_stats_enabled to v for the test and
// restores it at cleanup (it is the whole host's: other tests on the host
// see it meanwhile, so it stays set only for this test).
func setBPFStatsSysctl(t *testing.T, v string) {
	t.Helper()
	const path = "/proc/sys/kernel/bpf_stats_enabled"
	old, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(v), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.WriteFile(path, old, 0o644); err != nil {
			t.Errorf("restore kernel.bpf_stats_enabled to %q: %v", strings.TrimSpace(string(old)), err)
		}
	})
}

// waitOurRuns waits until runqlat's sched_switch has runs served.
func waitOurRuns(t *testing.T, e *Exporter) {
	t.Helper()
	Eventually(t, 60*time.Second, func() bool {
		return e.Scrape().Value("kernel_exporter_program_runs_total", L("config", "runqlat", "program", "sched_switch")) > 0
	}, "runqlat's sched_switch never served runs\n%s", e.Logs())
}

// startExactLoad drives, until the function it returns is called: the
// foreign program (ioprio_get, 1000 a second), getppid calls, and O_DIRECT
// writes of 4 KiB (block requests). The function returns what was made.
func startExactLoad(t *testing.T) func() string {
	t.Helper()
	dir := t.TempDir()
	var stop atomic.Bool
	var ioprio, getppid, writes atomic.Uint64
	var wg sync.WaitGroup
	var werr error
	wg.Add(3)
	// Stopped at the end of the test whatever happens: a load left running
	// would be counted by every test after it.
	t.Cleanup(func() { stop.Store(true); wg.Wait() })
	go func() {
		defer wg.Done()
		for !stop.Load() {
			// The pace changes every 700 ms, so that the rate of one
			// measuring period differs from the next and the landing
			// page's figure changes at each window's end.
			pace := time.Millisecond
			if time.Now().UnixMilli()/700%2 == 1 {
				pace = 2 * time.Millisecond
			}
			ioprioGets(100, pace)
			ioprio.Add(100)
		}
	}()
	go func() {
		defer wg.Done()
		for !stop.Load() {
			for range 1000 {
				unix.Getppid()
			}
			getppid.Add(1000)
			time.Sleep(time.Millisecond)
		}
	}()
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			if err := writeDirect(filepath.Join(dir, "direct"), 1<<20, 4096); err != nil {
				werr = err
				return
			}
			writes.Add(256)
		}
	}()
	return func() string {
		stop.Store(true)
		wg.Wait()
		if werr != nil {
			t.Error(werr)
		}
		return fmt.Sprintf("%d ioprio_get, %d getppid, %d O_DIRECT writes of 4 KiB", ioprio.Load(), getppid.Load(), writes.Load())
	}
}

// bpftoolStats is a program's statistics as bpftool prog show says them.
type bpftoolStats struct {
	ID        uint32 `json:"id"`
	Name      string `json:"name"`
	RunTimeNs uint64 `json:"run_time_ns"`
	RunCnt    uint64 `json:"run_cnt"`
}

// bpftoolAll returns every program's statistics, by id.
func bpftoolAll(t *testing.T) map[uint32]bpftoolStats {
	t.Helper()
	bt := probeNeedTool(t, "the kernel's own view of a BPF program", "bpftool")
	out, err := exec.Command(bt, "prog", "show", "-j").Output()
	if err != nil {
		t.Fatalf("bpftool prog show: %v", err)
	}
	var progs []bpftoolStats
	if err := json.Unmarshal(out, &progs); err != nil {
		t.Fatalf("bpftool prog show: %v", err)
	}
	m := map[uint32]bpftoolStats{}
	for _, p := range progs {
		m[p.ID] = p
	}
	return m
}

// servedProgram is what one scrape serves of a program.
type servedProgram struct {
	name, owner, config string
	runs, secs          float64
}

// servedPrograms returns the programs served one by one in ms, by id.
func servedPrograms(ms Metrics) map[uint32]servedProgram {
	out := map[uint32]servedProgram{}
	for _, name := range []string{spinRun, spinSec, "kernel_bpf_program_info"} {
		mf := ms[name]
		if mf == nil {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			id, err := strconv.ParseUint(l["id"], 10, 32)
			if err != nil {
				continue
			}
			p := out[uint32(id)]
			p.name, p.owner = l["name"], l["owner"]
			switch name {
			case spinRun:
				p.runs = m.GetCounter().GetValue()
			case spinSec:
				p.secs = m.GetCounter().GetValue()
			default:
				p.config = l["config"]
			}
			out[uint32(id)] = p
		}
	}
	return out
}

// compareFamilies checks, for each program of our configs with runs in
// the interval, that the increase of kernel_exporter_program_run_seconds_total
// and _runs_total between ms0 and ms1 is that of kernel_bpf_program_* for
// the same program (matched by config and by name, which the kernel cuts
// at 15 bytes), within 5%.
func compareFamilies(t *testing.T, ms0, ms1 Metrics) {
	t.Helper()
	p0, p1 := servedPrograms(ms0), servedPrograms(ms1)
	compared := 0
	mf := ms1["kernel_exporter_program_runs_total"]
	if mf == nil {
		t.Fatal("kernel_exporter_program_runs_total not served")
	}
	for _, m := range mf.GetMetric() {
		l := map[string]string{}
		for _, lp := range m.GetLabel() {
			l[lp.GetName()] = lp.GetValue()
		}
		runs := m.GetCounter().GetValue() - ms0.Value("kernel_exporter_program_runs_total", l)
		secs := ms1.Value("kernel_exporter_program_run_seconds_total", l) - ms0.Value("kernel_exporter_program_run_seconds_total", l)
		if runs < 100 {
			continue
		}
		short := l["program"]
		if len(short) > 15 {
			short = short[:15]
		}
		found := false
		for id, p := range p1 {
			if p.config != l["config"] || p.name != short {
				continue
			}
			found = true
			hr, hs := p.runs-p0[id].runs, p.secs-p0[id].secs
			t.Logf("%s/%s (id %d): kernel_exporter_program_* +%.0f runs, +%.6f s; kernel_bpf_program_* +%.0f runs, +%.6f s", l["config"], l["program"], id, runs, secs, hr, hs)
			if math.Abs(runs-hr) > 0.05*hr || math.Abs(secs-hs) > 0.05*hs {
				t.Errorf("%s/%s: kernel_exporter_program_* moved by %.0f runs and %.6f s, kernel_bpf_program_* of id %d by %.0f runs and %.6f s: not within 5%%", l["config"], l["program"], runs, secs, id, hr, hs)
			}
			compared++
		}
		if !found {
			t.Errorf("%s/%s: no kernel_bpf_program_* series of that config and name", l["config"], l["program"])
		}
	}
	if compared < 3 {
		t.Errorf("compared %d programs of ours, want at least 3", compared)
	}
}

// topFrame is one program's row of a top bpf frame.
type topFrame struct {
	perSecond, nsPerEvent, cpuPercent float64
}

// topBPF starts top bpf with frames of interval d and returns its frames
// as they come, each the rows of one frame by id (the channel is closed
// when top exits, after two frames).
func topBPF(t *testing.T, d time.Duration) <-chan map[uint32]topFrame {
	t.Helper()
	cmd := exec.Command(binary, "top", "bpf", "--interval="+d.String(), "--count=2")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	frames := make(chan map[uint32]topFrame, 2)
	row := regexp.MustCompile(`^ *(\d+)  \S+ +\S+ +\S+ +(\d+) +(\d+|-) +([\d.]+)$`)
	// Not a terminal: top writes each frame with one write, which one
	// read of the pipe returns whole (a frame is far below the pipe's
	// 64 KiB), the moment top listed.
	go func() {
		defer close(frames)
		buf := make([]byte, 64<<10)
		for {
			n, err := out.Read(buf)
			rows := map[uint32]topFrame{}
			for _, line := range strings.Split(string(buf[:n]), "\n") {
				if m := row.FindStringSubmatch(line); m != nil {
					id, _ := strconv.ParseUint(m[1], 10, 32)
					var f topFrame
					f.perSecond, _ = strconv.ParseFloat(m[2], 64)
					f.nsPerEvent, _ = strconv.ParseFloat(m[3], 64)
					f.cpuPercent, _ = strconv.ParseFloat(m[4], 64)
					rows[uint32(id)] = f
				}
			}
			if len(rows) > 0 {
				frames <- rows
			}
			if err != nil {
				return
			}
		}
	}()
	return frames
}

// nextFrame waits for top bpf's next frame.
func nextFrame(t *testing.T, frames <-chan map[uint32]topFrame) map[uint32]topFrame {
	t.Helper()
	select {
	case f, ok := <-frames:
		if !ok {
			t.Fatal("top bpf exited before its frame")
		}
		return f
	case <-time.After(60 * time.Second):
		t.Fatal("top bpf printed no frame in 60 s")
	}
	return nil
}

// compareTop checks that top bpf's frame, taken inside the interval
// between ms0 and ms1 (elapsed), shows program id at the events per
// second and CPU the served counters' rates over the interval give,
// within 5%.
func compareTop(t *testing.T, rows map[uint32]topFrame, ms0, ms1 Metrics, elapsed time.Duration, id uint32, mode string) {
	t.Helper()
	f, ok := rows[id]
	if !ok {
		t.Fatalf("%s: top bpf showed no row for program %d", mode, id)
	}
	want := L("id", strconv.FormatUint(uint64(id), 10))
	perSecond := (ms1.Value(spinRun, want) - ms0.Value(spinRun, want)) / elapsed.Seconds()
	cpu := 100 * (ms1.Value(spinSec, want) - ms0.Value(spinSec, want)) / elapsed.Seconds()
	t.Logf("%s: program %d over %v: served %.0f runs/s, %.3f%% CPU; top bpf %.0f events/s, %.0f ns/event, %.2f%% CPU",
		mode, id, elapsed.Round(time.Millisecond), perSecond, cpu, f.perSecond, f.nsPerEvent, f.cpuPercent)
	if math.Abs(perSecond-f.perSecond) > 0.05*f.perSecond {
		t.Errorf("%s: program %d: served runs/s %.0f, top bpf %.0f: not within 5%%", mode, id, perSecond, f.perSecond)
	}
	// top prints CPU % with two decimals: allow that rounding too.
	if math.Abs(cpu-f.cpuPercent) > 0.05*f.cpuPercent+0.005 {
		t.Errorf("%s: program %d: served CPU %.3f%%, top bpf %.2f%%: not within 5%%", mode, id, cpu, f.cpuPercent)
	}
}

// compareLanding checks that the landing page's row for program id among
// the host's top five by CPU shows the CPU the served counters' rate over
// the interval gives, within 5% (and the page's rounding).
func compareLanding(t *testing.T, page string, ms0, ms1 Metrics, elapsed time.Duration, id uint32, mode string) {
	t.Helper()
	landing, ok := landingCPU(page, id)
	if !ok {
		t.Errorf("%s: the landing page shows no row for program %d among the top five by CPU", mode, id)
		return
	}
	want := L("id", strconv.FormatUint(uint64(id), 10))
	served := 1000 * (ms1.Value(spinSec, want) - ms0.Value(spinSec, want)) / elapsed.Seconds()
	t.Logf("%s: program %d: landing page %.1f ms/s, served counters %.2f ms/s", mode, id, landing, served)
	if math.Abs(landing-served) > 0.05*served+0.05 {
		t.Errorf("%s: program %d: landing page %.1f ms/s of CPU, served counters %.2f ms/s: not within 5%%", mode, id, landing, served)
	}
}

// checkBracket checks that every program with at least 1000 runs served in
// ms lies between bpftool's readings b0 and b1 taken just before and
// just after the scrape (2% slack), for runs and run time, and that our
// bundled programs and the foreign program were among them.
func checkBracket(t *testing.T, b0 map[uint32]bpftoolStats, ms Metrics, b1 map[uint32]bpftoolStats, foreign uint32, what string) {
	t.Helper()
	served := servedPrograms(ms)
	var table strings.Builder
	fmt.Fprintf(&table, "%6s %-16s %-16s %12s %12s %12s   %14s %14s %14s\n", "id", "name", "owner", "bpftool", "ours", "bpftool", "bpftool ns", "ours ns", "bpftool ns")
	checked := map[string]bool{}
	ids := make([]uint32, 0, len(served))
	for id := range served {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		p := served[id]
		a, ok0 := b0[id]
		b, ok1 := b1[id]
		if !ok0 || !ok1 || b.RunCnt < 1000 {
			continue
		}
		fmt.Fprintf(&table, "%6d %-16s %-16s %12d %12.0f %12d   %14d %14.0f %14d\n", id, p.name, p.owner, a.RunCnt, p.runs, b.RunCnt, a.RunTimeNs, p.secs*1e9, b.RunTimeNs)
		if p.runs < 0.98*float64(a.RunCnt) || p.runs > 1.02*float64(b.RunCnt) {
			t.Errorf("program %d (%s, %s): runs served %.0f, bpftool %d just before and %d just after the scrape (2%% slack)", id, p.name, p.owner, p.runs, a.RunCnt, b.RunCnt)
		}
		if ns := p.secs * 1e9; ns < 0.98*float64(a.RunTimeNs) || ns > 1.02*float64(b.RunTimeNs) {
			t.Errorf("program %d (%s, %s): run time served %.0f ns, bpftool %d just before and %d just after the scrape (2%% slack)", id, p.name, p.owner, ns, a.RunTimeNs, b.RunTimeNs)
		}
		if p.config != "" || id == foreign {
			checked[p.name] = true
		}
	}
	t.Logf("%s: runs and run time (ns) of every program with >= 1000 runs:\n%s", what, table.String())
	for _, name := range []string{"sched_switch", "sched_wakeup", "timer_start", "block_rq_issue", "block_rq_comple", "bpfstats_spin"} {
		if !checked[name] {
			t.Errorf("program %s was not checked against bpftool (not served, or under 1000 runs)", name)
		}
	}
}

// landingCPU returns the CPU (ms/s) the landing page shows for program id
// among the host's top five, false when it does not show it.
func landingCPU(page string, id uint32) (float64, bool) {
	m := regexp.MustCompile(fmt.Sprintf(`<td>%d bpfstats_spin</td>(?:<td>[^<]*</td>){3}<td class="n">([\d.]+) ms/s</td>`, id)).FindStringSubmatch(page)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(m[1], 64)
	return v, err == nil
}

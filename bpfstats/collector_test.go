// SPDX-License-Identifier: Apache-2.0

package bpfstats

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/kernel-exporter/kernel_exporter/collector"
)

// world is a fake host: a listing the test changes, and a clock.
type world struct {
	mu   sync.Mutex
	l    Listing
	now  time.Time
	fail error
}

func (w *world) List(context.Context) (*Listing, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fail != nil {
		return nil, w.fail
	}
	l := w.l
	l.Programs = append([]Program(nil), w.l.Programs...)
	return &l, nil
}

func (w *world) clock() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.now
}

func (w *world) advance(d time.Duration) {
	w.mu.Lock()
	w.now = w.now.Add(d)
	w.mu.Unlock()
}

// run adds dt ns and n runs to program id.
func (w *world) run(id uint32, dt, n uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range w.l.Programs {
		if w.l.Programs[i].ID == id {
			w.l.Programs[i].RunTimeNs += dt
			w.l.Programs[i].RunCount += n
		}
	}
}

// gather returns the value of metric name's series whose labels include
// want, and how many series the metric has.
func gather(t *testing.T, c *Collector, name string, want map[string]string) (float64, int) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		v, found := math.NaN(), false
		for _, m := range f.Metric {
			if matchLabels(m, want) {
				found = true
				switch {
				case m.Counter != nil:
					v = m.Counter.GetValue()
				case m.Gauge != nil:
					v = m.Gauge.GetValue()
				}
			}
		}
		if !found {
			return math.NaN(), len(f.Metric)
		}
		return v, len(f.Metric)
	}
	return math.NaN(), 0
}

func matchLabels(m *dto.Metric, want map[string]string) bool {
	n := 0
	for _, lp := range m.Label {
		if v, ok := want[lp.GetName()]; ok {
			if v != lp.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(want)
}

// off is Options.SysctlOn for kernel.bpf_stats_enabled=0.
func off() bool { return false }

func newWorld(t *testing.T) (*world, string) {
	proc := t.TempDir()
	if err := os.MkdirAll(filepath.Join(proc, "4242"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proc, "4242", "cgroup"), []byte("0::/kubepods/pod1/ctr\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	w := &world{now: time.Unix(1e9, 0)}
	w.l = Listing{
		Programs: []Program{{ID: 10, Type: 5, Name: "spin", MapIDs: []uint32{3}}, {ID: 11, Type: 6, Name: "xdp_prog"}},
		Maps:     []Map{{ID: 3, Type: 2, Name: "counts", MaxEntries: 8, Memlock: 4096}, {ID: 4, Type: 1, Name: "table", MaxEntries: 64, Memlock: 9000, Entries: 12}},
		Links:    []Link{{ID: 1, Type: 7, ProgID: 10, AttachType: 41, HasAttach: true, Target: "syscalls:sys_enter_getpgid"}},
		Holders:  []Holder{{PID: 4242, Kind: HoldsLink, ID: 1, Comm: "agent"}, {PID: 5000, Kind: HoldsLink, ID: 1, Comm: "child"}},
	}
	return w, proc
}

func TestCollectorWindows(t *testing.T) {
	w, proc := newWorld(t)
	c := New(Options{Lister: w, Now: w.clock, ProcRoot: proc, SysctlOn: off,
		Pod:  func(cg string) string { return "ns/" + filepath.Base(filepath.Dir(cg)) },
		Ours: func() map[uint32]string { return map[uint32]string{11: "myconfig"} }})
	spin := map[string]string{"id": "10", "name": "spin", "type": "tracepoint", "owner": "agent"}

	// Before any window: listed, counters at 0.
	if v, _ := gather(t, c, "kernel_bpf_program_runs_total", spin); v != 0 {
		t.Fatalf("runs before a window: %v", v)
	}
	// Runs outside a window are not counted.
	w.run(10, 5e6, 50)
	c.WindowStart(context.Background(), false)
	w.run(10, 2e6, 10) // 2 ms in 10 runs during a 1 s window of a 30 s period
	w.advance(time.Second)
	c.WindowEnd(context.Background(), 30*time.Second, false)
	if v, _ := gather(t, c, "kernel_bpf_program_runs_total", spin); v != 300 {
		t.Errorf("runs: %v, want 10 runs x 30", v)
	}
	if v, _ := gather(t, c, "kernel_bpf_program_run_seconds_total", spin); math.Abs(v-0.06) > 1e-12 {
		t.Errorf("run seconds: %v, want 2 ms x 30", v)
	}
	if v, _ := gather(t, c, "kernel_bpf_stats_sampled_ratio", nil); math.Abs(v-1.0/30) > 1e-12 {
		t.Errorf("sampled ratio %v, want 1/30", v)
	}
	info := map[string]string{"id": "10", "attach_type": "perf_event", "attach_target": "syscalls:sys_enter_getpgid",
		"links": "1", "owner": "agent", "pid": "4242", "cgroup": "/kubepods/pod1/ctr", "pod": "ns/pod1", "config": ""}
	if v, _ := gather(t, c, "kernel_bpf_program_info", info); v != 1 {
		t.Errorf("program info %v not served", info)
	}
	if v, _ := gather(t, c, "kernel_bpf_program_info", map[string]string{"id": "11", "config": "myconfig", "owner": ""}); v != 1 {
		t.Error("our program's config label, or an unheld program's empty owner, not served")
	}
	// A map no process holds takes its first program's owner.
	if v, _ := gather(t, c, "kernel_bpf_map_memory_bytes", map[string]string{"id": "3", "owner": "agent", "type": "array"}); v != 4096 {
		t.Errorf("map memory %v", v)
	}
	if v, _ := gather(t, c, "kernel_bpf_map_info", map[string]string{"id": "3", "programs": "10"}); v != 1 {
		t.Error("map info with its programs not served")
	}
	// Entries: an array's max_entries, a hash map's count.
	if v, _ := gather(t, c, "kernel_bpf_map_entries", map[string]string{"id": "3"}); v != 8 {
		t.Errorf("array entries %v, want its max_entries 8", v)
	}
	if v, _ := gather(t, c, "kernel_bpf_map_entries", map[string]string{"id": "4"}); v != 12 {
		t.Errorf("hash map entries %v, want the kernel's count 12", v)
	}
	s := c.Summary(5)
	if !s.Measured || len(s.Top) != 1 || s.Top[0].ID != 10 || math.Abs(s.CPU-0.002) > 1e-12 || s.Top[0].NsPerRun != 2e5 || s.MapBytes != 4096+9000 {
		t.Errorf("summary %+v", s)
	}

	// Continuous statistics: scale 1, and a window's end is the next
	// one's base (nothing run between two windows is lost).
	c.WindowStart(context.Background(), true)
	w.run(10, 1e6, 7)
	w.advance(30 * time.Second)
	c.WindowEnd(context.Background(), 30*time.Second, true)
	w.run(10, 1e6, 5) // between windows
	c.WindowStart(context.Background(), true)
	w.advance(30 * time.Second)
	c.WindowEnd(context.Background(), 30*time.Second, true)
	if v, _ := gather(t, c, "kernel_bpf_program_runs_total", spin); v != 312 {
		t.Errorf("runs after continuous windows: %v, want 300+7+5", v)
	}
	if v, _ := gather(t, c, "kernel_bpf_stats_sampled_ratio", nil); v != 1 {
		t.Errorf("sampled ratio with continuous statistics %v", v)
	}
}

func TestCollectorTTLAndOverflow(t *testing.T) {
	w, proc := newWorld(t)
	c := New(Options{Lister: w, Now: w.clock, ProcRoot: proc, SysctlOn: off, TTL: time.Minute, MaxPrograms: 1, MaxMaps: 1})
	c.WindowStart(context.Background(), false)
	w.run(10, 1e6, 1)
	w.run(11, 3e6, 2)
	w.advance(time.Second)
	c.WindowEnd(context.Background(), 2*time.Second, false)
	if _, n := gather(t, c, "kernel_bpf_program_runs_total", nil); n != 2 {
		t.Errorf("%d runs series, want program 10 and the overflow series", n)
	}
	ov := map[string]string{"id": collector.OverflowValue, "name": collector.OverflowValue}
	if v, _ := gather(t, c, "kernel_bpf_program_runs_total", ov); v != 4 {
		t.Errorf("overflow runs %v, want 2 x 2", v)
	}
	if v, _ := gather(t, c, "kernel_bpf_programs_overflow", nil); v != 1 {
		t.Errorf("programs overflow %v", v)
	}
	// Program 10 goes: served until its TTL, then gone; its slot goes
	// to the overflowed program of lowest id (11), whose series starts
	// at 0 while its counts so far stay in the overflow series.
	w.mu.Lock()
	w.l.Programs = []Program{{ID: 11, Type: 6, Name: "xdp_prog"}, {ID: 12, Type: 5, Name: "new"}}
	w.l.Links = nil
	w.mu.Unlock()
	w.advance(2 * time.Second)
	if v, _ := gather(t, c, "kernel_bpf_program_runs_total", map[string]string{"id": "10"}); v != 1*2 {
		t.Errorf("gone program before its TTL: runs %v, want its last value", v)
	}
	w.advance(time.Minute)
	if _, n := gather(t, c, "kernel_bpf_program_runs_total", map[string]string{"id": "10"}); n != 2 {
		t.Errorf("%d runs series after the TTL, want 2 (program 11 and overflow)", n)
	}
	if v, _ := gather(t, c, "kernel_bpf_program_runs_total", map[string]string{"id": "11"}); v != 0 {
		t.Errorf("program 11 in the freed slot: %v", v)
	}
	// The overflow counter never goes down.
	if v, _ := gather(t, c, "kernel_bpf_program_runs_total", ov); v != 4 {
		t.Errorf("overflow runs %v after churn", v)
	}
}

func TestCollectorListFails(t *testing.T) {
	w, proc := newWorld(t)
	c := New(Options{Lister: w, Now: w.clock, ProcRoot: proc, SysctlOn: off})
	gather(t, c, "kernel_bpf_programs", nil)
	w.fail = errors.New("helper gone")
	w.advance(time.Minute)
	if v, _ := gather(t, c, "kernel_exporter_bpf_list_errors_total", nil); v != 1 {
		t.Errorf("list errors %v", v)
	}
	if v, _ := gather(t, c, "kernel_bpf_programs", nil); v != 2 {
		t.Errorf("programs %v after a failed listing: want the last listing's 2", v)
	}
}

// TestCollectorMeasuredCycle checks that a window stands for the time
// since the previous window ended (the period and the time listing took),
// not the nominal period: counts are scaled by that over the window.
func TestCollectorMeasuredCycle(t *testing.T) {
	w, proc := newWorld(t)
	c := New(Options{Lister: w, Now: w.clock, ProcRoot: proc, SysctlOn: off})
	window := func(runs uint64) {
		c.WindowStart(context.Background(), false)
		w.run(10, 0, runs)
		w.advance(time.Second)
		c.WindowEnd(context.Background(), 2*time.Second, false)
	}
	window(10) // first: the nominal period, scale 2
	w.advance(1500 * time.Millisecond)
	window(10) // 2.5 s since the first ended: scale 2.5
	if v, _ := gather(t, c, "kernel_bpf_program_runs_total", map[string]string{"id": "10"}); v != 45 {
		t.Errorf("runs %v, want 10 x 2 + 10 x 2.5", v)
	}
	if v, _ := gather(t, c, "kernel_bpf_stats_sampled_ratio", nil); v != 0.4 {
		t.Errorf("sampled ratio %v, want 1 s of 2.5 s", v)
	}
}

// TestCollectorExact: with kernel.bpf_stats_enabled=1, a program first
// seen is served the kernel's counts as they are, each scrape or window
// adds what the kernel counted since the last listing, windows add no
// estimate, and the sampled ratio says exact; once the sysctl is 0, the
// next window is scaled over the time since the last exact interval.
func TestCollectorExact(t *testing.T) {
	w, proc := newWorld(t)
	var on sync.Map // "on": bool
	on.Store("on", true)
	c := New(Options{Lister: w, Now: w.clock, ProcRoot: proc, SysctlOn: func() bool { v, _ := on.Load("on"); return v.(bool) }})
	spin := map[string]string{"id": "10"}
	want := func(what string, runs, secs float64, mode string, ratio float64) {
		t.Helper()
		if v, _ := gather(t, c, "kernel_bpf_program_runs_total", spin); v != runs {
			t.Errorf("%s: runs %v, want %v", what, v, runs)
		}
		if v, _ := gather(t, c, "kernel_bpf_program_run_seconds_total", spin); math.Abs(v-secs) > 1e-12 {
			t.Errorf("%s: run seconds %v, want %v", what, v, secs)
		}
		if v, _ := gather(t, c, "kernel_bpf_stats_sampled_ratio", map[string]string{"mode": mode}); math.Abs(v-ratio) > 1e-12 {
			t.Errorf("%s: sampled ratio{mode=%s} %v, want %v", what, mode, v, ratio)
		}
		if f, n, ok := c.Figures(10); !ok || n != runs || math.Abs(f-secs) > 1e-12 {
			t.Errorf("%s: Figures(10) = %v, %v, %v, want what is served", what, f, n, ok)
		}
	}
	w.run(10, 5e6, 50) // before the exporter came
	want("first listing", 50, 0.005, "exact", 1)
	w.run(10, 1e6, 10)
	w.advance(time.Second)
	want("a scrape later", 60, 0.006, "exact", 1)
	c.WindowStart(context.Background(), false)
	w.run(10, 2e6, 10)
	w.advance(time.Second)
	c.WindowEnd(context.Background(), 30*time.Second, false)
	want("a window", 70, 0.008, "exact", 1)
	// The sysctl goes to 0: what ran since the last listing is not
	// exact, and the next window stands for the time since then.
	on.Store("on", false)
	w.run(10, 1e6, 5)
	w.advance(time.Second)
	want("sysctl off", 70, 0.008, "sampled", 1)
	w.advance(10 * time.Second)
	c.WindowStart(context.Background(), false)
	w.run(10, 1e6, 10)
	w.advance(time.Second)
	c.WindowEnd(context.Background(), 30*time.Second, false)
	want("a sampled window", 70+10*12, 0.008+0.001*12, "sampled", 1.0/12)
	// On again: a program first seen now is served from the kernel's
	// counts; 10 adds the kernel's counts once two listings saw it on.
	on.Store("on", true)
	w.mu.Lock()
	w.l.Programs = append(w.l.Programs, Program{ID: 12, Type: 5, Name: "late", RunTimeNs: 3e6, RunCount: 30})
	w.mu.Unlock()
	w.advance(time.Second)
	if v, _ := gather(t, c, "kernel_bpf_program_runs_total", map[string]string{"id": "12"}); v != 30 {
		t.Errorf("a program first seen while statistics are on: runs %v, want the kernel's 30", v)
	}
	w.run(10, 1e6, 4)
	w.advance(time.Second)
	want("on again", 190+4, 0.020+0.001, "exact", 1)
	// Two windows while on: the landing page's rate is over the whole
	// span since the first one ended, as the counters' rate() is.
	c.WindowStart(context.Background(), false)
	w.advance(time.Second)
	c.WindowEnd(context.Background(), 30*time.Second, false)
	w.run(10, 8e6, 80) // between windows: 8 ms
	w.advance(9 * time.Second)
	c.WindowStart(context.Background(), false)
	w.run(10, 2e6, 20) // in the window: 2 ms
	w.advance(time.Second)
	c.WindowEnd(context.Background(), 30*time.Second, false)
	if s := c.Summary(5); len(s.Top) != 1 || math.Abs(s.Top[0].CPU-0.001) > 1e-12 || s.Window != 10*time.Second {
		t.Errorf("summary after exact windows: %+v, want program 10 at 10 ms over 10 s", s)
	}
	want("exact windows", 194+100, 0.021+0.010, "exact", 1)
}

// fakeProbe is a statistics probe: own counts every run, kernel only
// those while statistics are on.
type fakeProbe struct{ kernel, own uint64 }

func (p *fakeProbe) Read() (uint64, uint64, uint64, error) { return p.kernel, p.own, 0, nil }
func (p *fakeProbe) runs(n uint64, on bool) {
	p.own += n
	if on {
		p.kernel += n
	}
}

// TestCollectorProbe: with the sysctl at 0 and another process holding
// statistics on (the probe sees the kernel count every run), intervals
// outside our windows are exact, and so are those inside a window that
// began exact; once the other holder is gone the next window is scaled
// over the time since the last exact interval.
func TestCollectorProbe(t *testing.T) {
	w, proc := newWorld(t)
	fp := &fakeProbe{}
	c := New(Options{Lister: w, Now: w.clock, ProcRoot: proc, SysctlOn: off, Probe: fp})
	spin := map[string]string{"id": "10"}
	want := func(what string, runs float64, mode string) {
		t.Helper()
		if v, _ := gather(t, c, "kernel_bpf_program_runs_total", spin); v != runs {
			t.Errorf("%s: runs %v, want %v", what, v, runs)
		}
		if _, n := gather(t, c, "kernel_bpf_stats_sampled_ratio", map[string]string{"mode": mode}); n != 1 {
			t.Errorf("%s: no sampled ratio{mode=%s}", what, mode)
		}
	}
	ctx := context.Background()
	window := func(runs uint64) {
		c.WindowStart(ctx, false)
		w.run(10, 1e6, runs)
		fp.runs(5, true) // our window holds statistics on
		w.advance(time.Second)
		c.WindowEnd(ctx, 10*time.Second, false)
	}
	w.run(10, 5e6, 50) // counted by the other holder before we came
	fp.runs(5, true)
	window(10)
	want("first window", 50+10, "exact")
	w.run(10, 2e6, 20)
	fp.runs(10, true)
	w.advance(time.Second)
	want("a scrape between windows", 80, "exact")
	w.run(10, 1e6, 10)
	fp.runs(3, true)
	w.advance(8 * time.Second)
	window(10)
	want("second window", 100, "exact")
	// The other holder closes: between windows the kernel counts nothing.
	fp.runs(10, false)
	w.advance(time.Second)
	want("a scrape, holder gone", 100, "sampled")
	w.advance(8 * time.Second)
	window(10)
	want("a sampled window", 100+10*10, "sampled")
}

// SPDX-License-Identifier: Apache-2.0

package exporter_test

import (
	"context"
	"io/fs"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kernel-exporter/kernel_exporter/budget"
	"github.com/kernel-exporter/kernel_exporter/exporter"
	"github.com/kernel-exporter/kernel_exporter/internal/testenv"
	"github.com/kernel-exporter/kernel_exporter/loader"
	"github.com/kernel-exporter/kernel_exporter/programs"
)

// bundledEstimate is the memory estimate of a bundled program's maps.
func bundledEstimate(t *testing.T, name string) uint64 {
	t.Helper()
	obj, err := fs.ReadFile(programs.FS, name+".bpf.o")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := loader.ParseObject(name, obj)
	if err != nil {
		t.Fatal(err)
	}
	est, err := budget.EstimateSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	return est.Total
}

// TestMemoryLedger loads three bundled configs under a 1 MiB budget, with
// tp_btf disabled: timers (81 KiB) loads and holds its estimate; runqlat
// reserves and then fails to load (its programs are tp_btf), so it gives
// its reservation back; biolatency (1.3 MiB) is refused by the budget.
// Close gives everything back.
func TestMemoryLedger(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.SkipOrFail(t, "loading BPF programs needs root")
	}
	e := exporter.New(exporter.Options{
		Sources:       []exporter.Source{{Name: "timers"}, {Name: "runqlat"}, {Name: "biolatency"}},
		CacheSize:     1 << 10,
		DisableAttach: []string{"tp_btf"},
		MemoryBudget:  1 << 20,
		Logger:        quietLogger(),
	})
	e.Start(context.Background())
	<-e.Loaded()
	states := map[string]string{}
	for _, st := range e.Status.States() {
		if st.Loading {
			t.Fatalf("config %s still loading after Loaded", st.Name)
		}
		states[st.Name] = st.Reason
		if st.Up {
			states[st.Name] = "up"
		}
	}
	if states["timers"] != "up" {
		t.Errorf("timers: %q, want up", states["timers"])
	}
	if r := states["runqlat"]; r == "up" || strings.Contains(r, "budget") {
		t.Errorf("runqlat: %q, want down for its disabled tp_btf programs", r)
	}
	if r := states["biolatency"]; !strings.Contains(r, "over the memory budget") {
		t.Errorf("biolatency: %q, want down over the memory budget", r)
	}
	if got, want := e.Memory.Used(), bundledEstimate(t, "timers"); got != want {
		t.Errorf("ledger holds %d bytes, want timers' %d (runqlat's released, biolatency's never granted)", got, want)
	}
	if h := e.Memory.Held("runqlat"); h != 0 {
		t.Errorf("runqlat still holds %d bytes after its load failed", h)
	}
	e.Close()
	if u := e.Memory.Used(); u != 0 {
		t.Errorf("ledger holds %d bytes after Close", u)
	}
}

// countingOpener opens tracepoint perf events in this process, counting
// the calls (the privileged helper's part).
type countingOpener struct{ calls int }

func (o *countingOpener) OpenTracepoint(group, event string) (*os.File, error) {
	o.calls++
	return loader.OpenTracepointEvent(group, event)
}

// timerStarts sums the timers config's series as a scrape reads them.
func timerStarts(t *testing.T, e *exporter.Exporter) (sum float64, series int) {
	t.Helper()
	for _, sn := range e.Status.Read() {
		for _, f := range sn.Families {
			if f.Name != "kernel_timer_starts_total" {
				continue
			}
			for i := range f.Len() {
				sum += f.Value(i)
				series++
			}
		}
	}
	return sum, series
}

// TestDetachKeepsSeries detaches the bundled timers config (a tracepoint
// program): it is down, over budget, its program not attached, while its
// series stay readable and frozen; Reattach re-links it through the
// tracepoint opener, without reloading, and the counts move on from where
// they were.
func TestDetachKeepsSeries(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.SkipOrFail(t, "loading BPF programs needs root")
	}
	op := &countingOpener{}
	e := exporter.New(exporter.Options{Sources: []exporter.Source{{Name: "timers"}}, CacheSize: 1 << 10, Tracepoints: op, Logger: quietLogger()})
	defer e.Close()
	e.Start(context.Background())
	<-e.Loaded()
	time.Sleep(200 * time.Millisecond)
	before, n := timerStarts(t, e)
	if n == 0 || before == 0 {
		t.Fatalf("timers counted nothing: %v in %d series (%v)", before, n, e.Failed())
	}
	if err := e.Detach("timers", budget.ResourceCPU, "over its CPU budget: test"); err != nil {
		t.Fatal(err)
	}
	st := e.Status.States()[0]
	if st.Up || st.OverBudget != budget.ResourceCPU || !strings.Contains(st.Reason, "budget") || st.Programs[0].Attached {
		t.Errorf("detached state: up %v over %q reason %q attached %v", st.Up, st.OverBudget, st.Reason, st.Programs[0].Attached)
	}
	held, _ := timerStarts(t, e)
	time.Sleep(300 * time.Millisecond)
	frozen, n2 := timerStarts(t, e)
	if n2 == 0 || frozen != held || held < before {
		t.Errorf("detached: %v then %v in %d series, want the same, at least %v", held, frozen, n2, before)
	}
	if err := e.Reattach("timers"); err != nil {
		t.Fatal(err)
	}
	if op.calls != 1 {
		t.Errorf("tracepoint opener called %d times, want 1", op.calls)
	}
	st = e.Status.States()[0]
	if !st.Up || st.OverBudget != "" || st.Reason != "" || !st.Programs[0].Attached {
		t.Errorf("re-attached state: up %v over %q reason %q attached %v", st.Up, st.OverBudget, st.Reason, st.Programs[0].Attached)
	}
	time.Sleep(300 * time.Millisecond)
	after, _ := timerStarts(t, e)
	if after <= frozen {
		t.Errorf("re-attached: %v, want more than %v (no reset, counting again)", after, frozen)
	}
	t.Logf("timer starts: %v at detach, %v frozen, %v after re-attach", held, frozen, after)
	if err := e.Reattach("timers"); err == nil {
		t.Error("second Reattach succeeded")
	}
}

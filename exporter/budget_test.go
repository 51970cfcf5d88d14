package exporter_test

import (
	"context"
	"io/fs"
	"os"
	"strings"
	"testing"

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

// SPDX-License-Identifier: Apache-2.0

package budget

import (
	"errors"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kernel-exporter/kernel_exporter/loader"
	"github.com/kernel-exporter/kernel_exporter/programs"
)

func est(maps ...MapEstimate) Estimate {
	var e Estimate
	for _, m := range maps {
		e.Maps = append(e.Maps, m)
		e.Total += m.Bytes
	}
	return e
}

// TestLedger checks that reservations add up, that one over what is left
// is refused with the need and what is left and counted, and that
// releasing gives the room back.
func TestLedger(t *testing.T) {
	ex := NewExceeded()
	l := NewLedger(256<<20, ex)
	if err := l.Reserve("a", est(MapEstimate{Name: "m", Bytes: 200 << 20})); err != nil {
		t.Fatal(err)
	}
	if err := l.Reserve("b", est(MapEstimate{Name: "x", Bytes: 16 << 20})); err != nil {
		t.Fatal(err)
	}
	big := est(MapEstimate{Name: "counts", Bytes: 1 << 30}, MapEstimate{Name: "starts", Bytes: 100 << 20}, MapEstimate{Name: "a", Bytes: 4096}, MapEstimate{Name: "b", Bytes: 8192})
	err := l.Reserve("c", big)
	var me *MemoryError
	if !errors.As(err, &me) {
		t.Fatalf("Reserve over the budget: %v, want a *MemoryError", err)
	}
	want := "maps need 1.1 GiB (map counts: 1 GiB, map starts: 100 MiB, 2 more: 12 KiB), over the memory budget: 40 MiB of 256 MiB left (--bpf.memory-budget)"
	if err.Error() != want {
		t.Errorf("error\n%s\nwant\n%s", err, want)
	}
	if got := testutil.ToFloat64(ex.vec.WithLabelValues("c", ResourceMemory)); got != 1 {
		t.Errorf("budget_exceeded_total{config=c,resource=memory} = %v, want 1", got)
	}
	if l.Used() != 216<<20 || l.Held("c") != 0 {
		t.Errorf("after a refusal: used %d, c holds %d; want %d and 0", l.Used(), l.Held("c"), 216<<20)
	}
	// Exactly what is left fits.
	if err := l.Reserve("d", est(MapEstimate{Bytes: 40 << 20})); err != nil {
		t.Errorf("reserving exactly what is left: %v", err)
	}
	if err := l.Reserve("e", est(MapEstimate{Bytes: 1})); err == nil {
		t.Error("reserving 1 byte of a full budget was granted")
	}
	l.Release("a")
	l.Release("a") // twice: nothing more
	l.Release("nobody")
	if l.Used() != 56<<20 {
		t.Errorf("after releasing a: used %d, want %d", l.Used(), 56<<20)
	}
	// A config reserving again replaces what it held.
	if err := l.Reserve("b", est(MapEstimate{Bytes: 216 << 20})); err != nil {
		t.Errorf("b re-reserving within what it held plus what is left: %v", err)
	}
	if l.Used() != 256<<20 {
		t.Errorf("after b re-reserved: used %d, want %d", l.Used(), 256<<20)
	}
	l.ReleaseAll()
	if l.Used() != 0 {
		t.Errorf("after ReleaseAll: used %d", l.Used())
	}
}

// TestLedgerNoBudget checks that 0 grants everything and still records.
func TestLedgerNoBudget(t *testing.T) {
	l := NewLedger(0, nil)
	if err := l.Reserve("a", est(MapEstimate{Bytes: 1 << 50})); err != nil {
		t.Fatal(err)
	}
	if l.Held("a") != 1<<50 {
		t.Errorf("a holds %d", l.Held("a"))
	}
}

// TestLedgerConcurrent has configs reserve and release concurrently: the
// total granted never goes over the budget, and everything released
// leaves the ledger empty.
func TestLedgerConcurrent(t *testing.T) {
	const limit = 10 << 20
	l := NewLedger(limit, NewExceeded())
	var wg sync.WaitGroup
	for i := range 16 {
		name := string(rune('a' + i))
		wg.Go(func() {
			for range 1000 {
				if l.Reserve(name, est(MapEstimate{Bytes: 1 << 20})) != nil {
					continue
				}
				if u := l.Used(); u > limit {
					t.Errorf("used %d over the limit %d", u, limit)
				}
				l.Release(name)
			}
		})
	}
	wg.Wait()
	if l.Used() != 0 {
		t.Errorf("used %d after all released, want 0", l.Used())
	}
}

func TestParseMemoryBudget(t *testing.T) {
	for s, want := range map[string]uint64{"0": 0, "0B": 0, "1MiB": 1 << 20, "1.5GiB": 3 << 29, "64MB": 64 << 20, "1TiB": 1 << 40, DefaultMemoryBudgetText: DefaultMemoryBudget} {
		if got, err := ParseMemoryBudget(s); err != nil || got != want {
			t.Errorf("ParseMemoryBudget(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "256", "-1MiB", "1KiB", "1023KiB", "2TiB", "64M", "lots", strings.Repeat("9", 100)} {
		got, err := ParseMemoryBudget(s)
		if err == nil {
			t.Errorf("ParseMemoryBudget(%q) = %d, want an error", s, got)
		} else if !strings.Contains(err.Error(), MemoryFlag) || len(err.Error()) > 150 {
			t.Errorf("ParseMemoryBudget(%q): %q does not name the flag or is too long", s, err)
		}
	}
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[uint64]string{0: "0 bytes", 1023: "1023 bytes", 1024: "1 KiB", 1536: "1.5 KiB", 40 << 20: "40 MiB", 1181116006: "1.1 GiB", 1 << 40: "1 TiB"} {
		if got := FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestDefaultMemoryBudget estimates every bundled program (the
// --programs=all set) and the default set for 2 to 1024 possible CPUs, and
// checks that the default budget holds them all.
func TestDefaultMemoryBudget(t *testing.T) {
	for _, cpus := range []int{2, 64, 256, 1024} {
		var all, def uint64
		for _, n := range programs.Names() {
			obj, err := fs.ReadFile(programs.FS, n+".bpf.o")
			if err != nil {
				t.Fatal(err)
			}
			spec, err := loader.ParseObject(n, obj)
			if err != nil {
				t.Fatal(err)
			}
			e := estimateSpec(spec, cpus)
			all += e.Total
			if slices.Contains(programs.Default, n) {
				def += e.Total
			}
		}
		t.Logf("%4d possible CPUs: --programs=all %s, default set %s", cpus, FormatBytes(all), FormatBytes(def))
		if all > DefaultMemoryBudget {
			t.Errorf("%d possible CPUs: every bundled program needs %s, over the default budget %s", cpus, FormatBytes(all), FormatBytes(DefaultMemoryBudget))
		}
	}
}

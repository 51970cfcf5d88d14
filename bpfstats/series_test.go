// SPDX-License-Identifier: Apache-2.0

package bpfstats

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestCachedSeries: a map's memory and entries, and a program's owner,
// change between scrapes and the series follow; a scrape where nothing
// changed sends the very series of the previous one; FirstListed runs
// once, at the end of the first scrape.
func TestCachedSeries(t *testing.T) {
	w, proc := newWorld(t)
	w.l.Maps[1].Flags = 1 // BPF_F_NO_PREALLOC: memory changes
	released := make(chan struct{}, 10)
	c := New(Options{Lister: w, Now: w.clock, ProcRoot: proc, Refresh: time.Second, FirstListed: func() { released <- struct{}{} }})
	table := map[string]string{"id": "4", "name": "table"}
	if v, _ := gather(t, c, "kernel_bpf_map_memory_bytes", table); v != 9000 {
		t.Errorf("memory %v, want 9000", v)
	}
	select {
	case <-released:
	case <-time.After(10 * time.Second):
		t.Fatal("FirstListed not called after the first scrape")
	}
	collect := func() []prometheus.Metric {
		ch := make(chan prometheus.Metric, 100)
		c.Collect(ch)
		close(ch)
		var ms []prometheus.Metric
		for m := range ch {
			if _, ok := m.(*cachedMetric); ok {
				ms = append(ms, m)
			}
		}
		return ms
	}
	a, b := collect(), collect()
	if len(a) == 0 || len(a) != len(b) {
		t.Fatalf("%d then %d cached series", len(a), len(b))
	}
	same := map[prometheus.Metric]bool{}
	for _, m := range a {
		same[m] = true
	}
	for _, m := range b {
		if !same[m] {
			t.Errorf("series %v made again with nothing changed", m.Desc())
		}
	}
	w.mu.Lock()
	w.l.Maps[1].Memlock, w.l.Maps[1].Entries = 12000, 30
	w.l.Holders = w.l.Holders[1:] // the owner is now "child"
	w.mu.Unlock()
	w.advance(2 * time.Second)
	if v, _ := gather(t, c, "kernel_bpf_map_memory_bytes", table); v != 12000 {
		t.Errorf("memory %v after a change, want 12000", v)
	}
	if v, _ := gather(t, c, "kernel_bpf_map_entries", table); v != 30 {
		t.Errorf("entries %v after a change, want 30", v)
	}
	if v, n := gather(t, c, "kernel_bpf_program_runs_total", map[string]string{"id": "10", "owner": "child"}); v != 0 || n != 2 {
		t.Errorf("program 10's runs with its new owner: %v (%d series), want 0 (2 series)", v, n)
	}
	if n := len(released); n != 0 {
		t.Errorf("FirstListed called %d more times, want once in all", n)
	}
}

// SPDX-License-Identifier: Apache-2.0

package bpfstats

import (
	"testing"
	"time"
)

// TestUsage checks the per-interval figures of top bpf: runs, run time,
// rates and owner between two listings, a new program at 0, and the sort
// by CPU.
func TestUsage(t *testing.T) {
	prev := &Listing{Programs: []Program{{ID: 1, Name: "a", RunTimeNs: 1000, RunCount: 10}, {ID: 2, Name: "b", RunTimeNs: 5000, RunCount: 1}}}
	cur := &Listing{
		Programs: []Program{{ID: 1, Name: "a", Type: 5, RunTimeNs: 3000, RunCount: 20}, {ID: 2, Name: "b", RunTimeNs: 9000, RunCount: 2}, {ID: 3, Name: "new", RunTimeNs: 7e9, RunCount: 7}},
		Holders:  []Holder{{PID: 9, Kind: HoldsProgram, ID: 2, Comm: "agent"}},
	}
	u := Usage(prev, cur, 2*time.Second)
	if len(u) != 3 || u[0].ID != 2 || u[1].ID != 1 || u[2].ID != 3 {
		t.Fatalf("order %+v", u)
	}
	if b := u[0]; b.Runs != 1 || b.RunTime != 4000 || b.NsPerRun != 4000 || b.CPU != 4000/2e9 || b.PerSecond != 0.5 || b.Owner != "agent" {
		t.Errorf("b: %+v", b)
	}
	if a := u[1]; a.Runs != 10 || a.NsPerRun != 200 || a.Type != "tracepoint" || a.Owner != "" {
		t.Errorf("a: %+v", a)
	}
	if n := u[2]; n.Runs != 0 || n.CPU != 0 {
		t.Errorf("a program new since the previous listing counts from 0: %+v", n)
	}
}

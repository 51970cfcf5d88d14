// SPDX-License-Identifier: Apache-2.0

package web

import (
	"sync"
	"time"

	"github.com/cilium/ebpf"

	"github.com/kernel-exporter/kernel_exporter/collector"
)

// runTimes measures each config's BPF cost per event, in nanoseconds:
//
//	ns/event = Σ Δrun_time / Σ Δrun_count   over the config's attached programs
//
// between the previous page view and this one (at the first view of a
// program, since its load). The kernel counts run time and run count
// together, and only while run-time statistics are on (the CPU budget's
// windows, --bpf.stats or kernel.bpf_stats_enabled=1), so the ratio is the
// mean cost of the runs counted, whatever the share of time statistics were
// on. A config none of whose programs ran under statistics since the last
// view keeps the last value measured.
//
// It holds one reading per attached program and one value per config that
// is up: the maps are rebuilt at every view from the programs and configs
// shown, so they never hold more than those.
type runTimes struct {
	// read returns a program's run time and count ((*ebpf.Program).Stats;
	// a variable for tests).
	read func(*ebpf.Program) (time.Duration, uint64, error)

	mu   sync.Mutex
	prev map[*ebpf.Program]progReading
	last map[string]float64 // ns/event by config, last measured
}

type progReading struct {
	runTime time.Duration
	runs    uint64
}

func newRunTimes() *runTimes {
	return &runTimes{read: func(p *ebpf.Program) (time.Duration, uint64, error) {
		st, err := p.Stats()
		if err != nil {
			return 0, 0, err
		}
		return st.Runtime, st.RunCount, nil
	}}
}

// update reads the attached programs of the configs that are up and
// returns ns/event by config; a config with no value has had no run
// counted yet.
func (r *runTimes) update(states []collector.State) map[string]float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	prev := r.prev
	r.prev = make(map[*ebpf.Program]progReading, len(prev))
	last := r.last
	r.last = make(map[string]float64, len(last))
	for _, st := range states {
		if !st.Up {
			continue
		}
		var dt time.Duration
		var dn uint64
		for _, p := range st.Programs {
			if !p.Attached || p.Prog == nil {
				continue
			}
			t, n, err := r.read(p.Prog)
			if err != nil {
				continue
			}
			cur := progReading{runTime: t, runs: n}
			r.prev[p.Prog] = cur
			old := prev[p.Prog]
			if n < old.runs || t < old.runTime {
				old = progReading{} // not the program read before
			}
			dt += t - old.runTime
			dn += n - old.runs
		}
		if dn > 0 {
			r.last[st.Name] = float64(dt.Nanoseconds()) / float64(dn)
		} else if v, ok := last[st.Name]; ok {
			r.last[st.Name] = v
		}
	}
	out := make(map[string]float64, len(r.last))
	for n, v := range r.last {
		out[n] = v
	}
	return out
}

// SPDX-License-Identifier: Apache-2.0

package bpfstats

import (
	"cmp"
	"slices"
	"time"
)

// ProgramUsage is what one program ran between two listings.
type ProgramUsage struct {
	ID         uint32
	Name, Type string
	// Owner is the command name of its lowest-pid holder ("" when no
	// process holds it).
	Owner string
	// Runs and RunTime are the runs and the run time of the interval
	// (0 for a program new since the previous listing); PerSecond the
	// runs per second; NsPerRun the mean run time (0 without runs); CPU
	// the CPU seconds per second, summed over CPUs.
	Runs      uint64
	RunTime   time.Duration
	PerSecond float64
	NsPerRun  float64
	CPU       float64
}

// Usage returns what every program of cur ran since prev (nil: nothing
// yet), elapsed earlier, sorted by CPU, then runs per second (highest
// first), then id. Only statistics counted while they were on are seen.
func Usage(prev, cur *Listing, elapsed time.Duration) []ProgramUsage {
	holders := programHolders(cur)
	out := make([]ProgramUsage, 0, len(cur.Programs))
	for _, p := range cur.Programs {
		u := ProgramUsage{ID: p.ID, Name: p.Name, Type: ProgType(p.Type), Owner: holders[p.ID].Comm}
		if prev != nil {
			if q := prev.Program(p.ID); q != nil && p.RunCount >= q.RunCount && p.RunTimeNs >= q.RunTimeNs {
				u.Runs, u.RunTime = p.RunCount-q.RunCount, time.Duration(p.RunTimeNs-q.RunTimeNs)
			}
		}
		if u.Runs > 0 {
			u.NsPerRun = float64(u.RunTime) / float64(u.Runs)
		}
		if elapsed > 0 {
			u.PerSecond = float64(u.Runs) / elapsed.Seconds()
			u.CPU = float64(u.RunTime) / float64(elapsed)
		}
		out = append(out, u)
	}
	slices.SortFunc(out, func(a, b ProgramUsage) int {
		if c := cmp.Compare(b.CPU, a.CPU); c != 0 {
			return c
		}
		if c := cmp.Compare(b.PerSecond, a.PerSecond); c != 0 {
			return c
		}
		return cmpU32(a.ID, b.ID)
	})
	return out
}

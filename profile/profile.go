// SPDX-License-Identifier: Apache-2.0

package profile

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/kernel-exporter/kernel_exporter/profile/symbolize"
)

// Kind is what a profile measures.
type Kind string

// The kinds of profile.
const (
	// CPU: on-CPU samples, Sample.Value in samples.
	CPU Kind = "cpu"
	// OffCPU: time blocked off the CPU, Sample.Value in nanoseconds.
	OffCPU Kind = "offcpu"
)

// Frame is one resolved stack frame (see symbolize.Frame). Frames are
// shared between the samples of a profile: read-only.
type Frame = symbolize.Frame

// Profile is a set of samples with resolved stacks: what Session.Run
// returns, what ReadFile reads back, and what the writers, Diff and Tree
// take.
type Profile struct {
	Kind Kind
	// Event is what was sampled: "cpu-clock" (software), "cycles"
	// (hardware), "sched_switch" (off-CPU), or what a file read said.
	Event string
	// Frequency is the sampling frequency per CPU (CPU profiles), 0 when
	// unknown.
	Frequency int
	// Start and Duration of the collection.
	Start    time.Time
	Duration time.Duration
	// Samples, one per distinct (process, comm, cgroup, stack), in no
	// particular order.
	Samples []Sample
	// Stats of the collection (zero for a profile read from a file).
	Stats Stats
}

// Sample is a count of identical stacks.
type Sample struct {
	// PID is the process (thread group) id, 0 for the idle tasks; Comm the
	// thread's name (TASK_COMM_LEN, 15 bytes at most); Cgroup its cgroup
	// v2 id (the inode of its cgroup directory).
	PID    uint32
	Comm   string
	Cgroup uint64
	// Stack is innermost first: kernel frames, then user frames.
	Stack []*Frame
	// Value is the weight: samples for a CPU profile, nanoseconds off the
	// CPU for an off-CPU one. Count is the number of samples (CPU) or of
	// blocks (off-CPU).
	Value, Count int64
}

// Stats describe a collection: what the BPF programs counted and left out,
// and how many frames resolved.
type Stats struct {
	// Samples counted by the BPF program (CPU: samples; off-CPU: blocks at
	// least the minimum block time, and blocks shorter, in Short).
	Samples, Short uint64
	// Idle samples (the idle tasks; counted only with Filter.IncludeIdle),
	// Filtered (by pid or cgroup in the kernel).
	Idle, Filtered uint64
	// KernelStacksLost, UserStacksLost: samples whose stack could not be
	// stored (the stacks map could not take it); they are kept with the
	// stack they have. StacksMissing: stacks pushed out of the stacks map
	// before they were read. CountsFull: samples not counted, the counts
	// map was full; StartFull: off-CPU switch-outs not recorded.
	KernelStacksLost, UserStacksLost, StacksMissing, CountsFull, StartFull uint64
	// Symbols resolved (see symbolize.Stats).
	Symbols symbolize.Stats
}

// Unit returns the unit of Sample.Value: "samples" or "nanoseconds".
func (p *Profile) Unit() string {
	if p.Kind == OffCPU {
		return "nanoseconds"
	}
	return "samples"
}

// Total returns the sum of the samples' values.
func (p *Profile) Total() int64 {
	var n int64
	for i := range p.Samples {
		n += p.Samples[i].Value
	}
	return n
}

// Period is the CPU time one sample stands for in nanoseconds (1e9 /
// Frequency), 0 when the frequency is unknown or the profile is off-CPU.
func (p *Profile) Period() int64 {
	if p.Kind != CPU || p.Frequency <= 0 {
		return 0
	}
	return int64(time.Second) / int64(p.Frequency)
}

// Filter returns a new profile with the samples of p that f keeps (see
// Filter). Frames are shared with p.
func (p *Profile) Filter(f Filter) *Profile {
	out := *p
	out.Samples = nil
	for _, s := range p.Samples {
		if s, ok := f.apply(s); ok {
			out.Samples = append(out.Samples, s)
		}
	}
	return &out
}

// apply returns s as f keeps it (stack cut to kernel or user frames), and
// false when f leaves it out.
func (f Filter) apply(s Sample) (Sample, bool) {
	if s.PID == 0 && !f.IncludeIdle && len(f.PIDs) == 0 {
		return s, false
	}
	if len(f.PIDs) > 0 && !slices.Contains(f.PIDs, s.PID) {
		return s, false
	}
	if len(f.Comms) > 0 && !slices.Contains(f.Comms, s.Comm) {
		return s, false
	}
	if len(f.Cgroups) > 0 && !slices.Contains(f.Cgroups, s.Cgroup) {
		return s, false
	}
	if f.KernelOnly || f.UserOnly {
		var stack []*Frame
		for _, fr := range s.Stack {
			if fr.Kernel == f.KernelOnly {
				stack = append(stack, fr)
			}
		}
		if len(stack) == 0 {
			return s, false
		}
		s.Stack = stack
	}
	return s, true
}

// Merge adds the samples of q to p (identical process, comm, cgroup and
// stack add up; others are appended).
func (p *Profile) Merge(q *Profile) {
	a := newAggregator(p)
	for i := range p.Samples {
		a.idx[sampleKey(&p.Samples[i])] = i
	}
	for _, s := range q.Samples {
		a.add(sampleKey(&s), s)
	}
	p.Duration += q.Duration
}

// aggregator adds samples to a profile, summing those of one key.
type aggregator struct {
	p   *Profile
	idx map[string]int // key -> index in p.Samples
}

func newAggregator(p *Profile) *aggregator { return &aggregator{p: p, idx: map[string]int{}} }

// add adds s under key.
func (a *aggregator) add(key string, s Sample) {
	if i, ok := a.idx[key]; ok {
		a.p.Samples[i].Value += s.Value
		a.p.Samples[i].Count += s.Count
		return
	}
	a.idx[key] = len(a.p.Samples)
	a.p.Samples = append(a.p.Samples, s)
}

// sampleKey identifies a sample by process, comm, cgroup and the frames of
// its stack (by name and module).
func sampleKey(s *Sample) string {
	var b strings.Builder
	b.Grow(32 + len(s.Stack)*24)
	b.WriteString(s.Comm)
	b.WriteByte(0)
	var n [20]byte
	for _, v := range []uint64{uint64(s.PID), s.Cgroup} {
		for i := range 8 {
			n[i] = byte(v >> (8 * i))
		}
		b.Write(n[:8])
	}
	for _, f := range s.Stack {
		if f.Kernel {
			b.WriteByte(1)
		} else {
			b.WriteByte(2)
		}
		b.WriteString(f.Module)
		b.WriteByte(0)
		b.WriteString(f.Function)
		b.WriteByte(0)
	}
	return b.String()
}

// Sort orders the samples by value, highest first, then by comm and pid:
// a stable order for writers and tests.
func (p *Profile) Sort() {
	slices.SortStableFunc(p.Samples, func(a, b Sample) int {
		return cmp.Or(cmp.Compare(b.Value, a.Value), strings.Compare(a.Comm, b.Comm), cmp.Compare(a.PID, b.PID))
	})
}

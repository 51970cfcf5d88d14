// SPDX-License-Identifier: Apache-2.0

package profile

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/budget"
	"github.com/kernel-exporter/kernel_exporter/loader"
)

// object is bpf/profile.bpf.o, built from bpf/profile.bpf.c by make bpf.
//
//go:embed bpf/profile.bpf.o
var object []byte

// The events a profile samples.
const (
	EventCPUClock    = "cpu-clock"    // software: works on every machine
	EventCycles      = "cycles"       // hardware: where the machine has a PMU
	EventSchedSwitch = "sched_switch" // off-CPU: tp_btf/sched_switch
)

var (
	specOnce sync.Once
	spec     *ebpf.CollectionSpec
	specErr  error
)

// loadSpec returns a copy of the object's spec, parsed once.
func loadSpec() (*ebpf.CollectionSpec, error) {
	specOnce.Do(func() {
		spec, specErr = ebpf.LoadCollectionSpecFromReader(bytes.NewReader(object))
	})
	if specErr != nil {
		return nil, fmt.Errorf("profile BPF object: %w", specErr)
	}
	return spec.Copy(), nil
}

// rawKey is struct sample_key of profile.bpf.c (48 bytes).
type rawKey struct {
	PID    uint32
	Flags  uint32
	KStack uint64
	UStack uint64
	Cgroup uint64
	Comm   [16]byte
}

// rawValue is struct sample_value.
type rawValue struct {
	Value, Count uint64
}

// maxDepth is MAX_DEPTH of profile.bpf.c: frames per stack.
const maxDepth = 127

// The indexes of the stats map (enum profile_stat).
const (
	statSamples = iota
	statIdle
	statFiltered
	statKStackLost
	statUStackLost
	statCountsFull
	statStartFull
	statShort
	statMax
)

// profileMaps are the maps both programs use.
type profileMaps struct {
	Counts0 *ebpf.Map      `ebpf:"counts_0"`
	Counts1 *ebpf.Map      `ebpf:"counts_1"`
	Stacks  *ebpf.Map      `ebpf:"stacks"`
	Scratch *ebpf.Map      `ebpf:"scratch"`
	PIDs    *ebpf.Map      `ebpf:"pids"`
	Cgroups *ebpf.Map      `ebpf:"cgroups"`
	Stats   *ebpf.Map      `ebpf:"stats"`
	Bss     *ebpf.Map      `ebpf:".bss"`
	Gen     *ebpf.Variable `ebpf:"gen"`
}

type cpuObjects struct {
	Prog *ebpf.Program `ebpf:"on_cpu"`
	profileMaps
}

type offCPUObjects struct {
	Prog  *ebpf.Program `ebpf:"off_cpu"`
	Start *ebpf.Map     `ebpf:"start"`
	profileMaps
}

// objects is what a session loaded.
type objects struct {
	prog  *ebpf.Program
	start *ebpf.Map
	profileMaps
}

func (o *objects) Close() {
	for _, c := range []interface{ Close() error }{o.prog, o.start, o.Counts0, o.Counts1, o.Stacks, o.Scratch, o.PIDs, o.Cgroups, o.Stats, o.Bss} {
		if c != nil && !isNil(c) {
			c.Close()
		}
	}
}

func isNil(c interface{ Close() error }) bool {
	switch v := c.(type) {
	case *ebpf.Map:
		return v == nil
	case *ebpf.Program:
		return v == nil
	}
	return false
}

// mapNames lists the maps a kind loads (for the memory estimate).
func mapNames(k Kind) []string {
	names := []string{"counts_0", "counts_1", "stacks", "scratch", "pids", "cgroups", "stats", ".bss", ".rodata"}
	if k == OffCPU {
		names = append(names, "start")
	}
	return names
}

// mapSizes returns the entries of the counts maps (each generation) and
// of the stacks map. On-CPU, at most Frequency × CPUs × Interval samples
// land in a counts map between two reads; the stacks map keeps 4 times
// that, so that a stack is read before newer ones push it out (the LRU
// also keeps 256 per CPU: each CPU holds a share of the free elements).
// Off-CPU, blocks depend on the load, not the frequency: 16384 keys per
// interval, and 8192 stacks for the profile.
func mapSizes(o Options, cpus int) (keys, stacks int) {
	perInterval := o.Frequency * cpus * int((o.Interval+time.Second-1)/time.Second)
	if o.Kind == CPU {
		keys = clampPow2(2*perInterval, 1024, 1<<16)
		stacks = clampPow2(max(4*perInterval, 256*cpus), 1024, 1<<16)
	} else {
		keys, stacks = 16384, 8192
	}
	if o.MaxKeys > 0 {
		keys = o.MaxKeys
	}
	if o.MaxStacks > 0 {
		stacks = o.MaxStacks
	}
	return keys, stacks
}

func clampPow2(n, lo, hi int) int {
	if n <= lo {
		return lo
	}
	p := 1 << bits.Len(uint(n-1))
	return min(p, hi)
}

// prepare sets the spec's constants and map sizes for o and returns the
// estimated kernel memory of the maps it will load.
func prepare(sp *ebpf.CollectionSpec, o Options, cpus int) (budget.Estimate, error) {
	set := func(name string, v any) error {
		vs := sp.Variables[name]
		if vs == nil {
			return fmt.Errorf("profile BPF object: no variable %s", name)
		}
		if err := vs.Set(v); err != nil {
			return fmt.Errorf("profile BPF object: set %s: %w", name, err)
		}
		return nil
	}
	for _, c := range []struct {
		name string
		v    any
	}{
		{"skip_idle", !o.Filter.IncludeIdle},
		{"kernel_stacks", !o.Filter.UserOnly},
		{"user_stacks", !o.Filter.KernelOnly},
		{"filter_pids", len(o.Filter.PIDs) > 0},
		{"filter_cgroups", len(o.Filter.Cgroups) > 0},
		{"min_block_ns", uint64(o.MinBlock)},
	} {
		if err := set(c.name, c.v); err != nil {
			return budget.Estimate{}, err
		}
	}
	keys, stacks := mapSizes(o, cpus)
	for name, n := range map[string]int{"counts_0": keys, "counts_1": keys, "stacks": stacks} {
		ms := sp.Maps[name]
		if ms == nil {
			return budget.Estimate{}, fmt.Errorf("profile BPF object: no map %s", name)
		}
		ms.MaxEntries = uint32(n)
	}
	var est budget.Estimate
	for _, name := range mapNames(o.Kind) {
		ms := sp.Maps[name]
		if ms == nil {
			continue
		}
		b := budget.EstimateMap(ms, cpus)
		est.Maps = append(est.Maps, budget.MapEstimate{Name: name, Type: ms.Type, Bytes: b})
		est.Total += b
	}
	return est, nil
}

// load loads the program of o's kind and its maps. Kernels before 5.11
// charge BPF maps to RLIMIT_MEMLOCK (64 KiB by default): the limit is
// lifted first, as loader.Load does (the profile and top cpu commands load
// nothing else); later kernels need nothing. Where it cannot be lifted
// (no CAP_SYS_RESOURCE), the map creation's error says so.
func load(sp *ebpf.CollectionSpec, o Options) (*objects, error) {
	_ = rlimit.RemoveMemlock()
	var objs objects
	var err error
	if o.Kind == CPU {
		var c cpuObjects
		err = sp.LoadAndAssign(&c, nil)
		objs = objects{prog: c.Prog, profileMaps: c.profileMaps}
	} else {
		var c offCPUObjects
		err = sp.LoadAndAssign(&c, nil)
		objs = objects{prog: c.Prog, start: c.Start, profileMaps: c.profileMaps}
	}
	if err != nil {
		return nil, fmt.Errorf("load the %s profile program: %w", o.Kind, loader.ExplainPermission(sp, err))
	}
	one := uint8(1)
	for _, pid := range o.Filter.PIDs {
		if err := objs.PIDs.Put(pid, one); err != nil {
			objs.Close()
			return nil, fmt.Errorf("pid filter: %w", err)
		}
	}
	for _, cg := range o.Filter.Cgroups {
		if err := objs.Cgroups.Put(cg, one); err != nil {
			objs.Close()
			return nil, fmt.Errorf("cgroup filter: %w", err)
		}
	}
	return &objs, nil
}

// attach attaches the loaded program: on-CPU to the cycles event on every
// CPU, or cpu-clock where the machine has no PMU; off-CPU to
// tp_btf/sched_switch. It returns the link and the event.
func attach(objs *objects, o Options) (link.Link, string, error) {
	if o.Kind == OffCPU {
		l, err := link.AttachTracing(link.TracingOptions{Program: objs.prog, AttachType: ebpf.AttachTraceRawTp})
		if err != nil {
			return nil, "", fmt.Errorf("attach the off-CPU program to tp_btf/sched_switch: %w", err)
		}
		return l, EventSchedSwitch, nil
	}
	events := []loader.PerfEvent{
		{Type: unix.PERF_TYPE_HARDWARE, Config: unix.PERF_COUNT_HW_CPU_CYCLES, Name: EventCycles},
		{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CPU_CLOCK, Name: EventCPUClock},
	}
	var errs []error
	for _, ev := range events {
		if o.EventOverride != "" && ev.Name != o.EventOverride {
			continue
		}
		ev.Frequency = uint64(o.Frequency)
		l, err := loader.AttachPerfEvent(objs.prog, ev)
		if err == nil {
			return l, ev.Name, nil
		}
		errs = append(errs, err)
		if !errors.Is(err, loader.ErrUnsupported) {
			break
		}
	}
	return nil, "", fmt.Errorf("attach the on-CPU program: %w", errors.Join(errs...))
}

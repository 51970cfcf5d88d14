// SPDX-License-Identifier: Apache-2.0

package profile

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/kernel-exporter/kernel_exporter/budget"
	"github.com/kernel-exporter/kernel_exporter/profile/symbolize"
)

// Defaults and bounds of Options.
const (
	// DefaultFrequency is the default sampling frequency per CPU: Parca
	// agent's for always-on profiling, off the 10 ms timer tick (a round
	// frequency samples in lockstep with periodic work).
	DefaultFrequency = 19
	// MaxFrequency bounds Options.Frequency (perf's -F 999 is the most an
	// investigation needs; the kernel's cap is kernel.perf_event_max_sample_rate).
	MaxFrequency = 999
	// DefaultDuration is the default profile length of the profile command
	// and of /profile/* without ?seconds.
	DefaultDuration = 30 * time.Second
	// MaxDuration bounds a profile's length (Options.Duration).
	MaxDuration = time.Hour
	// DefaultMinBlock is the default minimum off-CPU time counted.
	DefaultMinBlock = time.Millisecond
	// MaxMinBlock bounds Options.MinBlock.
	MaxMinBlock = time.Minute
	// DefaultInterval is how often the maps are read and emptied while a
	// profile runs; MinInterval and MaxInterval bound it.
	DefaultInterval = time.Second
	MinInterval     = 100 * time.Millisecond
	MaxInterval     = time.Minute
	// MaxFilterValues bounds the pids, comms and cgroups of a Filter (the
	// kernel's filter maps hold 1024 each).
	MaxFilterValues = 1024
	// MaxStackEntries bounds Options.MaxStacks and Options.MaxKeys.
	MaxStackEntries = 1 << 20
)

// Options configure a Session.
type Options struct {
	// Kind is CPU or OffCPU.
	Kind Kind
	// Duration of the profile, at most MaxDuration; 0 means until the
	// context of Run is done (a live view).
	Duration time.Duration
	// Frequency of on-CPU samples per second per CPU (DefaultFrequency
	// when 0), 1 to MaxFrequency.
	Frequency int
	// MinBlock is the shortest off-CPU time counted (DefaultMinBlock when
	// 0); shorter blocks are counted in Stats.Short only.
	MinBlock time.Duration
	// Filter selects what is collected. PIDs, Cgroups, KernelOnly,
	// UserOnly and IncludeIdle are applied in the kernel (what is left out
	// costs no stack walk); Comms when the maps are read.
	Filter Filter
	// Interval between reads of the maps (DefaultInterval when 0).
	Interval time.Duration
	// MaxKeys bounds the distinct keys counted per interval (counts map
	// entries); MaxStacks the stacks stored per interval (on-CPU) or per
	// profile (off-CPU). 0 chooses from the frequency and the number of
	// CPUs (see mapSizes).
	MaxKeys, MaxStacks int
	// Symbolizer resolves the stacks; nil makes one for this session
	// (sharing one keeps the kernel and ELF symbol tables between
	// profiles).
	Symbolizer *symbolize.Symbolizer
	// Ledger is the memory budget the session's maps are booked in
	// (exporter.Exporter.Memory), under the name Name(); nil: a ledger of
	// MemoryBudget bytes (0: no budget).
	Ledger       *budget.Ledger
	MemoryBudget uint64
	// OnInterval, when set, is called after each read of the maps with
	// the profile of that interval alone (for live views: top cpu, a UI).
	// It runs on the session's goroutine: it must return quickly.
	OnInterval func(*Profile)
	// Discard keeps no profile: Run returns one without samples, and
	// only OnInterval sees them (a live view that runs for long).
	Discard bool
	// OnStart, when set, is called once the programs are attached, with
	// them (for the CPU budget: Session.Programs).
	OnStart func()
	Logger  *slog.Logger
	// EventOverride forces the on-CPU event ("cpu-clock" or "cycles")
	// instead of trying cycles first; for tests.
	EventOverride string
}

// Filter selects samples. The zero value keeps every sample but the idle
// tasks'.
type Filter struct {
	// PIDs (thread group ids), Comms (exact thread names) and Cgroups
	// (cgroup v2 ids, see CgroupID): when not empty, only samples that
	// match one of each are kept.
	PIDs    []uint32
	Comms   []string
	Cgroups []uint64
	// KernelOnly keeps kernel frames only (samples with none are left
	// out); UserOnly user frames only. Not both.
	KernelOnly, UserOnly bool
	// IncludeIdle keeps the samples of the idle tasks (pid 0, swapper/N):
	// a CPU with nothing to run. Left out by default, as flame graphs of
	// busy hosts leave out the cpuidle frames.
	IncludeIdle bool
}

// Check returns an error naming the field for a filter out of bounds.
func (f Filter) Check() error {
	switch {
	case f.KernelOnly && f.UserOnly:
		return errors.New("kernel-only and user-only exclude each other")
	case len(f.PIDs) > MaxFilterValues:
		return fmt.Errorf("%d pids: at most %d", len(f.PIDs), MaxFilterValues)
	case len(f.Comms) > MaxFilterValues:
		return fmt.Errorf("%d comms: at most %d", len(f.Comms), MaxFilterValues)
	case len(f.Cgroups) > MaxFilterValues:
		return fmt.Errorf("%d cgroups: at most %d", len(f.Cgroups), MaxFilterValues)
	}
	for _, c := range f.Comms {
		if c == "" || len(c) > 15 {
			return fmt.Errorf("comm %q: must be 1 to 15 bytes (TASK_COMM_LEN)", c)
		}
	}
	return nil
}

// withDefaults returns o with its zero values set, or an error naming the
// first field out of bounds.
func (o Options) withDefaults() (Options, error) {
	if o.Kind != CPU && o.Kind != OffCPU {
		return o, fmt.Errorf("profile kind %q: want %q or %q", o.Kind, CPU, OffCPU)
	}
	if o.Frequency == 0 {
		o.Frequency = DefaultFrequency
	}
	if o.MinBlock == 0 {
		o.MinBlock = DefaultMinBlock
	}
	if o.Interval == 0 {
		o.Interval = DefaultInterval
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	switch {
	case o.Duration < 0 || o.Duration > MaxDuration:
		return o, fmt.Errorf("duration %v: must be 0 (until stopped) to %v", o.Duration, MaxDuration)
	case o.Frequency < 1 || o.Frequency > MaxFrequency:
		return o, fmt.Errorf("frequency %d: must be 1 to %d samples per second", o.Frequency, MaxFrequency)
	case o.MinBlock < 0 || o.MinBlock > MaxMinBlock:
		return o, fmt.Errorf("minimum block time %v: must be 0 to %v", o.MinBlock, MaxMinBlock)
	case o.Interval < MinInterval || o.Interval > MaxInterval:
		return o, fmt.Errorf("interval %v: must be %v to %v", o.Interval, MinInterval, MaxInterval)
	case o.MaxKeys < 0 || o.MaxKeys > MaxStackEntries:
		return o, fmt.Errorf("max keys %d: must be 0 (automatic) to %d", o.MaxKeys, MaxStackEntries)
	case o.MaxStacks < 0 || o.MaxStacks > MaxStackEntries:
		return o, fmt.Errorf("max stacks %d: must be 0 (automatic) to %d", o.MaxStacks, MaxStackEntries)
	case o.EventOverride != "" && o.EventOverride != EventCPUClock && o.EventOverride != EventCycles:
		return o, fmt.Errorf("event %q: want %q or %q", o.EventOverride, EventCPUClock, EventCycles)
	}
	if err := o.Filter.Check(); err != nil {
		return o, fmt.Errorf("filter: %w", err)
	}
	return o, nil
}

// Name is the name the session's maps are booked under in the memory
// budget and its programs measured under in the CPU budget: "profile:cpu"
// or "profile:offcpu" (the colon keeps it apart from config names).
func (o Options) Name() string { return "profile:" + string(o.Kind) }

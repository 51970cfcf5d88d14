// SPDX-License-Identifier: Apache-2.0

package loader

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/bounded"
	"github.com/kernel-exporter/kernel_exporter/config"
)

// perfTypes maps config perf event types to perf_event_attr.type.
var perfTypes = map[string]uint32{
	config.PerfSoftware: unix.PERF_TYPE_SOFTWARE,
	config.PerfHardware: unix.PERF_TYPE_HARDWARE,
	config.PerfHWCache:  unix.PERF_TYPE_HW_CACHE,
}

// attachPerfEvents opens each perf event listed for a perf_event program on
// every online CPU (all processes: pid -1) and attaches the program to it.
// A "perf_event/type=...,config=..." section carries its one event in its
// name instead (see parsePerfSection). CPUs that come online later are not
// covered.
func attachPerfEvents(ps *ebpf.ProgramSpec, prog *ebpf.Program, env *attachEnv) (link.Link, error) {
	var specs []perfSpec
	if _, params, _ := strings.Cut(ps.SectionName, "/"); params != "" {
		s, err := parsePerfSection(ps.SectionName)
		if err != nil {
			return nil, err
		}
		specs = append(specs, s)
	}
	for _, ev := range env.perfEvents(ps.Name) {
		evConfig, ok := config.LookupPerfEvent(ev.Type, ev.Name)
		if !ok {
			return nil, fmt.Errorf("unknown %s perf event %q", ev.Type, ev.Name)
		}
		specs = append(specs, perfSpec{
			typ: perfTypes[ev.Type], config: evConfig, frequency: ev.Frequency, period: ev.Period,
			what: fmt.Sprintf("%s event %q", ev.Type, ev.Name),
		})
	}
	if len(specs) == 0 {
		return nil, fmt.Errorf("program %s has no target: list it under perf_events in the config, or give the event in its section, as in perf_event/type=1,config=0,frequency=99", ps.Name)
	}
	cpus, err := onlineCPUs()
	if err != nil {
		return nil, err
	}
	ml := &multiLink{}
	for _, s := range specs {
		for _, cpu := range cpus {
			if err := attachPerfEvent(s, cpu, prog, ml); err != nil {
				ml.Close()
				return nil, err
			}
		}
	}
	return ml, nil
}

// attachPerfEvent opens one event on one CPU, disabled, attaches prog and
// enables the event. The fd and the link are added to ml.
func attachPerfEvent(ev perfSpec, cpu int, prog *ebpf.Program, ml *multiLink) error {
	attr := unix.PerfEventAttr{
		Type:   ev.typ,
		Config: ev.config,
		Bits:   unix.PerfBitDisabled,
		Sample: ev.period,
	}
	attr.Size = uint32(unsafe.Sizeof(attr))
	if ev.frequency != 0 {
		attr.Sample = ev.frequency
		attr.Bits |= unix.PerfBitFreq
	}
	fd, err := unix.PerfEventOpen(&attr, -1, cpu, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		return perfOpenError(ev, cpu, err)
	}
	ml.closers = append(ml.closers, func() error { return unix.Close(fd) })
	// A BPF link (5.15+) detaches when closed even if the fd leaks into a
	// child; older kernels take the program through an ioctl.
	l, lerr := link.AttachRawLink(link.RawLinkOptions{Target: fd, Program: prog, Attach: ebpf.AttachPerfEvent})
	if lerr == nil {
		ml.add(l)
	} else if err := unix.IoctlSetInt(fd, unix.PERF_EVENT_IOC_SET_BPF, prog.FD()); err != nil {
		return fmt.Errorf("perf %s on CPU %d: attach program: BPF link: %v; ioctl: %w", ev.what, cpu, lerr, err)
	}
	if err := unix.IoctlSetInt(fd, unix.PERF_EVENT_IOC_ENABLE, 0); err != nil {
		return fmt.Errorf("perf %s on CPU %d: enable: %w", ev.what, cpu, err)
	}
	return nil
}

// perfOpenError explains a failed perf_event_open. Hardware events on a
// machine without an exposed PMU (most VMs, this CI) fail with ENOENT,
// ENODEV or EOPNOTSUPP: that is a "not supported" status, not a bug.
func perfOpenError(ev perfSpec, cpu int, err error) error {
	what := fmt.Sprintf("cannot open %s on CPU %d", ev.what, cpu)
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENODEV), errors.Is(err, unix.EOPNOTSUPP):
		switch ev.typ {
		case unix.PERF_TYPE_SOFTWARE:
			return fmt.Errorf("software perf events %w: %s: %v", ErrUnsupported, what, err)
		case unix.PERF_TYPE_TRACEPOINT, unix.PERF_TYPE_BREAKPOINT:
			return fmt.Errorf("%s perf events %w: %s: %v", perfTypeName(ev.typ), ErrUnsupported, what, err)
		}
		return fmt.Errorf("hardware perf events %w or machine (no PMU for this event): %s: %v", ErrUnsupported, what, err)
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		paranoid, _ := bounded.ReadFile("/proc/sys/kernel/perf_event_paranoid", "sysctl", bounded.MaxSmall)
		return fmt.Errorf("%s: %w (needs root or CAP_PERFMON; kernel.perf_event_paranoid=%s)", what, err, strings.TrimSpace(string(paranoid)))
	case errors.Is(err, unix.EINVAL) && ev.frequency != 0:
		max, _ := bounded.ReadFile("/proc/sys/kernel/perf_event_max_sample_rate", "sysctl", bounded.MaxSmall)
		return fmt.Errorf("%s: %w (frequency %d; kernel.perf_event_max_sample_rate=%s)", what, err, ev.frequency, strings.TrimSpace(string(max)))
	}
	return fmt.Errorf("%s: %w", what, err)
}

// OnlineCPUs lists the online CPUs from /sys/devices/system/cpu/online
// (e.g. "0-3,5").
func OnlineCPUs() ([]int, error) { return onlineCPUs() }

// onlineCPUs lists the online CPUs from /sys/devices/system/cpu/online
// (e.g. "0-3,5").
func onlineCPUs() ([]int, error) {
	b, err := bounded.ReadFile("/sys/devices/system/cpu/online", "CPU list", bounded.MaxSmall)
	if err != nil {
		return nil, fmt.Errorf("online CPUs: %w", err)
	}
	cpus, err := parseCPUList(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("online CPUs: %w", err)
	}
	return cpus, nil
}

// maxCPUs bounds the CPU numbers parseCPUList accepts (the kernel's
// NR_CPUS is at most 8192).
const maxCPUs = 1 << 16

// parseCPUList parses a kernel CPU list such as "0-3,5,7-8". CPU numbers
// must be below maxCPUs (65536).
func parseCPUList(s string) ([]int, error) {
	var cpus []int
	for _, r := range strings.Split(s, ",") {
		if r == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(r, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 || a >= maxCPUs {
			return nil, fmt.Errorf("bad CPU list %q", s)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a || b >= maxCPUs {
				return nil, fmt.Errorf("bad CPU list %q", s)
			}
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	if len(cpus) == 0 {
		return nil, fmt.Errorf("empty CPU list %q", s)
	}
	return cpus, nil
}

// PerfEvent is one perf event for AttachPerfEvent: perf_event_attr's type
// and config, sampled Frequency times a second on each CPU, named in
// errors by Name ("software event cpu-clock").
type PerfEvent struct {
	Type      uint32
	Config    uint64
	Frequency uint64
	Name      string
}

// AttachPerfEvent opens ev on every online CPU for every process, attaches
// prog (a perf_event program) to each and enables them, as a config's
// perf_events are (CPUs that come online later are not covered). Closing
// the link detaches prog and closes the events. An event the machine lacks
// (hardware events without a PMU) fails with an error wrapping
// ErrUnsupported; on any error nothing stays open.
func AttachPerfEvent(prog *ebpf.Program, ev PerfEvent) (link.Link, error) {
	if ev.Frequency == 0 || ev.Frequency > maxPerfFrequency {
		return nil, fmt.Errorf("perf %s: frequency %d: must be 1 to %d", ev.Name, ev.Frequency, maxPerfFrequency)
	}
	cpus, err := onlineCPUs()
	if err != nil {
		return nil, err
	}
	s := perfSpec{typ: ev.Type, config: ev.Config, frequency: ev.Frequency, what: ev.Name}
	ml := &multiLink{}
	for _, cpu := range cpus {
		if err := attachPerfEvent(s, cpu, prog, ml); err != nil {
			ml.Close()
			return nil, err
		}
	}
	return ml, nil
}

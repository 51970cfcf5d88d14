// SPDX-License-Identifier: Apache-2.0

package bpfstats

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/internal/selfcount"
	"github.com/kernel-exporter/kernel_exporter/loader"
)

// ProbePeriod is how often the statistics probe runs on each CPU.
const ProbePeriod = 20 * time.Millisecond

// StatsProbe tells whether BPF run-time statistics were on for a whole
// interval, whoever turned them on (kernel.bpf_stats_enabled, or any
// process holding a BPF_ENABLE_STATS descriptor, as bpftop does): a tiny
// perf_event program runs every ProbePeriod on each online CPU (a
// software cpu-clock event, which fires on idle CPUs too) and counts its
// own runs in a per-CPU array, always; the kernel counts its runs
// (run_cnt) only while statistics are on. Over an interval in which the
// kernel counted every one of the program's runs, statistics were on at
// each of them, so at least every ProbePeriod on every CPU: an off spell
// shorter than that can go unseen. Its cost: one run of a few
// instructions per CPU every 20 ms; measured on 2 CPUs (TestStatsProbe),
// 72 to 87 runs a second of 0.6 to 1.0 µs each, under 0.01% of a CPU.
type StatsProbe struct {
	prog  *ebpf.Program
	count *ebpf.Map
	links []link.Link
	cpus  int
}

// NewStatsProbe loads and attaches the probe: it needs CAP_BPF and
// CAP_PERFMON (a CPU-wide perf event), so it is made before the
// capability drop. Errors: the map, program or a CPU's perf event could
// not be made (then nothing is left loaded).
func NewStatsProbe() (*StatsProbe, error) {
	cpus, err := loader.OnlineCPUs()
	if err != nil {
		return nil, err
	}
	m, err := ebpf.NewMap(&ebpf.MapSpec{Name: "ke_stats_probe", Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 1})
	if err != nil {
		return nil, fmt.Errorf("statistics probe map: %w", err)
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "ke_stats_probe", Type: ebpf.PerfEvent, License: "GPL",
		Instructions: selfcount.Instructions(m)})
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("statistics probe program: %w", err)
	}
	p := &StatsProbe{prog: prog, count: m, cpus: len(cpus)}
	for _, cpu := range cpus {
		attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CPU_CLOCK,
			Sample: uint64(ProbePeriod.Nanoseconds())}
		fd, err := unix.PerfEventOpen(&attr, -1, cpu, -1, unix.PERF_FLAG_FD_CLOEXEC)
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("statistics probe: perf_event_open on CPU %d: %w", cpu, err)
		}
		l, err := loader.LinkPerfEvent(os.NewFile(uintptr(fd), "ke_stats_probe"), prog)
		if err != nil {
			unix.Close(fd)
			p.Close()
			return nil, fmt.Errorf("statistics probe on CPU %d: %w", cpu, err)
		}
		p.links = append(p.links, l)
	}
	return p, nil
}

// Read returns the probe's runs as the kernel counted them (run_cnt: only
// while statistics were on) and as it counted them itself (always), and
// the slack between the two that runs in flight at the read allow (one
// per CPU).
func (p *StatsProbe) Read() (kernelRuns, ownRuns, slack uint64, err error) {
	st, err := p.prog.Stats()
	if err != nil {
		return 0, 0, 0, err
	}
	var per []uint64
	if err := p.count.Lookup(uint32(0), &per); err != nil {
		return 0, 0, 0, err
	}
	for _, v := range per {
		ownRuns += v
	}
	return st.RunCount, ownRuns, uint64(p.cpus), nil
}

// Close detaches and unloads the probe.
func (p *StatsProbe) Close() error {
	var errs []error
	for _, l := range p.links {
		errs = append(errs, l.Close())
	}
	errs = append(errs, p.prog.Close(), p.count.Close())
	return errors.Join(errs...)
}

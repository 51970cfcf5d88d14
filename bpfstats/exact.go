// SPDX-License-Identifier: Apache-2.0

package bpfstats

import (
	"bytes"
	"os"
	"time"

	"github.com/cilium/ebpf"
)

// Exact intervals.
//
// The kernel counts a program's runs and run time (run_cnt, run_time_ns)
// only while BPF run-time statistics are on: while the static key
// bpf_stats_enabled_key is raised by kernel.bpf_stats_enabled=1 or by a
// BPF_ENABLE_STATS file descriptor held open (kernel/bpf/syscall.c). When
// they were on for the whole interval between two listings, the kernel's
// counts over it are exact and are served as they are; only the other
// intervals are estimated from the CPU budget's measuring windows.
//
// How the collector knows: statistics are on for the whole interval when
// this process holds them on for its life (Options.StatsOn, --bpf.stats),
// when kernel.bpf_stats_enabled reads 1 at both of its listings, or when
// the statistics probe (Options.Probe, probe.go) saw the kernel count
// every one of its runs over the interval, which no window of ours
// touched (or whose window began exact). The sysctl reads its own setting (bpf_stats_handler's
// saved_val), not the key's count: the windows the CPU budget opens with
// BPF_ENABLE_STATS, or another process' descriptor (bpftop's), never show
// in it, so a 1 is an admin's setting, not one of our windows; it cannot
// see the sysctl set to 0 and back to 1 between two listings (a scrape
// lists at most once a second, a window twice a period). The probe sees
// any holder, ours included, so it is asked only about intervals outside
// our windows: those inside are counted in full anyway (our window holds
// statistics on), and are exact when the run of exact intervals reached
// the window's start, as with the sysctl. It cannot see an off spell
// shorter than its period (20 ms).
//
// A program first seen while statistics are on starts from the kernel's
// counts as they are (since its load), as bpftool shows them; one seen
// before adds the kernel's counts over each exact interval to what it
// served, so that its counters never go back.

// sysctlPath is kernel.bpf_stats_enabled.
const sysctlPath = "/proc/sys/kernel/bpf_stats_enabled"

// SysctlStatsOn reports whether kernel.bpf_stats_enabled reads 1 (world
// readable: no capability needed); false when it cannot be read.
func SysctlStatsOn() bool {
	b, err := os.ReadFile(sysctlPath)
	return err == nil && bytes.Equal(bytes.TrimSpace(b), []byte("1"))
}

// statsOn reports whether statistics are on for good at this instant:
// --bpf.stats, or the sysctl.
func (c *Collector) statsOn() bool {
	if c.opts.StatsOn {
		return true
	}
	if c.opts.SysctlOn != nil {
		return c.opts.SysctlOn()
	}
	return SysctlStatsOn()
}

// Probe is what the collector asks whether statistics were on (see
// StatsProbe.Read).
type Probe interface {
	Read() (kernelRuns, ownRuns, slack uint64, err error)
}

// probeInterval reads the probe and reports whether it saw statistics on
// for the whole interval since its last reading (false without a probe,
// a reading, or a run of the probe). Called with c.mu held.
func (c *Collector) probeInterval() bool {
	if c.opts.Probe == nil {
		return false
	}
	k, o, slack, err := c.opts.Probe.Read()
	if err != nil {
		c.probeOK = false
		return false
	}
	on := c.probeOK && o > c.probeOwn && k >= c.probeKernel && (k-c.probeKernel)+slack >= o-c.probeOwn
	if c.probeOK && o == c.probeOwn {
		// Too short for the probe to have run: as the interval before
		// (an off spell this short is one the probe cannot see anyway).
		on = c.probeLast
	}
	c.probeOK, c.probeKernel, c.probeOwn, c.probeLast = true, k, o, on
	return on
}

// countExact adds to each program's counters what the kernel counted since
// the last listing when the interval between the two was exact (on at
// both, or the probe saw statistics on all of it outside our windows),
// and keeps listing l's raw counts, made at now, for the next. Called
// with c.mu held, after update took l in.
func (c *Collector) countExact(l *Listing, now time.Time, on, probed bool) {
	// The probe sees our windows' statistics too: an interval that
	// touches one of our windows is exact only when the run of exact
	// intervals reached the window's start (winExact), since the window
	// counts in full what is inside it.
	if inWindow := c.winOpen && !c.winStarting || c.prevInWin; inWindow {
		probed = c.winExact
	}
	c.prevInWin = c.winStarting || c.winOpen && !c.winEnding
	exact := on && c.lastOn && !c.listedPrev.IsZero() || probed
	prev := c.listedPrev
	// The counts served are the kernel's as they are after an exact
	// interval, or at a first listing while statistics are on.
	c.exactNow = exact || on && prev.IsZero()
	c.lastOn, c.listedPrev = on, now
	if exact {
		if c.exactFrom.IsZero() {
			c.exactFrom = prev
			if prev.IsZero() {
				c.exactFrom = now
			}
		}
		c.exactUntil = now
	} else {
		c.exactFrom = time.Time{}
	}
	listed := make(map[uint32]bool, len(l.Programs))
	for _, p := range l.Programs {
		listed[p.ID] = true
		st := c.progs[p.ID]
		if st == nil {
			continue
		}
		switch {
		case (on || exact) && !st.counted && !st.last.ok:
			// First seen while statistics are on: the kernel's counts
			// as they are.
			c.addRuns(st, float64(p.RunTimeNs), float64(p.RunCount))
		case exact && st.last.ok && p.RunTimeNs >= st.last.runTime && p.RunCount >= st.last.runs:
			c.addRuns(st, float64(p.RunTimeNs-st.last.runTime), float64(p.RunCount-st.last.runs))
		}
		st.counted = true
		st.last.ok, st.last.runTime, st.last.runs = true, p.RunTimeNs, p.RunCount
	}
	for id, st := range c.progs {
		if !listed[id] {
			st.last.ok = false
		}
	}
}

// addRuns adds dt ns of run time and dn runs to a program's counters, or
// to the overflow sums.
func (c *Collector) addRuns(st *progState, dt, dn float64) {
	if st.overflow {
		c.overflow.runTime += dt / 1e9
		c.overflow.runs += dn
		return
	}
	st.runTime += dt / 1e9
	st.runs += dn
}

// Figures returns what the collector serves for program id: its run time
// in seconds and its runs, as kernel_bpf_program_run_seconds_total and
// _runs_total; ok is false for a program not served one by one (unknown,
// or in the overflow sums). The exporter's own per-config family
// (kernel_exporter_program_run_seconds_total) serves the same figures: it
// is called during a scrape, so it lists as the scrape does (refresh),
// and both families of one scrape come from the same listing.
func (c *Collector) Figures(id uint32) (runSeconds, runs float64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refresh()
	st := c.progs[id]
	if st == nil || st.overflow {
		return 0, 0, false
	}
	return st.runTime, st.runs, true
}

// ProgramFigures returns Figures for a loaded program of ours, found by
// its id (read from its descriptor at each call: BPF_OBJ_GET_INFO_BY_FD,
// no capability needed), for collector.Status.RunFigures; nil for a nil
// collector.
func (c *Collector) ProgramFigures() func(p *ebpf.Program) (runSeconds, runs float64, ok bool) {
	if c == nil {
		return nil
	}
	return func(p *ebpf.Program) (float64, float64, bool) {
		id := programID(p)
		if id == 0 {
			return 0, 0, false
		}
		return c.Figures(id)
	}
}

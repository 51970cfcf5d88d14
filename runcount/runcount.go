// SPDX-License-Identifier: Apache-2.0

// Package runcount tells which BPF programs of the exporter's configs ran
// no time over a window, so that a program attached to a hook nothing
// triggers (a histogram on sys_enter_nanosleep for a sleep that calls
// clock_nanosleep) is not taken for a program with nothing to count.
//
// The model: the kernel counts each program's runs (bpf_prog_info.run_cnt,
// read with BPF_OBJ_GET_INFO_BY_FD on the program's descriptor, which
// needs no capability) only while BPF run-time statistics are on
// (BPF_ENABLE_STATS or the sysctl kernel.bpf_stats_enabled; turning them
// on needs CAP_SYS_ADMIN). A Window turns them on for its length (Enable),
// reads every attached program's count at its start (Mark) and gives the
// programs whose count did not move (Idle). Without statistics the counts
// do not move, so Idle says nothing then.
//
// The short-lived root commands use it: dump and hist over their window,
// and --config.check --verbose since the load. The server's landing page
// uses the CPU budget's measuring windows instead (package budget).
package runcount

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/collector"
	"github.com/kernel-exporter/kernel_exporter/internal/printable"
)

// Idle is a program that ran 0 times over a window.
type Idle struct {
	Config, Source   string
	Program, Section string
}

// String is the program and its section.
func (i Idle) String() string {
	return fmt.Sprintf("program %s (section %s)", printable.String(i.Program), printable.String(i.Section))
}

// Message is what the commands print for an idle program: the program,
// its section, when (span: "in the 10s window") and what to check.
func (i Idle) Message(span string) string {
	return fmt.Sprintf("%s ran 0 times %s (BPF run count): nothing triggered its hook; check that the hook is the one the workload reaches", i, span)
}

// Round rounds a window's length for a message: to the second from 10 s,
// to 100 ms from 1 s, else to the millisecond.
func Round(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Second:
		return d.Round(time.Second)
	case d >= time.Second:
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}

// Window measures run counts between Mark and Idle.
type Window struct {
	stats  io.Closer
	on     bool // statistics are on: by Enable, or by the sysctl
	start  map[*ebpf.Program]uint64
	t0     time.Time
	status *collector.Status
}

// statsSysctl is kernel.bpf_stats_enabled.
const statsSysctl = "/proc/sys/kernel/bpf_stats_enabled"

// Enable turns BPF run-time statistics on until Close (needs
// CAP_SYS_ADMIN; call it before dropping capabilities), for the programs
// of status. The error says why they could not be turned on; the Window
// is usable still (it then reports nothing unless the sysctl has them on).
func Enable(status *collector.Status) (*Window, error) {
	w := &Window{status: status, t0: time.Now()}
	c, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err == nil {
		w.stats, w.on = c, true
		return w, nil
	}
	if b, rerr := os.ReadFile(statsSysctl); rerr == nil && strings.TrimSpace(string(b)) == "1" {
		w.on = true
	}
	return w, fmt.Errorf("turn BPF run-time statistics on: %w", err)
}

// Close turns the statistics Enable turned on off again.
func (w *Window) Close() {
	if w.stats != nil {
		w.stats.Close()
		w.stats = nil
	}
}

// Mark starts the window now: the run counts read now are its base. A
// Window not marked counts from each program's load.
func (w *Window) Mark() {
	w.start = map[*ebpf.Program]uint64{}
	w.t0 = time.Now()
	each(w.status, func(_ collector.State, _ collector.ProgramState, p *ebpf.Program, n uint64) {
		w.start[p] = n
	})
}

// Elapsed is the window's length so far.
func (w *Window) Elapsed() time.Duration { return time.Since(w.t0) }

// Idle returns the attached programs of the configs that are up whose run
// count did not move since Mark (since their load when not marked; a
// program loaded after Mark counts from its load), in the status' order;
// nil when statistics are off.
func (w *Window) Idle() []Idle {
	if !w.on {
		return nil
	}
	var out []Idle
	each(w.status, func(st collector.State, ps collector.ProgramState, p *ebpf.Program, n uint64) {
		if n == w.start[p] {
			out = append(out, Idle{Config: st.Name, Source: st.Source, Program: ps.Name, Section: ps.Section})
		}
	})
	return out
}

// each calls f with the run count of every attached program of the
// configs that are up; a program whose count cannot be read is left out.
func each(status *collector.Status, f func(collector.State, collector.ProgramState, *ebpf.Program, uint64)) {
	for _, st := range status.States() {
		if !st.Up {
			continue
		}
		for _, ps := range st.Programs {
			if !ps.Attached || ps.Prog == nil {
				continue
			}
			s, err := ps.Prog.Stats()
			if err != nil {
				continue
			}
			f(st, ps, ps.Prog, s.RunCount)
		}
	}
}

// SPDX-License-Identifier: Apache-2.0

package integration

// BenchmarkBCCSideBySide: BPF nanoseconds per event of our bundled
// programs against Debian's libbpf-tools on the same events, in one run
// (issue 28). Run by hand, as root (make bench-bcc):
//
//	go test -run '^$' -bench BCCSideBySide -benchtime 1x -count 3 ./integration/
//
// In each of two attach orders (ours first, then the tools; the tools
// first, then ours) it starts the exporter with runqlat, softirq, syscalls
// and biolatency, and the tools runqlat, softirqs -d, syscount and
// biolatency -D, then attaches one minimal program per hook (a per-CPU
// array increment, built here with cilium/ebpf's assembler: the floor any
// program on that hook pays). With the kernel's run-time statistics on
// (BPF_ENABLE_STATS, the same switch as kernel.bpf_stats_enabled=1, off
// again when the benchmark ends), it runs a workload that makes every event
// (a loopback UDP storm, pipe ping-pongs and spinners, fork+exec, getpid
// and failing open calls, O_DIRECT I/O) for KE_BCC_SECONDS (default 10),
// then reads run_time_ns and run_cnt of every program of both sides (the
// programs each process holds, found in /proc/<pid>/fdinfo) and prints,
// per event, the nanoseconds of all our programs on it, of the tool's, the
// ratio, and the floor. KE_BCC_OURS replaces the exporter's program
// arguments (to measure variants of a program: "--config.dir=DIR
// --config.names=a,b").

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/internal/selfcount"
)

// bccEvent is one row of the side-by-side table: the hooks whose programs
// count for the event on both sides, and the hook whose run count is the
// number of events (a request, a softirq run, a switch, a syscall).
type bccEvent struct {
	name   string
	tool   string
	hooks  []string
	anchor string
}

var bccEvents = []bccEvent{
	{"block issue + complete", "biolatency", []string{"block_rq_insert", "block_rq_issue", "block_rq_complete", "block_rq_requeue"}, "block_rq_complete"},
	{"sched_switch", "runqlat", []string{"sched_switch"}, "sched_switch"},
	{"sched_wakeup", "runqlat", []string{"sched_wakeup"}, "sched_wakeup"},
	{"sched_wakeup_new", "runqlat", []string{"sched_wakeup_new"}, "sched_wakeup_new"},
	{"sys_exit", "syscount", []string{"sys_exit"}, "sys_exit"},
	{"softirq entry + exit (+ raise)", "softirqs", []string{"softirq_raise", "softirq_entry", "softirq_exit"}, "softirq_entry"},
}

// bccFloorHooks are the hooks that get a minimal program.
var bccFloorHooks = []string{"block_rq_issue", "block_rq_complete", "sched_switch", "sched_wakeup", "sched_wakeup_new", "sys_exit", "softirq_raise", "softirq_entry", "softirq_exit"}

// bccSideTools are the libbpf-tools the benchmark runs, with their
// arguments: no interval (they print only when stopped).
var bccSideTools = [][]string{
	{"runqlat"},
	{"softirqs", "-d"},
	{"syscount"},
	{"biolatency", "-D"},
}

// bccSidePrograms are our bundled configs on the same events.
const bccSidePrograms = "runqlat,softirq,syscalls,biolatency"

// hookOf returns the tracepoint a program of either side runs on, from its
// name (the kernel keeps its first 15 bytes): programs of both sides are
// named after their tracepoint, libbpf-tools' sometimes with a _btf suffix,
// and runqlat's switch program is "sched_swith".
func hookOf(name string) string {
	if name == "sched_swith" {
		return "sched_switch"
	}
	// Longest first: sched_wakeup_new before sched_wakeup.
	for _, h := range []string{"block_rq_complete", "block_rq_requeue", "sched_wakeup_new", "block_rq_insert", "block_rq_issue",
		"softirq_entry", "softirq_raise", "sched_switch", "softirq_exit", "sched_wakeup", "sys_enter", "sys_exit"} {
		if strings.HasPrefix(name, h) || len(h) > 15 && strings.HasPrefix(name, h[:15]) {
			return h
		}
	}
	return ""
}

// bpfProg is one program's run-time statistics at a point in time.
type bpfProg struct {
	id         ebpf.ProgramID
	name, hook string
	ns, runs   uint64
}

// processPrograms returns the BPF programs process pid holds (program fds,
// and the programs of its link fds), with their statistics now.
func processPrograms(b *testing.B, pid int) []bpfProg {
	dir := fmt.Sprintf("/proc/%d/fdinfo", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		b.Fatalf("read %s: %v", dir, err)
	}
	seen := map[ebpf.ProgramID]bool{}
	var out []bpfProg
	for _, ent := range ents {
		data, err := os.ReadFile(filepath.Join(dir, ent.Name()))
		if err != nil {
			continue // closed meanwhile
		}
		s := bufio.NewScanner(strings.NewReader(string(data)))
		for s.Scan() {
			v, ok := strings.CutPrefix(s.Text(), "prog_id:")
			if !ok {
				continue
			}
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32)
			if err != nil || seen[ebpf.ProgramID(n)] {
				continue
			}
			seen[ebpf.ProgramID(n)] = true
			if p, ok := programStats(b, ebpf.ProgramID(n)); ok {
				out = append(out, p)
			}
		}
	}
	return out
}

// programStats reads program id's name and statistics (ok false when it
// is gone).
func programStats(b *testing.B, id ebpf.ProgramID) (bpfProg, bool) {
	p, err := ebpf.NewProgramFromID(id)
	if errors.Is(err, os.ErrNotExist) {
		return bpfProg{}, false
	}
	if err != nil {
		b.Fatalf("program %d: %v", id, err)
	}
	defer p.Close()
	info, err := p.Info()
	if err != nil {
		b.Fatalf("program %d info: %v", id, err)
	}
	st, err := p.Stats()
	if err != nil {
		b.Fatalf("program %d stats: %v", id, err)
	}
	return bpfProg{id: id, name: info.Name, hook: hookOf(info.Name), ns: uint64(st.Runtime.Nanoseconds()), runs: st.RunCount}, true
}

// floorProgram is a minimal tp_btf program on hook: one increment of a
// per-CPU array slot (the lookup is inlined by the verifier), nothing else.
func floorProgram(b *testing.B, counter *ebpf.Map, hook string) (*ebpf.Program, link.Link) {
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         "floor",
		Type:         ebpf.Tracing,
		AttachType:   ebpf.AttachTraceRawTp,
		AttachTo:     hook,
		License:      "GPL",
		Instructions: selfcount.Instructions(counter),
	})
	if err != nil {
		b.Fatalf("floor program on %s: %v", hook, err)
	}
	l, err := link.AttachTracing(link.TracingOptions{Program: p, AttachType: ebpf.AttachTraceRawTp})
	if err != nil {
		p.Close()
		b.Fatalf("attach floor program to %s: %v", hook, err)
	}
	return p, l
}

// bccSideRun is one attach order's measurement.
type bccSideRun struct {
	order                string
	ours, theirs, floors []bpfProg // deltas over the workload
}

// BenchmarkBCCSideBySide prints per-event BPF nanoseconds of ours and of
// libbpf-tools in both attach orders. Run it with -benchtime 1x; -count 3
// gives three runs.
func BenchmarkBCCSideBySide(b *testing.B) {
	for _, t := range bccSideTools {
		bccTool(b, t[0])
	}
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		b.Fatalf("enable BPF run-time statistics: %v", err)
	}
	defer stats.Close()
	d := 10 * time.Second
	if v, err := strconv.Atoi(os.Getenv("KE_BCC_SECONDS")); err == nil && v > 0 {
		d = time.Duration(v) * time.Second
	}
	for i := 0; i < b.N; i++ {
		var runs []bccSideRun
		for _, oursFirst := range []bool{true, false} {
			runs = append(runs, bccSideOrder(b, oursFirst, d))
		}
		printBCCSide(runs, d)
	}
}

// bccSideOrder starts both sides in one order, then the floor programs,
// runs the workload for d, and returns every program's statistics over it.
func bccSideOrder(b *testing.B, oursFirst bool, d time.Duration) bccSideRun {
	run := bccSideRun{order: "tools first, then ours"}
	if oursFirst {
		run.order = "ours first, then the tools"
	}
	var ours *benchProcess
	var tools []*bccRun
	startOurs := func() {
		args := []string{"--programs=" + bccSidePrograms}
		if v := os.Getenv("KE_BCC_OURS"); v != "" {
			args = strings.Fields(v)
		}
		ours = startBenchProcess(b, binary, args...)
	}
	startTools := func() {
		for _, t := range bccSideTools {
			tools = append(tools, startBCC(b, nil, nil, t[0], t[1:]...))
		}
	}
	if oursFirst {
		startOurs()
		startTools()
	} else {
		startTools()
		startOurs()
	}
	counter, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer counter.Close()
	var floors []*ebpf.Program
	for _, h := range bccFloorHooks {
		p, l := floorProgram(b, counter, h)
		defer p.Close()
		defer l.Close()
		floors = append(floors, p)
	}

	snapshot := func() (o, th, fl []bpfProg) {
		o = processPrograms(b, ours.cmd.Process.Pid)
		for _, t := range tools {
			th = append(th, processPrograms(b, t.cmd.Process.Pid)...)
		}
		for i, p := range floors {
			info, err := p.Info()
			if err != nil {
				b.Fatal(err)
			}
			id, _ := info.ID()
			st, ok := programStats(b, id)
			if !ok {
				b.Fatalf("floor program on %s is gone", bccFloorHooks[i])
			}
			st.hook = bccFloorHooks[i]
			fl = append(fl, st)
		}
		return
	}
	o0, t0, f0 := snapshot()
	if err := bccWorkload(ioTempDir(b), d); err != nil {
		b.Fatal(err)
	}
	o1, t1, f1 := snapshot()
	run.ours, run.theirs, run.floors = progDelta(o0, o1), progDelta(t0, t1), progDelta(f0, f1)

	for _, t := range tools {
		t.stop()
	}
	_ = ours.cmd.Process.Signal(unix.SIGTERM)
	select {
	case <-ours.done:
		ours.done <- nil
	case <-time.After(30 * time.Second):
		b.Fatalf("exporter did not exit within 30 s of SIGTERM")
	}
	return run
}

// progDelta returns the programs of after with the statistics they gained
// since before (programs not in before count from zero).
func progDelta(before, after []bpfProg) []bpfProg {
	was := map[ebpf.ProgramID]bpfProg{}
	for _, p := range before {
		was[p.id] = p
	}
	var out []bpfProg
	for _, p := range after {
		if w, ok := was[p.id]; ok {
			p.ns -= w.ns
			p.runs -= w.runs
		}
		out = append(out, p)
	}
	return out
}

// perEvent returns the nanoseconds of progs on ev's hooks per event (the
// run count of the anchor hook; among several programs on the anchor, the
// largest count) and that count.
func perEvent(progs []bpfProg, ev bccEvent) (ns float64, events uint64) {
	var total uint64
	for _, p := range progs {
		for _, h := range ev.hooks {
			if p.hook == h {
				total += p.ns
			}
		}
		if p.hook == ev.anchor {
			events = max(events, p.runs)
		}
	}
	if events == 0 {
		return 0, 0
	}
	return float64(total) / float64(events), events
}

func printBCCSide(runs []bccSideRun, d time.Duration) {
	fmt.Printf("\nBPF ns per event, ours (%s) against libbpf-tools, %s of workload per order, %d CPUs, run-time statistics on\n",
		bccSidePrograms, d, runtime.NumCPU())
	for _, r := range runs {
		fmt.Printf("\n%s\n%-32s %-11s %12s %9s %9s %7s %9s %9s\n", r.order, "event", "tool", "events", "ours", "tool", "ratio", "floor", "ours-floor")
		for _, ev := range bccEvents {
			o, n := perEvent(r.ours, ev)
			th, nt := perEvent(r.theirs, ev)
			// The floor: one minimal program on each hook ours uses.
			var fl float64
			for _, h := range ev.hooks {
				used := false
				for _, p := range r.ours {
					used = used || p.hook == h && p.runs > 0
				}
				if !used {
					continue
				}
				for _, p := range r.floors {
					if p.hook == h {
						fl += float64(p.ns)
					}
				}
			}
			if n > 0 {
				fl /= float64(n)
			}
			ratio := "-"
			if th > 0 {
				ratio = fmt.Sprintf("%.2fx", o/th)
			}
			if n != nt {
				ratio += fmt.Sprintf(" (events: ours %d, tool %d)", n, nt)
			}
			fmt.Printf("%-32s %-11s %12d %9.1f %9.1f %7s %9.1f %9.1f\n", ev.name, ev.tool, n, o, th, ratio, fl, o-fl)
		}
		fmt.Printf("programs (ns/run, runs):")
		all := append(append([]bpfProg{}, r.ours...), r.theirs...)
		sort.SliceStable(all, func(i, j int) bool { return all[i].hook < all[j].hook })
		for _, p := range all {
			if p.runs > 0 {
				fmt.Printf(" %s=%.1f/%d", p.name, float64(p.ns)/float64(p.runs), p.runs)
			}
		}
		fmt.Printf("\nfloor (ns/run):")
		for _, p := range r.floors {
			if p.runs > 0 {
				fmt.Printf(" %s=%.1f", p.hook, float64(p.ns)/float64(p.runs))
			}
		}
		fmt.Println()
	}
}

// bccWorkload makes every event of the side-by-side table, concurrently,
// for d: a loopback UDP storm (softirqs), pipe ping-pongs between thread
// pairs and two spinners (wakeups, switches, preemptions), fork+exec of
// /bin/true (new tasks), getpid and failing open calls (syscalls), and
// O_DIRECT writes and reads in dir (block requests).
func bccWorkload(dir string, d time.Duration) error {
	rx, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return err
	}
	defer rx.Close()
	tx, err := net.DialUDP("udp4", nil, rx.LocalAddr().(*net.UDPAddr))
	if err != nil {
		return err
	}
	defer tx.Close()
	msg := make([]byte, 256)
	rbuf := make([]byte, 512)
	rx.SetReadDeadline(time.Now().Add(d + time.Second))
	fns := []func() error{
		func() error {
			for range 100 {
				if _, err := tx.Write(msg); err != nil && !errors.Is(err, unix.ECONNREFUSED) {
					return fmt.Errorf("udp send: %w", err)
				}
			}
			return nil
		},
		func() error {
			if _, err := rx.Read(rbuf); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
				return fmt.Errorf("udp receive: %w", err)
			}
			return nil
		},
		func() error { return exec.Command("/bin/true").Run() },
		func() error {
			for range 10000 {
				unix.Getpid()
			}
			return nil
		},
		func() error {
			for range 1000 {
				if _, err := unix.Open("/nonexistent/kernel_exporter", unix.O_RDONLY, 0); !errors.Is(err, unix.ENOENT) {
					return fmt.Errorf("open: want ENOENT, got %v", err)
				}
			}
			return nil
		},
		func() error {
			_, _, err := runDirectIO(dir, 64, 4096)
			return err
		},
	}
	for range 2 {
		fns = append(fns, func() error {
			x := 0
			for range 1_000_000 {
				x ^= x<<1 + 1
			}
			_ = x
			return nil
		})
	}
	for range 4 {
		pp, err := newPingPong()
		if err != nil {
			return err
		}
		defer pp.close() // after storm: ends serve
		go pp.serve()
		fns = append(fns, pp.roundTrip)
	}
	return storm(d, fns...)
}

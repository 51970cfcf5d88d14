// SPDX-License-Identifier: Apache-2.0

// Package profile takes CPU and off-CPU profiles of the whole host with
// BPF, resolves their stacks, writes them as pprof or folded stacks, and
// compares two of them: the "perf top, then flame graphs of a good host and
// a bad one" step of an investigation, from the exporter.
//
// # Model
//
// A Session runs one BPF program (bpf/profile.bpf.c) while a profile is
// taken, and nothing before or after:
//
//   - CPU: a perf_event program on one event per online CPU, sampling at
//     Options.Frequency (19 Hz by default): hardware cycles where the
//     machine has a PMU, else the software cpu-clock (every VM). Each
//     sample's process, comm, cgroup id and kernel and user stacks
//     (bpf_get_stack; user stacks by frame pointers) are counted in a hash
//     map in the kernel, as bcc's profile does; stacks are stored once, by
//     a 64-bit hash of their frames, in an LRU hash map.
//   - OffCPU: tp_btf/sched_switch, as bcc's offcputime: the time from a
//     task's switch-out to its switch-in, if at least Options.MinBlock, is
//     added to the stacks it left the CPU with, in nanoseconds.
//
// Every Options.Interval (1 s) the session flips the programs to the
// other of two counts maps and reads and empties the one they left: map
// sizes depend on the interval, not on the profile's length, and the
// stacks are resolved while their processes still run (a process that
// exits within the interval it was sampled in is shown as [unknown]
// frames, its kernel frames still resolved). Filters on pids and cgroups,
// kernel-only or user-only stacks and the idle tasks are applied in the
// kernel, where what is left out costs no stack walk.
//
// Symbols (package symbolize): kernel frames through /proc/kallsyms (read
// again when modules, or BPF programs, appear); user frames through the
// ELF .symtab and .dynsym, or a Go binary's .gopclntab, of the file each
// process maps, opened inside /proc/<pid>/root so that containers resolve,
// checked against the mapping's inode, cached by (device, inode, build ID)
// in a bounded LRU. What does not resolve is named module+0xoffset, never
// dropped.
//
// The CPU and memory budgets apply: a session books its maps' estimated
// kernel memory in Options.Ledger (the exporter's) under Options.Name, and
// Handler.BudgetConfigs gives the CPU budget the running program to
// measure; over budget, Handler.Detach stops the profile.
//
// # API
//
// Taking a profile:
//
//	s, err := profile.NewSession(profile.Options{Kind: profile.CPU, Duration: 30 * time.Second,
//		Frequency: 99, Filter: profile.Filter{PIDs: []uint32{pid}}})
//	p, err := s.Run(ctx)              // *Profile; ctx done ends it early, still returned
//
// Options.OnInterval receives each interval's samples as a *Profile while
// the session runs (live views; with Options.Discard the session keeps
// nothing else, for views that run for long). Options.Symbolizer shares
// kernel and ELF symbol tables between sessions.
//
// A *Profile is Kind, Event, Frequency, Start, Duration, Stats and Samples;
// a Sample is PID, Comm, Cgroup, Value (samples, or nanoseconds off-CPU),
// Count (samples, or blocks) and Stack, innermost frame first, kernel
// frames then user frames. A *Frame (symbolize.Frame) is Function, Module,
// BuildID, Kernel, Resolved; frames are shared between samples (compare
// pointers within one profile, names across profiles).
//
// Using one:
//
//	p.WritePprof(w)                      // gzipped pprof: go tool pprof, Pyroscope, speedscope
//	p.WriteFolded(w, FoldedOptions{})    // flamegraph.pl's input, comm first, kernel frames _[k]
//	p.Filter(Filter{Comms: ...})         // a new profile with the samples kept
//	p.Tree(TreeOptions{ByProcess: true}) // *Node flame graph: Name, Kernel, Self, Total, Children
//	p.Functions()                        // []FunctionStat: Self and Total by function
//	ReadFile(path, CPU), Parse(data, CPU), FromPprof(pp), ParseFolded(r, CPU)
//
// Comparing two:
//
//	d, err := Diff(base, new)            // *DiffResult, shares normalised by each total
//	d.Rows                               // []DiffRow: Base, New, Delta shares (Self, Total)
//	d.Grew(20, ByTotal), d.Shrank(20, BySelf)
//	d.Tree                               // *DiffNode: merged flame graph, Base and New shares
//	d.WriteTable(w, 20, ByTotal)         // the text table of profile diff
//	d.WriteFolded(w)                     // difffolded.pl's "stack base new" for flamegraph.pl
//
// Serving and commands: Handler serves /profile/cpu and /profile/offcpu
// (mounted by package web with --profile.enable); Record is the profile
// command, DiffInputs profile diff; package profile/top is top cpu.
package profile

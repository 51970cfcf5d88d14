// SPDX-License-Identifier: Apache-2.0

package loader

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/selfprobe"
)

// ErrUnsupported marks attach types the running kernel lacks.
var ErrUnsupported = errors.New("not supported by this kernel")

// kind returns the attach kind of a section name: the part before the first
// slash ("tracepoint", "kprobe", ...).
func kind(section string) string {
	k, _, _ := strings.Cut(section, "/")
	return k
}

func sortedPrograms(spec *ebpf.CollectionSpec) []string {
	names := make([]string, 0, len(spec.Programs))
	for n := range spec.Programs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// attach attaches prog according to its section name.
// env carries the config's uprobes, usdt and perf_events targets.
func attach(ps *ebpf.ProgramSpec, prog *ebpf.Program, env *attachEnv) (link.Link, error) {
	sec := ps.SectionName
	k, target, _ := strings.Cut(sec, "/")
	switch k {
	case "tracepoint", "tp":
		group, name, ok := strings.Cut(target, "/")
		if !ok {
			return nil, fmt.Errorf("section %q: want tracepoint/<group>/<event>", sec)
		}
		if err := ensureTracefs(); err != nil {
			return nil, err
		}
		l, err := link.Tracepoint(group, name, prog, nil)
		if err != nil {
			return nil, tracepointError(err)
		}
		return l, nil
	case "raw_tp", "raw_tracepoint":
		if target == "" {
			return nil, fmt.Errorf("section %q: want %s/<event>", sec, k)
		}
		return link.AttachRawTracepoint(link.RawTracepointOptions{Name: target, Program: prog})
	case "tp_btf", "fentry", "fexit", "fmod_ret":
		return link.AttachTracing(link.TracingOptions{Program: prog})
	case "kprobe", "kretprobe":
		if target == "" {
			return nil, fmt.Errorf("section %q: want %s/<function>", sec, k)
		}
		if !kprobesAvailable() {
			return nil, fmt.Errorf("kprobes %w", ErrUnsupported)
		}
		if k == "kprobe" {
			return link.Kprobe(target, prog, nil)
		}
		return link.Kretprobe(target, prog, nil)
	case "uprobe", "uretprobe":
		return attachUprobes(k, target, ps, prog, env)
	case "usdt":
		return attachUSDT(target, ps, prog, env)
	case "perf_event":
		return attachPerfEvents(ps, prog, env)
	case "xdp":
		return attachXDP(sec, target, prog)
	}
	return nil, fmt.Errorf("section %q: attach type %q is not supported", sec, k)
}

// kprobesAvailable reports whether the kernel has kprobes: either the
// kprobe PMU (4.17+) or tracefs kprobe_events.
func kprobesAvailable() bool {
	for _, p := range []string{
		"/sys/bus/event_source/devices/kprobe/type",
		"/sys/kernel/tracing/kprobe_events",
		"/sys/kernel/debug/tracing/kprobe_events",
	} {
		if _, err := os.Stat(p); err == nil {
			return true
		}
	}
	return false
}

// attachUprobe parses "<path>:<symbol>[+<offset>]" (path may be absolute,
// as in "uprobe//usr/bin/bash:readline", or a bare library name, as in
// "uprobe/libc.so.6:malloc", resolved by ResolveLibrary).
func attachUprobe(k, target string, prog *ebpf.Program) (link.Link, error) {
	i := strings.LastIndexByte(target, ':')
	if i <= 0 || i == len(target)-1 {
		return nil, fmt.Errorf("section %s/%s: want %s/<path>:<symbol>[+<offset>]", k, target, k)
	}
	path, sym := target[:i], target[i+1:]
	var offset uint64
	if s, off, ok := strings.Cut(sym, "+"); ok {
		v, err := strconv.ParseUint(off, 0, 64)
		if err != nil {
			return nil, fmt.Errorf("section %s/%s: bad offset %q", k, target, off)
		}
		sym, offset = s, v
	}
	if path == selfprobe.Path && sym == selfprobe.Symbol {
		return attachSelfProbe(k, target, offset, prog)
	}
	// A bare library name ("libc.so.6") is found as the dynamic loader
	// finds it.
	path, err := ResolveLibrary(path)
	if err != nil {
		return nil, fmt.Errorf("section %s/%s: %w", k, target, err)
	}
	tgt, err := openUprobeTarget(path, "uprobe target")
	if err != nil {
		return nil, err
	}
	addr, err := tgt.address(sym, offset)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", k, path, err)
	}
	// Address bypasses cilium/ebpf's own open of the file (see uprobeTarget).
	opts := link.UprobeOptions{Address: addr}
	if k == "uprobe" {
		return tgt.ex.Uprobe(sym, prog, &opts)
	}
	return tgt.ex.Uretprobe(sym, prog, &opts)
}

// attachSelfProbe attaches a uprobe or uretprobe on
// /proc/self/exe:post_attach_mark (ebpf_exporter's hook for initialising
// maps after attach) to selfprobe.Mark, which the exporter calls after
// attaching each config: found by its address in the running process
// (selfprobe.Offset), so that stripped builds work too. offset must be 0.
func attachSelfProbe(k, target string, offset uint64, prog *ebpf.Program) (link.Link, error) {
	if offset != 0 {
		return nil, fmt.Errorf("section %s/%s: no offset into %s", k, target, selfprobe.Symbol)
	}
	exe, off, err := selfprobe.Offset()
	if err != nil {
		return nil, fmt.Errorf("section %s/%s: %w", k, target, err)
	}
	tgt, err := openUprobeTarget(exe, "uprobe target")
	if err != nil {
		return nil, fmt.Errorf("section %s/%s: %w", k, target, err)
	}
	opts := link.UprobeOptions{Address: off}
	if k == "uprobe" {
		return tgt.ex.Uprobe(selfprobe.Symbol, prog, &opts)
	}
	return tgt.ex.Uretprobe(selfprobe.Symbol, prog, &opts)
}

func isPermission(err error) bool {
	return errors.Is(err, unix.EPERM) || errors.Is(err, os.ErrPermission)
}

var tracefsOnce sync.Once
var tracefsErr error

// tracefsDirs are where tracefs is found: its own mount point (4.1+) and
// under debugfs.
var tracefsDirs = []string{"/sys/kernel/tracing", "/sys/kernel/debug/tracing"}

// ensureTracefs mounts tracefs at /sys/kernel/tracing when neither it nor
// debugfs tracing is mounted: tracepoint links need the event ids it lists.
// When tracefs is there but not readable (mode 0700 root, and the process
// is not root or lacks CAP_DAC_READ_SEARCH), the error says so and names
// the capability: a *TracefsPermissionError.
func ensureTracefs() error {
	tracefsOnce.Do(func() { tracefsErr = findTracefs(tracefsDirs) })
	return tracefsErr
}

func findTracefs(dirs []string) error {
	var denied error
	for _, d := range dirs {
		_, err := os.Stat(d + "/events")
		if err == nil {
			return nil
		}
		if isPermission(err) && denied == nil {
			denied = tracefsPermissionError(d, err)
		}
	}
	if denied != nil {
		return denied
	}
	if err := unix.Mount("tracefs", dirs[0], "tracefs", 0, ""); err != nil {
		hint := ""
		if isPermission(err) {
			hint = " (mounting needs CAP_SYS_ADMIN; or mount tracefs before starting the exporter)"
		}
		return fmt.Errorf("tracefs is not mounted and mounting it at %s failed: %w%s", dirs[0], err, hint)
	}
	return nil
}

// TracefsPermissionError is tracefs found but not readable by the process:
// tracepoint ids cannot be read.
type TracefsPermissionError struct {
	// Path is the tracefs file or directory that was denied.
	Path string
	// Mode describes the permissions of the tracefs mount point, e.g.
	// "mode 0700, owner uid 0" ("" when unknown).
	Mode string
	Err  error
}

func (e *TracefsPermissionError) Error() string {
	mode := ""
	if e.Mode != "" {
		mode = " (" + e.Mode + ")"
	}
	denied := "permission denied"
	if e.Err != nil && e.Err.Error() != denied {
		denied += " (" + e.Err.Error() + ")"
	}
	return fmt.Sprintf("tracefs %s: %s%s: reading tracepoint ids needs CAP_DAC_READ_SEARCH (or CAP_DAC_OVERRIDE, or running as root); grant it, e.g. AmbientCapabilities=CAP_DAC_READ_SEARCH in the systemd unit, or keep it with --capabilities.keep",
		e.Path, denied, mode)
}

func (e *TracefsPermissionError) Unwrap() error { return e.Err }

// tracefsPermissionError describes a permission error on path under the
// tracefs mount point dir.
func tracefsPermissionError(path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	e := &TracefsPermissionError{Path: path, Err: err}
	for _, d := range tracefsDirs {
		if path == d || strings.HasPrefix(path, d+"/") {
			var st unix.Stat_t
			if unix.Stat(d, &st) == nil {
				e.Mode = fmt.Sprintf("%s is mode %#o, owner uid %d; this process runs as uid %d", d, st.Mode&0o7777, st.Uid, os.Geteuid())
			}
			break
		}
	}
	return e
}

// tracepointError explains a failed tracepoint attach: a permission error
// on a tracefs file (the event id) names the capability that fixes it.
func tracepointError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && isPermission(err) {
		for _, d := range tracefsDirs {
			if strings.HasPrefix(pe.Path, d+"/") {
				return tracefsPermissionError(pe.Path, pe)
			}
		}
	}
	return err
}

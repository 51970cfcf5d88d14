package loader

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
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
		return link.Tracepoint(group, name, prog, nil)
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
// as in "uprobe//usr/bin/bash:readline").
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

func isPermission(err error) bool {
	return errors.Is(err, unix.EPERM) || errors.Is(err, os.ErrPermission)
}

var tracefsOnce sync.Once
var tracefsErr error

// ensureTracefs mounts tracefs at /sys/kernel/tracing when neither it nor
// debugfs tracing is mounted: tracepoint links need the event ids it lists.
func ensureTracefs() error {
	tracefsOnce.Do(func() {
		for _, p := range []string{"/sys/kernel/tracing/events", "/sys/kernel/debug/tracing/events"} {
			if _, err := os.Stat(p); err == nil {
				return
			}
		}
		if err := unix.Mount("tracefs", "/sys/kernel/tracing", "tracefs", 0, ""); err != nil {
			tracefsErr = fmt.Errorf("tracefs is not mounted and mounting it at /sys/kernel/tracing failed: %w", err)
		}
	})
	return tracefsErr
}

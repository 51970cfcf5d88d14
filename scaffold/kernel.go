// SPDX-License-Identifier: Apache-2.0

package scaffold

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cilium/ebpf/btf"

	"github.com/kernel-exporter/kernel_exporter/loader"
)

// Kernel is what new asks the running kernel about an attach point.
type Kernel struct {
	// HaveFeature is loader.HaveFeature: nil when the kernel runs
	// programs of a feature (kprobes, fentry, tp_btf, raw_tracepoints,
	// uprobes), else an error saying why not.
	HaveFeature func(name string) error
	// Tracepoints lists the kernel's tracepoints as "group:event" (the
	// directories of tracefs's events/), nil when tracefs is not there.
	Tracepoints func() []string
	// BTFTracepoint reports whether the kernel's BTF has the tracepoint
	// event for tp_btf (a btf_trace_<event> typedef).
	BTFTracepoint func(event string) bool
}

// SystemKernel asks the running kernel: loader's feature probes, tracefs
// and /sys/kernel/btf/vmlinux.
func SystemKernel() *Kernel {
	var spec *btf.Spec
	var specErr error
	return &Kernel{
		HaveFeature: func(name string) error { return loader.HaveFeature(name, loader.Options{}) },
		Tracepoints: systemTracepoints,
		BTFTracepoint: func(event string) bool {
			if spec == nil && specErr == nil {
				spec, specErr = btf.LoadKernelSpec()
			}
			if specErr != nil {
				return false
			}
			var td *btf.Typedef
			return spec.TypeByName("btf_trace_"+event, &td) == nil
		},
	}
}

// maxTracepoints bounds the events read from tracefs (a 6.x kernel has
// about 2,500).
const maxTracepoints = 20000

func systemTracepoints() []string {
	// tracefs is mounted by the loader when missing (as root).
	_ = loader.HaveFeature("tracepoints", loader.Options{})
	for _, root := range []string{"/sys/kernel/tracing/events", "/sys/kernel/debug/tracing/events"} {
		groups, err := os.ReadDir(root)
		if err != nil {
			continue
		}
		var out []string
		for _, g := range groups {
			if !g.IsDir() {
				continue
			}
			events, err := os.ReadDir(filepath.Join(root, g.Name()))
			if err != nil {
				continue
			}
			for _, e := range events {
				if e.IsDir() && len(out) < maxTracepoints {
					out = append(out, g.Name()+":"+e.Name())
				}
			}
		}
		return out
	}
	return nil
}

// feature is the loader feature a kind of attach point needs, or "".
func feature(kind string) string {
	switch kind {
	case "kprobe", "kretprobe":
		return "kprobes"
	case "fentry", "fexit":
		return "fentry"
	case "tp_btf":
		return "tp_btf"
	case "raw_tp":
		return "raw_tracepoints"
	case "uprobe", "uretprobe":
		return "uprobes"
	}
	return ""
}

// CheckKernel returns nil when the running kernel k runs programs of a's
// kind, else an error that says why not and offers attach points of the
// same event that work here: for a kprobe, kretprobe, fentry or fexit
// function, the tracepoints named like it (tracepoint:, and raw_tp: and
// tp_btf: when those work), as in
//
//	--attach kprobe:do_nanosleep: kprobes not supported by this kernel (no kprobe PMU or kprobe_events); what works here, by name: tracepoint:syscalls:sys_enter_nanosleep, tracepoint:syscalls:sys_enter_clock_nanosleep; or --no-kernel-check to write it anyway (for another kernel)
//
// flag names the argument ("--attach"). When not root, only what needs no
// privileges is checked (kprobes, uprobes); other probes are left to make
// check.
func (k *Kernel) CheckKernel(flag string, a Attach, root bool) error {
	f := feature(a.Kind)
	if f == "" || (!root && f != "kprobes" && f != "uprobes") {
		return nil
	}
	err := k.HaveFeature(f)
	if err == nil {
		return nil
	}
	if !errors.Is(err, loader.ErrUnsupported) {
		return nil // could not tell: make check will
	}
	msg := fmt.Sprintf("%s %s: %v", flag, a, err)
	if alts := k.alternatives(a, root); len(alts) > 0 {
		msg += "; what works here, by name: " + strings.Join(alts, ", ")
	} else if a.Kind != "uprobe" && a.Kind != "uretprobe" {
		msg += "; no tracepoint is named like it: look for one in /sys/kernel/tracing/events (tracepoint:<group>:<event>)"
	}
	return errors.New(msg + "; or --no-kernel-check to write it anyway (for another kernel)")
}

// maxAlternatives bounds the attach points an error offers.
const maxAlternatives = 8

// alternatives lists attach points that work on k for the event of a:
// tracepoints named like a kprobe or fentry function (the end's exit
// tracepoints for a kretprobe or fexit), then raw_tp and tp_btf forms of
// those that are real tracepoints when k runs them; for a tp_btf or raw_tp
// event, its tracepoint.
func (k *Kernel) alternatives(a Attach, root bool) []string {
	tps := k.Tracepoints()
	var out []string
	switch a.Kind {
	case "tp_btf", "raw_tp":
		for _, tp := range tps {
			if _, ev, _ := strings.Cut(tp, ":"); ev == a.Event {
				out = append(out, "tracepoint:"+tp)
			}
		}
		if a.Kind == "tp_btf" && len(out) > 0 && root && k.HaveFeature("raw_tracepoints") == nil {
			out = append(out, "raw_tp:"+a.Event)
		}
		return out
	case "kprobe", "kretprobe", "fentry", "fexit":
	default:
		return nil
	}
	exit := a.Kind == "kretprobe" || a.Kind == "fexit"
	matches := similarTracepoints(a.Func, tps, exit)
	for _, tp := range matches {
		out = append(out, "tracepoint:"+tp)
	}
	rawOK := root && k.HaveFeature("raw_tracepoints") == nil
	btfOK := root && k.HaveFeature("tp_btf") == nil
	for _, tp := range matches {
		g, ev, _ := strings.Cut(tp, ":")
		if g == "syscalls" {
			continue // per-syscall events are not raw tracepoints
		}
		if rawOK {
			out = append(out, "raw_tp:"+ev)
		}
		if btfOK && k.BTFTracepoint(ev) {
			out = append(out, "tp_btf:"+ev)
		}
	}
	if len(out) > maxAlternatives {
		out = out[:maxAlternatives]
	}
	return out
}

// stem is a kernel function's name without the prefixes and suffixes that
// tracepoint names leave out: do_nanosleep → nanosleep,
// __x64_sys_openat → openat, tcp_sendmsg.isra.0 → tcp_sendmsg.
func stem(fn string) string {
	fn, _, _ = strings.Cut(fn, ".")
	for _, p := range []string{"__x64_sys_", "__arm64_sys_", "__ia32_sys_", "__se_sys_", "__do_sys_", "__sys_", "ksys_", "sys_", "do_", "__"} {
		if s, ok := strings.CutPrefix(fn, p); ok && s != "" {
			return s
		}
	}
	return fn
}

// similarTracepoints returns the tracepoints ("group:event") named like
// kernel function fn, best first: an event named fn or its stem, then the
// syscall entry (exit when exit is set) of the stem, then events whose
// name holds the stem as a whole _-separated word (at most
// maxAlternatives in all, and stems of 3 bytes or more).
func similarTracepoints(fn string, tps []string, exit bool) []string {
	s := stem(fn)
	if len(s) < 3 {
		return nil
	}
	sys := "sys_enter_"
	if exit {
		sys = "sys_exit_"
	}
	rank := map[string]int{}
	for _, tp := range tps {
		g, ev, _ := strings.Cut(tp, ":")
		r := 0
		switch {
		case ev == fn || ev == s:
			r = 1
		case g == "syscalls" && ev == sys+s:
			r = 2
		case g == "syscalls" && !strings.HasPrefix(ev, sys):
			// the other end of a syscall: not where this function is
		case hasWord(ev, s):
			r = 3
		}
		if r > 0 {
			rank[tp] = r
		}
	}
	out := make([]string, 0, len(rank))
	for tp := range rank {
		out = append(out, tp)
	}
	slices.SortFunc(out, func(a, b string) int {
		if rank[a] != rank[b] {
			return rank[a] - rank[b]
		}
		if len(a) != len(b) {
			return len(a) - len(b)
		}
		return strings.Compare(a, b)
	})
	if len(out) > maxAlternatives {
		out = out[:maxAlternatives]
	}
	return out
}

// hasWord reports whether s holds w between _-separated boundaries
// (sys_enter_clock_nanosleep holds nanosleep, not sleep).
func hasWord(s, w string) bool {
	for i := 0; ; {
		j := strings.Index(s[i:], w)
		if j < 0 {
			return false
		}
		j += i
		end := j + len(w)
		if (j == 0 || s[j-1] == '_') && (end == len(s) || s[end] == '_') {
			return true
		}
		i = j + 1
	}
}

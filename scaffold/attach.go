// SPDX-License-Identifier: Apache-2.0

package scaffold

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
)

// Attach is a parsed attach point: where a program runs.
type Attach struct {
	// Kind is the program type's section prefix: tracepoint, raw_tp,
	// tp_btf, kprobe, kretprobe, fentry, fexit, uprobe, uretprobe.
	Kind string
	// Group and Event name a tracepoint (Group only for Kind tracepoint).
	Group, Event string
	// Func is the kernel function of kprobe, kretprobe, fentry and fexit.
	Func string
	// Path and Symbol are the binary or library and the symbol of an
	// uprobe or uretprobe.
	Path, Symbol string
}

// Kinds are the attach kinds new writes programs for, in the order of the
// --attach help.
var Kinds = []string{"tracepoint", "raw_tp", "tp_btf", "kprobe", "kretprobe", "fentry", "fexit", "uprobe", "uretprobe"}

// Forms shows the form of each kind, for errors and help.
const Forms = "tracepoint:<group>:<event>, raw_tp:<event>, tp_btf:<event>, kprobe:<function>, kretprobe:<function>, " +
	"fentry:<function>, fexit:<function>, uprobe:<path>:<symbol>, uretprobe:<path>:<symbol>"

var (
	// Tracepoint groups and events are directory names under
	// /sys/kernel/tracing/events.
	eventRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*$`)
	// Kernel functions, with the compiler's suffixes (tcp_sendmsg.isra.0).
	funcRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.]*$`)
	// ELF symbols of user programs, versioned ones included (malloc@GLIBC_2.2.5).
	symbolRE = regexp.MustCompile(`^[A-Za-z_.$][A-Za-z0-9_.$@]*$`)
	// A bare library name, as the loader resolves through ld.so.cache.
	libRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.+-]*$`)
)

// maxPart bounds each part of an attach spec: kernel symbols are at most
// KSYM_NAME_LEN (512) bytes, paths PATH_MAX (4096).
const (
	maxName = 256
	maxPath = 4096
)

// ParseAttach parses an --attach (or --until) value. Errors name the flag
// (flag, e.g. "--attach") and the part that is wrong.
func ParseAttach(flag, spec string) (Attach, error) {
	kind, rest, ok := strings.Cut(spec, ":")
	if !ok || rest == "" {
		return Attach{}, fmt.Errorf("%s %s: want one of %s", flag, quote(spec), Forms)
	}
	a := Attach{Kind: kind}
	part := func(what, v string, re *regexp.Regexp, max int) error {
		switch {
		case v == "":
			return fmt.Errorf("%s %s: empty %s", flag, quote(spec), what)
		case len(v) > max:
			return fmt.Errorf("%s %s: %s longer than %d bytes", flag, quote(spec), what, max)
		case !re.MatchString(v):
			return fmt.Errorf("%s %s: %s %s has characters a %s cannot have", flag, quote(spec), what, quote(v), kind+" "+what)
		}
		return nil
	}
	switch kind {
	case "tracepoint":
		group, event, ok := strings.Cut(rest, ":")
		if !ok {
			return Attach{}, fmt.Errorf("%s %s: want tracepoint:<group>:<event>, as in tracepoint:signal:signal_generate", flag, quote(spec))
		}
		if err := part("group", group, eventRE, maxName); err != nil {
			return Attach{}, err
		}
		if err := part("event", event, eventRE, maxName); err != nil {
			return Attach{}, err
		}
		a.Group, a.Event = group, event
	case "raw_tp", "tp_btf":
		if err := part("event", rest, eventRE, maxName); err != nil {
			return Attach{}, err
		}
		a.Event = rest
	case "kprobe", "kretprobe", "fentry", "fexit":
		if err := part("function", rest, funcRE, maxName); err != nil {
			return Attach{}, err
		}
		a.Func = rest
	case "uprobe", "uretprobe":
		i := strings.LastIndex(rest, ":")
		if i < 0 {
			return Attach{}, fmt.Errorf("%s %s: want %s:<path>:<symbol>, as in %s:/usr/bin/bash:readline", flag, quote(spec), kind, kind)
		}
		path, sym := rest[:i], rest[i+1:]
		if err := part("symbol", sym, symbolRE, maxName); err != nil {
			return Attach{}, err
		}
		switch {
		case path == "":
			return Attach{}, fmt.Errorf("%s %s: empty path", flag, quote(spec))
		case len(path) > maxPath:
			return Attach{}, fmt.Errorf("%s %s: path longer than %d bytes", flag, quote(spec), maxPath)
		case strings.ContainsAny(path, ": \t\n\"\\"):
			return Attach{}, fmt.Errorf("%s %s: path %s has a ':', a blank, a quote or a backslash", flag, quote(spec), quote(path))
		case filepath.IsAbs(path):
			if filepath.Clean(path) != path {
				return Attach{}, fmt.Errorf("%s %s: path %s is not clean (want %s)", flag, quote(spec), quote(path), quote(filepath.Clean(path)))
			}
		case !libRE.MatchString(path):
			return Attach{}, fmt.Errorf("%s %s: path %s is neither absolute nor a library name (libc.so.6)", flag, quote(spec), quote(path))
		}
		for _, r := range path {
			if r < 0x20 || r == 0x7f {
				return Attach{}, fmt.Errorf("%s %s: path has a control character", flag, quote(spec))
			}
		}
		a.Path, a.Symbol = path, sym
	default:
		return Attach{}, fmt.Errorf("%s %s: unknown attach kind %s (known: %s); want one of %s",
			flag, quote(spec), quote(kind), strings.Join(Kinds, ", "), Forms)
	}
	return a, nil
}

// String is the spec form: tracepoint:sched:sched_process_exec.
func (a Attach) String() string { return a.Kind + ":" + a.target(":") }

// Section is the ELF section the loader attaches by:
// tracepoint/sched/sched_process_exec.
func (a Attach) Section() string { return a.Kind + "/" + a.target("/") }

// target is what follows the kind, with sep between a tracepoint's group
// and event.
func (a Attach) target(sep string) string {
	switch a.Kind {
	case "tracepoint":
		return a.Group + sep + a.Event
	case "raw_tp", "tp_btf":
		return a.Event
	case "uprobe", "uretprobe":
		return a.Path + ":" + a.Symbol
	}
	return a.Func
}

// Context is the C parameter of the program's function: what the program
// type passes. Every one compiles without knowing the event's arguments.
func (a Attach) Context() string {
	switch a.Kind {
	case "tracepoint", "raw_tp":
		return "void *ctx"
	case "tp_btf", "fentry", "fexit":
		return "__u64 *ctx"
	}
	return "struct pt_regs *ctx"
}

// End is the attach point where what a starts ends, for a histogram of the
// time between them: the return of the same function, or a syscall's exit
// tracepoint. ok is false when there is no such pair.
func (a Attach) End() (end Attach, ok bool) {
	end = a
	switch a.Kind {
	case "kprobe":
		end.Kind = "kretprobe"
	case "fentry":
		end.Kind = "fexit"
	case "uprobe":
		end.Kind = "uretprobe"
	case "tracepoint":
		switch {
		case a.Group == "raw_syscalls" && a.Event == "sys_enter":
			end.Event = "sys_exit"
		case a.Group == "syscalls" && strings.HasPrefix(a.Event, "sys_enter_"):
			end.Event = "sys_exit_" + strings.TrimPrefix(a.Event, "sys_enter_")
		default:
			return Attach{}, false
		}
	case "raw_tp", "tp_btf":
		if a.Event != "sys_enter" {
			return Attach{}, false
		}
		end.Event = "sys_exit"
	default:
		return Attach{}, false
	}
	return end, true
}

// quote prints a user's value in errors: %q, cut at 80 bytes.
func quote(s string) string {
	if len(s) > 80 {
		return fmt.Sprintf("%q...", s[:80])
	}
	return fmt.Sprintf("%q", s)
}

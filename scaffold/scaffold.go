// SPDX-License-Identifier: Apache-2.0

// Package scaffold writes a new user program: what `kernel_exporter new
// <name>` does. A program is <name>.bpf.c (BPF C, compiled by clang into
// the CO-RE object <name>.bpf.o) and <name>.yaml (which maps become which
// metrics); a Makefile builds the object and checks or runs it with the
// exporter.
//
// Two kinds of program:
//
//   - counter: one program at --attach counts events in a hash map keyed by
//     the task's name (comm): kernel_<name>_total{comm}.
//   - histogram: a program at --attach stores the time per thread, one at
//     --until (by default the matching return or syscall exit) observes the
//     elapsed time in an exp2 histogram in nanoseconds, by comm:
//     kernel_<name>_seconds{comm}.
//
// Headers come from an install when one is found beside the running binary
// (a release tarball's include/, or the .deb's
// /usr/share/kernel_exporter/include), else the copies embedded in the
// binary (package include) are written into <dir>/include. Either holds
// libbpf's BPF-side headers (<bpf/bpf_helpers.h> ...), so clang is the one
// tool the program needs besides the exporter. The C names the decoder
// reference in the install's docs (the tarball's docs/, the .deb's
// /usr/share/doc/kernel_exporter/docs) when one is found.
package scaffold

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"text/template"

	"github.com/kernel-exporter/kernel_exporter/include"
)

//go:embed templates/*.tmpl
var templates embed.FS

// Kinds of program.
const (
	KindCounter   = "counter"
	KindHistogram = "histogram"
)

// DefaultAttach is where a program attaches without --attach: every
// successful execve, cheap and easy to trigger.
const DefaultAttach = "tracepoint:sched:sched_process_exec"

// MaxName bounds a program's name: it prefixes the map and metric names,
// the C identifiers and the config name.
const MaxName = 40

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// CheckName validates a program name: lower-case letters, digits and _,
// starting with a letter, at most MaxName bytes (it becomes C identifiers,
// map and metric names and the config name).
func CheckName(name string) error {
	switch {
	case name == "":
		return errors.New("<name>: empty")
	case len(name) > MaxName:
		return fmt.Errorf("<name> %s: longer than %d bytes", quote(name), MaxName)
	case !nameRE.MatchString(name):
		return fmt.Errorf("<name> %s: want lower-case letters, digits and _, starting with a letter (it names the C functions, maps and metrics), as in exec_count", quote(name))
	case strings.HasSuffix(name, "_"), strings.Contains(name, "__"):
		return fmt.Errorf("<name> %s: no trailing or doubled _ (metric names are <name>_total, <name>_seconds)", quote(name))
	}
	return nil
}

// Program is what a new program is made from, validated.
type Program struct {
	Name   string
	Kind   string
	Attach Attach
	// Until is where a histogram's time ends (zero for a counter).
	Until Attach
}

// NewProgram validates the arguments of kernel_exporter new: the name,
// the kind, and the attach specs (until only for a histogram, and then
// defaulting to the end that matches attach). Errors name the argument.
func NewProgram(name, kind, attach, until string) (Program, error) {
	if err := CheckName(name); err != nil {
		return Program{}, err
	}
	p := Program{Name: name, Kind: kind}
	if kind != KindCounter && kind != KindHistogram {
		return Program{}, fmt.Errorf("--kind %s: want counter or histogram", quote(kind))
	}
	if attach == "" {
		attach = DefaultAttach
	}
	a, err := ParseAttach("--attach", attach)
	if err != nil {
		return Program{}, err
	}
	p.Attach = a
	switch {
	case kind == KindCounter && until != "":
		return Program{}, fmt.Errorf("--until %s: only a --kind histogram has an end", quote(until))
	case kind == KindHistogram && until != "":
		if p.Until, err = ParseAttach("--until", until); err != nil {
			return Program{}, err
		}
	case kind == KindHistogram:
		end, ok := a.End()
		if !ok {
			return Program{}, fmt.Errorf("--kind histogram times from --attach to --until: --attach %s has no matching end "+
				"(kprobe, fentry and uprobe end at their return, syscall entry tracepoints at the exit): give --until", a)
		}
		p.Until = end
	}
	if p.Kind == KindHistogram && p.Until.Section() == p.Attach.Section() {
		return Program{}, fmt.Errorf("--until %s: the same attach point as --attach", p.Until)
	}
	return p, nil
}

// Files are the files of a new program, by name relative to its directory.
type Files map[string][]byte

// Build holds how the Makefile builds and runs the program.
type Build struct {
	// Clang is the compiler (clang-19, or the one found).
	Clang string
	// Exporter is the kernel_exporter binary the Makefile runs.
	Exporter string
	// Include is the header directory (-I), "include" for the copy
	// written beside the program.
	Include string
	// Docs is the directory of the docs the C refers to; "" means
	// "docs" (a release's or a checkout's).
	Docs string
}

// Render returns the program's <name>.bpf.c, <name>.yaml and Makefile.
func (p Program) Render(b Build) (Files, error) {
	if b.Docs == "" {
		b.Docs = "docs"
	}
	data := map[string]any{
		"Name":      p.Name,
		"Attach":    p.Attach.String(),
		"Section":   p.Attach.Section(),
		"Context":   p.Attach.Context(),
		"Hint":      hint(p.Attach),
		"MaxBucket": 36,
		"SumBucket": 37,
		"Clang":     b.Clang,
		"Exporter":  b.Exporter,
		"Include":   b.Include,
		"Docs":      b.Docs,
	}
	if p.Kind == KindHistogram {
		data["Until"] = p.Until.String()
		data["UntilSection"] = p.Until.Section()
		data["UntilContext"] = p.Until.Context()
	}
	out := Files{}
	for file, tmpl := range map[string]string{
		p.Name + ".bpf.c": p.Kind + ".bpf.c.tmpl",
		p.Name + ".yaml":  p.Kind + ".yaml.tmpl",
		"Makefile":        "Makefile.tmpl",
	} {
		t, err := template.New(tmpl).Option("missingkey=error").ParseFS(templates, "templates/"+tmpl)
		if err != nil {
			return nil, err
		}
		var buf bytes.Buffer
		if err := t.Execute(&buf, data); err != nil {
			return nil, fmt.Errorf("%s: %w", tmpl, err)
		}
		out[file] = buf.Bytes()
	}
	return out, nil
}

// hint tells how to read the event's arguments, by attach kind.
func hint(a Attach) string {
	switch a.Kind {
	case "tracepoint":
		if raw, ok := syscallContext(a); ok {
			args := "long args[6], the syscall's arguments in order"
			if strings.HasSuffix(raw, "exit") {
				args = "long ret, the syscall's return value"
			}
			return "\n * The tracepoint's arguments: declare ctx as struct " + raw + " *ctx\n * (syscall tracepoints share it; see vmlinux.h and\n * /sys/kernel/tracing/events/" + a.Group + "/" + a.Event +
				"/format) and read its\n * " + args + "."
		}
		return "\n * The tracepoint's arguments: declare ctx as struct trace_event_raw_" + a.Event +
			" *ctx\n * (or its event class's struct; see vmlinux.h and\n * /sys/kernel/tracing/events/" + a.Group + "/" + a.Event +
			"/format) and read its fields:\n * signal:signal_generate's int sig, decoded by the signal decoder, counts\n * signals by name (SIGKILL, SIGCHLD)."
	case "raw_tp", "tp_btf":
		return "\n * The event's arguments are in ctx, in the order of its TP_PROTO; with\n * <bpf/bpf_tracing.h>, BPF_PROG names them."
	case "fentry", "fexit":
		return "\n * The function's arguments: BPF_PROG from <bpf/bpf_tracing.h> names them."
	}
	return "\n * The function's arguments: PT_REGS_PARM1(ctx) ... from <bpf/bpf_tracing.h>."
}

// syscallContext returns the struct of a syscall tracepoint's context:
// trace_event_raw_sys_enter for raw_syscalls:sys_enter and
// syscalls:sys_enter_*, trace_event_raw_sys_exit for the exits (the
// per-syscall events have no trace_event_raw_<event> struct of their own;
// both structs lay out their fields as those events do: the syscall
// number's 8 bytes, then args[6] or ret).
func syscallContext(a Attach) (string, bool) {
	switch {
	case a.Group == "raw_syscalls" && (a.Event == "sys_enter" || a.Event == "sys_exit"):
		return "trace_event_raw_" + a.Event, true
	case a.Group == "syscalls" && strings.HasPrefix(a.Event, "sys_enter_"):
		return "trace_event_raw_sys_enter", true
	case a.Group == "syscalls" && strings.HasPrefix(a.Event, "sys_exit_"):
		return "trace_event_raw_sys_exit", true
	}
	return "", false
}

// Write writes files into dir, creating it. Unless force is set it refuses
// to overwrite any file that exists. It returns the paths written.
func (f Files) Write(dir string, force bool) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("--dir: %w", err)
	}
	names := make([]string, 0, len(f))
	for name := range f {
		names = append(names, name)
	}
	slices.Sort(names)
	if !force {
		for _, name := range names {
			if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
				return nil, fmt.Errorf("--dir %s: %s exists (--force overwrites it)", dir, name)
			}
		}
	}
	var written []string
	for _, name := range names {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, f[name], 0o644); err != nil {
			return written, err
		}
		written = append(written, path)
	}
	return written, nil
}

// InstalledInclude returns the header directory of an install of the
// binary exe when it holds what a program for arch needs (vmlinux.h,
// <arch>/vmlinux.h, kernel_exporter/maps.bpf.h, bpf/bpf_helpers.h), or "".
// Where it looks:
// <exe's dir>/include (a release tarball, or a checkout's ./kernel_exporter)
// and <exe's dir>/../share/kernel_exporter/include (the .deb: /usr/bin and
// /usr/share).
func InstalledInclude(exe, arch string) string {
	if exe == "" || arch == "" {
		return ""
	}
	dir := filepath.Dir(exe)
	for _, c := range []string{filepath.Join(dir, "include"), filepath.Join(dir, "..", "share", "kernel_exporter", "include")} {
		ok := true
		for _, f := range []string{"vmlinux.h", arch + "/vmlinux.h", "kernel_exporter/maps.bpf.h", "bpf/bpf_helpers.h"} {
			if st, err := os.Stat(filepath.Join(c, f)); err != nil || !st.Mode().IsRegular() {
				ok = false
				break
			}
		}
		if ok {
			return filepath.Clean(c)
		}
	}
	return ""
}

// InstalledDocs returns the docs directory of an install of the binary exe
// (one holding configuration.md), or "": <exe's dir>/docs (a release
// tarball) or <exe's dir>/../share/doc/kernel_exporter/docs (the .deb).
// A path a Makefile or C comment would need quoted in is left out.
func InstalledDocs(exe string) string {
	if exe == "" {
		return ""
	}
	dir := filepath.Dir(exe)
	for _, c := range []string{filepath.Join(dir, "docs"), filepath.Join(dir, "..", "share", "doc", "kernel_exporter", "docs")} {
		if st, err := os.Stat(filepath.Join(c, "configuration.md")); err == nil && st.Mode().IsRegular() {
			if c = filepath.Clean(c); plainPath.MatchString(c) {
				return c
			}
		}
	}
	return ""
}

// WriteHeaders writes the embedded headers into dir/include and returns
// the files written.
func WriteHeaders(dir string) ([]string, error) {
	if include.Arch == "" {
		return nil, errors.New("no vmlinux.h is embedded for this architecture: generate one (tools/vmlinux.sh) and give its directory to make INCLUDE=")
	}
	return include.Write(filepath.Join(dir, "include"))
}

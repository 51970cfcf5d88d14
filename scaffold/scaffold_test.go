// SPDX-License-Identifier: Apache-2.0

package scaffold

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/kernel-exporter/kernel_exporter/config"
	"github.com/kernel-exporter/kernel_exporter/include"
	"github.com/kernel-exporter/kernel_exporter/internal/testenv"
	"github.com/kernel-exporter/kernel_exporter/loader"
)

func TestParseAttach(t *testing.T) {
	for _, tc := range []struct {
		spec, section, err string
	}{
		{"tracepoint:signal:signal_generate", "tracepoint/signal/signal_generate", ""},
		{"raw_tp:sched_switch", "raw_tp/sched_switch", ""},
		{"tp_btf:sched_wakeup", "tp_btf/sched_wakeup", ""},
		{"kprobe:tcp_sendmsg.isra.0", "kprobe/tcp_sendmsg.isra.0", ""},
		{"kretprobe:vfs_read", "kretprobe/vfs_read", ""},
		{"fentry:vfs_read", "fentry/vfs_read", ""},
		{"fexit:vfs_read", "fexit/vfs_read", ""},
		{"uprobe:/usr/bin/bash:readline", "uprobe//usr/bin/bash:readline", ""},
		{"uretprobe:libc.so.6:malloc", "uretprobe/libc.so.6:malloc", ""},
		{"uprobe:/lib/x86_64-linux-gnu/libc.so.6:malloc@GLIBC_2.2.5", "uprobe//lib/x86_64-linux-gnu/libc.so.6:malloc@GLIBC_2.2.5", ""},
		{"", "", `--attach "": want one of tracepoint:<group>:<event>`},
		{"tracepoint", "", `--attach "tracepoint": want one of`},
		{"tracepoint:sched", "", `--attach "tracepoint:sched": want tracepoint:<group>:<event>`},
		{"tracepoint::x", "", `--attach "tracepoint::x": empty group`},
		{"tracepoint:sched:", "", `--attach "tracepoint:sched:": empty event`},
		{"tracepoint:a/b:c", "", `group "a/b" has characters`},
		{"tracepoint:a:b c", "", `event "b c" has characters`},
		{"kprobe:1abc", "", `function "1abc" has characters`},
		{"kprobe:a*b", "", `function "a*b" has characters`},
		{"fentry:" + strings.Repeat("a", 300), "", "function longer than 256 bytes"},
		{"uprobe:/bin/bash", "", `--attach "uprobe:/bin/bash": want uprobe:<path>:<symbol>`},
		{"uprobe:/bin/bash:", "", "empty symbol"},
		{"uprobe::readline", "", "empty path"},
		{"uprobe:bin/bash:readline", "", `path "bin/bash" is neither absolute nor a library name`},
		{"uprobe:/bin/../bin/bash:readline", "", "is not clean"},
		{"uprobe:/my prog:main", "", "has a ':', a blank"},
		{"uprobe:/bin/bash:read line", "", `symbol "read line" has characters`},
		{"usdt:/x:y", "", `unknown attach kind "usdt"`},
		{"Tracepoint:a:b", "", `unknown attach kind "Tracepoint"`},
	} {
		a, err := ParseAttach("--attach", tc.spec)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%q: %v", tc.spec, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: error %v, want one with %q", tc.spec, err, tc.err)
		case tc.err == "" && (a.Section() != tc.section || a.String() != tc.spec):
			t.Errorf("%q: section %q string %q, want %q and the spec", tc.spec, a.Section(), a.String(), tc.section)
		}
	}
	if _, err := ParseAttach("--until", "x"); err == nil || !strings.HasPrefix(err.Error(), "--until ") {
		t.Errorf("--until error does not name --until: %v", err)
	}
}

func TestNewProgram(t *testing.T) {
	for _, tc := range []struct {
		name, kind, attach, until string
		wantUntil, err            string
	}{
		{"exec_count", "counter", "", "", "", ""},
		{"reads", "histogram", "kprobe:vfs_read", "", "kretprobe:vfs_read", ""},
		{"reads", "histogram", "fentry:vfs_read", "", "fexit:vfs_read", ""},
		{"rl", "histogram", "uprobe:/usr/bin/bash:readline", "", "uretprobe:/usr/bin/bash:readline", ""},
		{"getppid", "histogram", "tracepoint:syscalls:sys_enter_getppid", "", "tracepoint:syscalls:sys_exit_getppid", ""},
		{"sys", "histogram", "tracepoint:raw_syscalls:sys_enter", "", "tracepoint:raw_syscalls:sys_exit", ""},
		{"sys", "histogram", "raw_tp:sys_enter", "", "raw_tp:sys_exit", ""},
		{"wake", "histogram", "tp_btf:sched_wakeup", "tp_btf:sched_switch", "tp_btf:sched_switch", ""},
		{"", "counter", "", "", "", "<name>: empty"},
		{"Exec", "counter", "", "", "", `<name> "Exec": want lower-case`},
		{"1x", "counter", "", "", "", `<name> "1x"`},
		{"a-b", "counter", "", "", "", `<name> "a-b"`},
		{"a__b", "counter", "", "", "", "no trailing or doubled _"},
		{"ab_", "counter", "", "", "", "no trailing or doubled _"},
		{strings.Repeat("a", 41), "counter", "", "", "", "longer than 40 bytes"},
		{"x", "gauge", "", "", "", `--kind "gauge": want counter or histogram`},
		{"x", "counter", "", "kprobe:f", "", `--until "kprobe:f": only a --kind histogram`},
		{"x", "histogram", "tracepoint:sched:sched_process_exec", "", "", "--attach tracepoint:sched:sched_process_exec has no matching end"},
		{"x", "histogram", "kprobe:f", "kprobe:f", "", "--until kprobe:f: the same attach point"},
		{"x", "histogram", "kprobe:f", "bogus", "", `--until "bogus"`},
		{"x", "counter", "kprobe", "", "", `--attach "kprobe"`},
	} {
		p, err := NewProgram(tc.name, tc.kind, tc.attach, tc.until)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%+v: %v", tc, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%+v: error %v, want one with %q", tc, err, tc.err)
		case tc.err == "" && tc.kind == KindHistogram && p.Until.String() != tc.wantUntil:
			t.Errorf("%+v: until %s, want %s", tc, p.Until, tc.wantUntil)
		case tc.err == "" && tc.attach == "" && p.Attach.String() != DefaultAttach:
			t.Errorf("default attach %s, want %s", p.Attach, DefaultAttach)
		}
	}
}

// allPrograms is one counter per attach kind and one histogram per pair.
func allPrograms(t *testing.T) []Program {
	t.Helper()
	var ps []Program
	for i, spec := range []string{"tracepoint:signal:signal_generate", "raw_tp:sched_switch", "tp_btf:sched_wakeup",
		"kprobe:vfs_read", "kretprobe:vfs_read", "fentry:vfs_read", "fexit:vfs_read",
		"uprobe:/usr/bin/bash:readline", "uretprobe:libc.so.6:malloc"} {
		p, err := NewProgram("c"+string(rune('a'+i)), KindCounter, spec, "")
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	for i, spec := range []string{"tracepoint:syscalls:sys_enter_getppid", "kprobe:vfs_read", "fentry:vfs_read",
		"uprobe:/usr/bin/bash:readline", "tp_btf:sys_enter"} {
		p, err := NewProgram("h"+string(rune('a'+i)), KindHistogram, spec, "")
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	return ps
}

// TestRender: every kind renders a source whose section, licence and key
// layout match its YAML, which the config package accepts.
func TestRender(t *testing.T) {
	for _, p := range allPrograms(t) {
		files, err := p.Render(Build{Clang: "clang-19", Exporter: "/usr/bin/kernel_exporter", Include: "include"})
		if err != nil {
			t.Fatalf("%s: %v", p.Attach, err)
		}
		src := string(files[p.Name+".bpf.c"])
		for _, want := range []string{
			"// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause\n",
			`char LICENSE[] SEC("license") = "Dual BSD/GPL";`,
			`SEC("` + p.Attach.Section() + `")`,
			"(" + p.Attach.Context() + ")",
		} {
			if !strings.Contains(src, want) {
				t.Errorf("%s %s: source lacks %q:\n%s", p.Kind, p.Attach, want, src)
			}
		}
		if strings.Contains(src, "<no value>") {
			t.Errorf("%s: a template value is missing:\n%s", p.Attach, src)
		}
		cfg, err := config.Parse(p.Name+".yaml", files[p.Name+".yaml"])
		if err != nil {
			t.Fatalf("%s %s: the YAML does not parse: %v\n%s", p.Kind, p.Attach, err, files[p.Name+".yaml"])
		}
		// The labels are inferred from the key's BTF: comm's decoder
		// only, no sizes.
		want := p.Name + "_total"
		var got string
		var labels []config.Label
		if n := len(cfg.Metrics.Counters); n == 1 && len(cfg.Metrics.Histograms) == 0 {
			got, labels = cfg.Metrics.Counters[0].Name, cfg.Metrics.Counters[0].Labels
		}
		if p.Kind == KindHistogram {
			want = p.Name + "_seconds"
			if n := len(cfg.Metrics.Histograms); n == 1 && len(cfg.Metrics.Counters) == 0 {
				got, labels = cfg.Metrics.Histograms[0].Name, cfg.Metrics.Histograms[0].Labels
			}
			if !strings.Contains(src, `SEC("`+p.Until.Section()+`")`) {
				t.Errorf("%s: no program at %s", p.Attach, p.Until.Section())
			}
		}
		if got != want || !config.LabelOverrides(labels) || len(labels) != 1 || labels[0].Name != "comm" ||
			len(labels[0].Decoders) != 1 || labels[0].Decoders[0].Name != "string" {
			t.Errorf("%s %s: YAML metric %q with labels %+v, want %s with comm's decoder string and no sizes (from BTF)", p.Kind, p.Attach, got, labels, want)
		}
		mk := string(files["Makefile"])
		for _, want := range []string{"NAME            := " + p.Name + "\n", "CLANG           ?= clang-19\n",
			"KERNEL_EXPORTER ?= /usr/bin/kernel_exporter\n", "INCLUDE         ?= include\n", "-D__TARGET_ARCH_$(ARCH)"} {
			if !strings.Contains(mk, want) {
				t.Errorf("Makefile lacks %q:\n%s", want, mk)
			}
		}
	}
}

// TestRenderCompiles compiles rendered programs, one of each template and
// context type, with clang against the embedded headers, and parses each
// object as the exporter does.
func TestRenderCompiles(t *testing.T) {
	clang := ""
	for _, c := range Clangs {
		if p, err := exec.LookPath(c); err == nil {
			clang = p
			break
		}
	}
	if clang == "" {
		testenv.SkipOrFail(t, "no clang (%s): make test-deps installs clang-19", strings.Join(Clangs, ", "))
	}
	if include.Arch == "" {
		t.Skip("no vmlinux.h embedded for this architecture")
	}
	dir := t.TempDir()
	if _, err := WriteHeaders(dir); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2)
	for _, p := range allPrograms(t) {
		// One of each template and context type (clang takes seconds each).
		switch p.Attach.Kind {
		case "raw_tp", "fexit", "kretprobe", "uprobe":
			if p.Kind == KindCounter {
				continue
			}
		}
		if p.Kind == KindHistogram && p.Attach.Kind != "tracepoint" && p.Attach.Kind != "fentry" {
			continue
		}
		files, err := p.Render(Build{Clang: clang, Include: "include"})
		if err != nil {
			t.Fatal(err)
		}
		src := filepath.Join(dir, p.Name+".bpf.c")
		if err := os.WriteFile(src, files[p.Name+".bpf.c"], 0o644); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			obj := strings.TrimSuffix(src, ".c") + ".o"
			cmd := exec.Command(clang, "-target", "bpf", "-D__TARGET_ARCH_"+include.Arch, "-O2", "-g", "-Wall", "-Werror",
				"-I", filepath.Join(dir, "include"), "-c", src, "-o", obj)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("%s %s: clang: %v\n%s", p.Kind, p.Attach, err, out)
				return
			}
			data, err := os.ReadFile(obj)
			if err != nil {
				t.Error(err)
				return
			}
			spec, err := loader.ParseObject(p.Name+".bpf.o", data)
			if err != nil {
				t.Errorf("%s %s: %v", p.Kind, p.Attach, err)
				return
			}
			want := 1
			if p.Kind == KindHistogram {
				want = 2
			}
			if len(spec.Programs) != want {
				t.Errorf("%s %s: %d programs, want %d", p.Kind, p.Attach, len(spec.Programs), want)
			}
			for _, prog := range spec.Programs {
				if prog.License != "Dual BSD/GPL" {
					t.Errorf("%s: license %q", prog.Name, prog.License)
				}
			}
		}()
	}
	wg.Wait()
}

// TestRunHeaders: the bare binary writes its embedded headers beside the
// program; an install's headers (the .deb's layout) are used in place.
func TestRunHeaders(t *testing.T) {
	if include.Arch == "" {
		t.Skip("no vmlinux.h embedded for this architecture")
	}
	noClang := func(string) (string, error) { return "", errors.New("not found") }
	base := t.TempDir()
	var out, errOut bytes.Buffer
	bare := Options{Name: "bare", Kind: KindCounter, Dir: filepath.Join(base, "bare"), Exe: filepath.Join(base, "kernel_exporter"),
		Stdout: &out, Stderr: &errOut, LookPath: noClang}
	if rc := Run(bare); rc != 0 {
		t.Fatalf("Run: %d\n%s", rc, errOut.String())
	}
	for _, f := range []string{"bare.bpf.c", "bare.yaml", "Makefile", "include/vmlinux.h", "include/" + include.Arch + "/vmlinux.h",
		"include/kernel_exporter/maps.bpf.h"} {
		if _, err := os.Stat(filepath.Join(bare.Dir, f)); err != nil {
			t.Errorf("bare binary: %v", err)
		}
	}
	for _, want := range []string{"apt-get install clang-19", "cd " + bare.Dir, "make check",
		"kernel_bare_total", "embedded in this binary"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	// libbpf's headers come with the embedded ones: no libbpf-dev needed.
	if strings.Contains(out.String(), "libbpf") {
		t.Errorf("output asks for libbpf:\n%s", out.String())
	}
	if _, err := os.Stat(filepath.Join(bare.Dir, "include/bpf/bpf_helpers.h")); err != nil {
		t.Errorf("bare binary: %v", err)
	}
	if c, _ := os.ReadFile(filepath.Join(bare.Dir, "bare.bpf.c")); !bytes.Contains(c, []byte(" * docs/configuration.md#decoders.")) {
		t.Errorf("bare.bpf.c does not name docs/configuration.md#decoders:\n%s", c)
	}
	if mk, _ := os.ReadFile(filepath.Join(bare.Dir, "Makefile")); !bytes.Contains(mk, []byte("KERNEL_EXPORTER ?= "+bare.Exe+"\n")) {
		t.Errorf("Makefile does not run %s:\n%s", bare.Exe, mk)
	}

	// A second run refuses to overwrite, and --force does.
	errOut.Reset()
	if rc := Run(bare); rc != 2 || !strings.Contains(errOut.String(), "--dir "+bare.Dir+": Makefile exists (--force overwrites it)") {
		t.Errorf("second Run: %d %s", rc, errOut.String())
	}
	bare.Force = true
	if rc := Run(bare); rc != 0 {
		t.Errorf("Run --force: %d %s", rc, errOut.String())
	}

	// An install: <prefix>/bin/kernel_exporter and <prefix>/share/kernel_exporter/include.
	prefix := filepath.Join(base, "usr")
	inc := filepath.Join(prefix, "share", "kernel_exporter", "include")
	if _, err := include.Write(inc); err != nil {
		t.Fatal(err)
	}
	docs := filepath.Join(prefix, "share", "doc", "kernel_exporter", "docs")
	if err := os.MkdirAll(docs, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(docs, "configuration.md"), []byte("# Configuration\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	installed := Options{Name: "inst", Kind: KindHistogram, Attach: "kprobe:vfs_read", Dir: filepath.Join(base, "inst"),
		Exe: filepath.Join(prefix, "bin", "kernel_exporter"), Stdout: &out, Stderr: &errOut,
		LookPath: func(c string) (string, error) { return "/usr/bin/" + c, nil }}
	if rc := Run(installed); rc != 0 {
		t.Fatalf("Run: %d %s", rc, errOut.String())
	}
	if _, err := os.Stat(filepath.Join(installed.Dir, "include")); !os.IsNotExist(err) {
		t.Errorf("headers written although installed: %v", err)
	}
	mk, _ := os.ReadFile(filepath.Join(installed.Dir, "Makefile"))
	if !bytes.Contains(mk, []byte("INCLUDE         ?= "+inc+"\n")) || !bytes.Contains(mk, []byte("CLANG           ?= clang-19\n")) {
		t.Errorf("Makefile does not use %s and clang-19:\n%s", inc, mk)
	}
	if strings.Contains(out.String(), "note:") || !strings.Contains(out.String(), "headers: "+inc) {
		t.Errorf("output:\n%s", out.String())
	}
	if c, _ := os.ReadFile(filepath.Join(installed.Dir, "inst.bpf.c")); !bytes.Contains(c, []byte(" * "+docs+"/configuration.md#decoders.")) {
		t.Errorf("inst.bpf.c does not name the installed %s/configuration.md#decoders:\n%s", docs, c)
	}

	// Bad arguments exit 2 and name the argument.
	for _, o := range []Options{
		{Name: "Bad", Kind: KindCounter},
		{Name: "x", Kind: KindCounter, Attach: "kprobe:"},
		{Name: "x", Kind: KindCounter, Dir: filepath.Join(bare.Dir, "Makefile")},
	} {
		errOut.Reset()
		o.Stdout, o.Stderr, o.LookPath = &out, &errOut, noClang
		if rc := Run(o); rc != 2 || !strings.Contains(errOut.String(), "kernel_exporter new: ") {
			t.Errorf("Run(%+v) = %d, %s", o, rc, errOut.String())
		}
	}
}

// TestHintStructs: the struct a counter's C tells authors to declare ctx
// as exists in the embedded vmlinux.h, for syscalls:sys_enter_*/sys_exit_*
// (which have no struct of their own) as for an ordinary tracepoint.
func TestHintStructs(t *testing.T) {
	if include.Arch == "" {
		t.Skip("no vmlinux.h embedded for this architecture")
	}
	vmlinux, err := include.Read(include.Arch + "/vmlinux.h")
	if err != nil {
		t.Fatal(err)
	}
	for spec, want := range map[string]string{
		"tracepoint:syscalls:sys_enter_clock_nanosleep": "trace_event_raw_sys_enter",
		"tracepoint:syscalls:sys_exit_openat":           "trace_event_raw_sys_exit",
		"tracepoint:raw_syscalls:sys_enter":             "trace_event_raw_sys_enter",
		"tracepoint:signal:signal_generate":             "trace_event_raw_signal_generate",
	} {
		p, err := NewProgram("hint", KindCounter, spec, "")
		if err != nil {
			t.Fatal(err)
		}
		files, err := p.Render(Build{Clang: "clang-19", Include: "include"})
		if err != nil {
			t.Fatal(err)
		}
		src := string(files["hint.bpf.c"])
		if !strings.Contains(src, "declare ctx as struct "+want+" *ctx") {
			t.Errorf("%s: the C does not say to declare ctx as struct %s:\n%s", spec, want, src)
		}
		if !bytes.Contains(vmlinux, []byte("\nstruct "+want+" {\n")) {
			t.Errorf("%s: struct %s is not in %s/vmlinux.h", spec, want, include.Arch)
		}
	}
}

// fakeKernel has no kprobes and no fentry, and the tracepoints given.
func fakeKernel(tps ...string) *Kernel {
	return &Kernel{
		HaveFeature: func(name string) error {
			switch name {
			case "kprobes":
				return fmt.Errorf("kprobes %w (no kprobe PMU or kprobe_events)", loader.ErrUnsupported)
			case "fentry":
				return fmt.Errorf("fentry/fexit %w: load probe program for bpf_fentry_test1: load program: operation not permitted", loader.ErrUnsupported)
			}
			return nil
		},
		Tracepoints:   func() []string { return tps },
		BTFTracepoint: func(ev string) bool { return ev == "tcp_sendmsg_locked" },
	}
}

// TestCheckKernel: an attach kind the kernel lacks is refused with what
// works instead, by name: tracepoints (the entry ones for a kprobe or
// fentry, the exit ones for a kretprobe or fexit), then raw_tp and tp_btf
// forms of real tracepoints.
func TestCheckKernel(t *testing.T) {
	k := fakeKernel("syscalls:sys_enter_nanosleep", "syscalls:sys_exit_nanosleep", "syscalls:sys_enter_clock_nanosleep",
		"syscalls:sys_exit_clock_nanosleep", "tcp:tcp_sendmsg_locked", "sched:sched_switch", "timer:hrtimer_start")
	const force = "; or --no-kernel-check to write it anyway (for another kernel)"
	for _, tc := range []struct {
		attach string
		root   bool
		want   string
	}{
		{"kprobe:do_nanosleep", true, "--attach kprobe:do_nanosleep: kprobes not supported by this kernel (no kprobe PMU or kprobe_events); what works here, by name: tracepoint:syscalls:sys_enter_nanosleep, tracepoint:syscalls:sys_enter_clock_nanosleep" + force},
		{"kretprobe:do_nanosleep", true, "--attach kretprobe:do_nanosleep: kprobes not supported by this kernel (no kprobe PMU or kprobe_events); what works here, by name: tracepoint:syscalls:sys_exit_nanosleep, tracepoint:syscalls:sys_exit_clock_nanosleep" + force},
		{"fentry:tcp_sendmsg.isra.0", true, "--attach fentry:tcp_sendmsg.isra.0: fentry/fexit not supported by this kernel: load probe program for bpf_fentry_test1: load program: operation not permitted; what works here, by name: tracepoint:tcp:tcp_sendmsg_locked, raw_tp:tcp_sendmsg_locked, tp_btf:tcp_sendmsg_locked" + force},
		{"kprobe:__x64_sys_nanosleep", false, "--attach kprobe:__x64_sys_nanosleep: kprobes not supported by this kernel (no kprobe PMU or kprobe_events); what works here, by name: tracepoint:syscalls:sys_enter_nanosleep, tracepoint:syscalls:sys_enter_clock_nanosleep" + force},
		{"kprobe:zz_nothing", true, "--attach kprobe:zz_nothing: kprobes not supported by this kernel (no kprobe PMU or kprobe_events); no tracepoint is named like it: look for one in /sys/kernel/tracing/events (tracepoint:<group>:<event>)" + force},
		{"fentry:vfs_read", false, ""}, // not root: fentry's probe cannot tell
		{"tp_btf:sched_switch", true, ""},
		{"tracepoint:sched:sched_switch", true, ""},
	} {
		a, err := ParseAttach("--attach", tc.attach)
		if err != nil {
			t.Fatal(err)
		}
		err = k.CheckKernel("--attach", a, tc.root)
		if got := fmt.Sprint(err); (tc.want == "" && err != nil) || (tc.want != "" && got != tc.want) {
			t.Errorf("%s:\n got: %v\nwant: %s", tc.attach, err, tc.want)
		}
	}

	// Run refuses, writing nothing; without CheckKernel it writes.
	var out, errOut bytes.Buffer
	o := Options{Name: "kp", Kind: KindHistogram, Attach: "kprobe:do_nanosleep", Dir: filepath.Join(t.TempDir(), "kp"), CheckKernel: true, Kernel: k,
		Stdout: &out, Stderr: &errOut, LookPath: func(c string) (string, error) { return "/usr/bin/" + c, nil }}
	if rc := Run(o); rc != 2 || !strings.HasPrefix(errOut.String(), "kernel_exporter new: --attach kprobe:do_nanosleep: kprobes not supported") {
		t.Errorf("Run = %d, %s", rc, errOut.String())
	}
	if _, err := os.Stat(o.Dir); !os.IsNotExist(err) {
		t.Errorf("refused, but %s exists (%v)", o.Dir, err)
	}
	o.CheckKernel = false
	if rc := Run(o); rc != 0 {
		t.Errorf("Run without the kernel check = %d, %s", rc, errOut.String())
	}
}

// SPDX-License-Identifier: Apache-2.0

package loader

import (
	"errors"
	"strings"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/kernel-exporter/kernel_exporter/config"
)

func testSpec(sections map[string]string) *ebpf.CollectionSpec {
	spec := &ebpf.CollectionSpec{Programs: map[string]*ebpf.ProgramSpec{}}
	for name, sec := range sections {
		_, target, _ := strings.Cut(sec, "/")
		spec.Programs[name] = &ebpf.ProgramSpec{Name: name, SectionName: sec, AttachTo: target}
	}
	return spec
}

func testConfig(t *testing.T, yaml string) *config.Config {
	t.Helper()
	c, err := config.Parse("t.yaml", []byte(yaml+`metrics:
  counters:
    - name: c
      help: h
      labels:
        - name: l
          size: 8
          decoders:
            - name: uint
`))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestApplyAttachTo(t *testing.T) {
	spec := testSpec(map[string]string{"e": "fentry/do_sendfile", "k": "kretprobe/do_sendfile", "tp": "tracepoint/syscalls/sys_enter_fsync"})
	cfg := testConfig(t, "attach_to:\n  e: vfs_read\n  k: vfs_read\n")
	if err := applyAttachTo(spec, cfg); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"e", "k"} {
		ps := spec.Programs[name]
		if ps.AttachTo != "vfs_read" || !strings.HasSuffix(ps.SectionName, "/vfs_read") {
			t.Errorf("%s: section %q attach_to %q, want .../vfs_read", name, ps.SectionName, ps.AttachTo)
		}
	}
	if got := spec.Programs["k"].SectionName; got != "kretprobe/vfs_read" {
		t.Errorf("kretprobe section = %q", got)
	}

	for _, tc := range []struct{ yaml, want string }{
		{"attach_to:\n  tp: vfs_read\n", `t.yaml:2: attach_to.tp: program "tp" has section "tracepoint/syscalls/sys_enter_fsync": only kprobe, kretprobe, fentry and fexit programs take a kernel function`},
		{"attach_to:\n  nope: vfs_read\n", `t.yaml:2: attach_to.nope: program "nope" not found in  (programs: [e k tp])`},
	} {
		err := applyAttachTo(testSpec(map[string]string{"e": "fentry/x", "k": "kprobe/x", "tp": "tracepoint/syscalls/sys_enter_fsync"}), testConfig(t, tc.yaml))
		if err == nil || err.Error() != tc.want {
			t.Errorf("error\n got: %v\nwant: %s", err, tc.want)
		}
	}
}

func TestPrepare(t *testing.T) {
	spec := testSpec(map[string]string{"a_fentry": "fentry/f", "a_kprobe": "kprobe/f", "other": "kprobe/g"})
	cfg := testConfig(t, "alternatives:\n  - name: a\n    programs: [a_fentry, a_kprobe]\n")

	// Programs in a group are checked per attempt, not here.
	if err := prepare(spec, cfg, Options{DisableAttach: []string{"fentry"}}); err != nil {
		t.Errorf("fentry disabled, grouped fentry program: %v", err)
	}
	// Programs outside groups must not be of a disabled kind.
	err := prepare(spec, cfg, Options{DisableAttach: []string{"kprobe"}})
	if err == nil || err.Error() != "program other (kprobe/g): kprobe programs are disabled by --attach.disable" {
		t.Errorf("kprobe disabled: %v", err)
	}
	// Every program named in a group exists.
	cfg = testConfig(t, "alternatives:\n  - name: a\n    programs: [a_fentry, [a_kprobe, missing]]\n")
	err = prepare(spec, cfg, Options{})
	if err == nil || err.Error() != `t.yaml:3: alternatives[0].programs[1]: program "missing" not found in  (programs: [a_fentry a_kprobe other])` {
		t.Errorf("missing program: %v", err)
	}
	// Requirements come first.
	cfg = testConfig(t, "requires:\n  kernel: \"999.0\"\n")
	err = prepare(spec, cfg, Options{})
	if err == nil || !strings.HasPrefix(err.Error(), "requires kernel >= 999.0, running ") {
		t.Errorf("requires: %v", err)
	}
}

func TestCanonicalKind(t *testing.T) {
	for sec, want := range map[string]string{
		"tp/sched/sched_switch":         "tracepoint",
		"tracepoint/sched/sched_switch": "tracepoint",
		"raw_tracepoint/sched_switch":   "raw_tp",
		"raw_tp/sched_switch":           "raw_tp",
		"fexit/do_sendfile":             "fexit",
		"kretprobe/do_sendfile":         "kretprobe",
	} {
		if got := canonicalKind(sec); got != want {
			t.Errorf("canonicalKind(%q) = %q, want %q", sec, got, want)
		}
	}
}

func TestNoChoiceError(t *testing.T) {
	a := Alternative{Name: "hook", Choices: []string{"e+x", "k+r"}, Chosen: -1,
		Errors: []error{errors.New("load: fentry/fexit not supported by this kernel"), errors.New("attach kprobe/f: kprobes not supported by this kernel")}}
	want := `alternatives "hook": no choice works on this kernel; e+x: load: fentry/fexit not supported by this kernel; k+r: attach kprobe/f: kprobes not supported by this kernel`
	if got := noChoiceError(a).Error(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if a.ChosenName() != "" {
		t.Errorf("ChosenName of an unresolved group = %q", a.ChosenName())
	}
	a.Chosen = 1
	if a.ChosenName() != "k+r" {
		t.Errorf("ChosenName = %q", a.ChosenName())
	}
}

func TestCheckRequiresKernel(t *testing.T) {
	rel, v, err := KernelRelease()
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, "requires:\n  kernel: \"3.10\"\n")
	if err := CheckRequires(cfg, Options{}); err != nil {
		t.Errorf("kernel %s (%v) does not meet 3.10: %v", rel, v, err)
	}
	cfg = testConfig(t, "requires:\n  kernel: \"999.1.2\"\n")
	if err := CheckRequires(cfg, Options{}); err == nil || err.Error() != "requires kernel >= 999.1.2, running "+rel {
		t.Errorf("999.1.2: %v", err)
	}
	cfg = testConfig(t, "requires:\n  features: [btf]\n")
	if err := CheckRequires(cfg, Options{BTFPath: "/nonexistent/vmlinux"}); err == nil || !strings.Contains(err.Error(), "requires btf: --btf.path: stat /nonexistent/vmlinux") {
		t.Errorf("btf with a missing --btf.path: %v", err)
	}
}

// SPDX-License-Identifier: Apache-2.0

package loader

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"github.com/kernel-exporter/kernel_exporter/config"
	"github.com/kernel-exporter/kernel_exporter/internal/testenv"
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
	if got := errNoChoice(a).Error(); got != want {
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

// TestNoChoiceErrorChain checks that the error of a group where no choice
// works keeps each choice's error in its chain: a verifier rejection the
// kernel really gave (errors.As to *ebpf.VerifierError, errors.Is to its
// errno) and a kind the kernel lacks (errors.Is ErrUnsupported), as
// loadAlternatives builds it and as the exporter wraps it. Before, the
// choices' errors were flattened into the text and neither held.
func TestNoChoiceErrorChain(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.SkipOrFail(t, "needs root to have the verifier reject a program")
	}
	// R2 is read before it is written: every kernel's verifier refuses it.
	spec := &ebpf.CollectionSpec{Programs: map[string]*ebpf.ProgramSpec{"bad": {
		Name: "bad", Type: ebpf.SocketFilter, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Reg(asm.R0, asm.R2), asm.Return()},
	}}}
	coll, err := ebpf.NewCollection(spec)
	if err == nil {
		coll.Close()
		t.Fatal("the verifier accepted a read of an uninitialised register")
	}
	verr := loadError(spec, err)
	var ve *ebpf.VerifierError
	if !errors.As(verr, &ve) || !strings.HasPrefix(verr.Error(), "load: verifier rejected program bad: permission denied: ") {
		t.Fatalf("loadError(%v) = %q: not a *ebpf.VerifierError, or not explained", err, verr)
	}
	a := Alternative{Name: "hook", Choices: []string{"bad", "k"}, Chosen: -1, Errors: []error{
		verr,
		fmt.Errorf("attach kprobe/f: %w", fmt.Errorf("kprobes %w", ErrUnsupported)),
	}}
	got := fmt.Errorf("programs/x.bpf.o: %w", errNoChoice(a))
	ve = nil
	if !errors.As(got, &ve) || ve.Cause == nil {
		t.Errorf("errors.As(%q, *ebpf.VerifierError) = false", got)
	} else if !errors.Is(got, ve.Cause) {
		t.Errorf("errors.Is(err, %v) = false", ve.Cause)
	}
	if !errors.Is(got, ErrUnsupported) {
		t.Errorf("errors.Is(%q, ErrUnsupported) = false", got)
	}
	if want := `alternatives "hook": no choice works on this kernel; bad: load: verifier rejected program bad: `; !strings.Contains(got.Error(), want) {
		t.Errorf("text %q lacks %q", got, want)
	}
	// Only the choices that failed (an optional group's nil errors are
	// not in the chain).
	a.Errors[1] = nil
	if errors.Is(errNoChoice(a), ErrUnsupported) {
		t.Error("a nil choice error is in the chain")
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

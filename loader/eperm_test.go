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
	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/config"
)

// epermSpec is one tracepoint program that returns 0.
func epermSpec() *ebpf.CollectionSpec {
	return &ebpf.CollectionSpec{Programs: map[string]*ebpf.ProgramSpec{"tp": {
		Name: "tp", Type: ebpf.TracePoint, SectionName: "tracepoint/syscalls/sys_enter_getpid", License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()},
	}}}
}

// TestLoadErrorNamesCapabilityChild is the child of
// TestLoadErrorNamesCapability: reduced to CAP_BPF, as the exporter is
// after start-up, it loads a tracepoint program and prints the error.
func TestLoadErrorNamesCapabilityChild(t *testing.T) {
	if os.Getenv("KE_EPERM_CHILD") == "" {
		t.Skip("child of TestLoadErrorNamesCapability")
	}
	if _, err := DropCapabilities(0); err != nil {
		t.Fatal(err)
	}
	obj, err := Load(epermSpec(), &config.Config{}, Options{})
	if err == nil {
		obj.Close()
	}
	fmt.Printf("ERR %v\n", err)
	fmt.Printf("EPERM %v\n", errors.Is(err, unix.EPERM))
}

// TestLoadErrorNamesCapability: a load refused for a missing capability
// says which one the operation needs and what the process holds, not
// cilium/ebpf's "MEMLOCK may be too low" (RLIMIT_MEMLOCK has not counted
// since 5.11), and still matches EPERM.
func TestLoadErrorNamesCapability(t *testing.T) {
	out := runChild(t, "TestLoadErrorNamesCapabilityChild", "KE_EPERM_CHILD")
	var msg string
	for _, line := range strings.Split(out, "\n") {
		if m, ok := strings.CutPrefix(line, "ERR "); ok {
			msg = m
		}
	}
	t.Logf("load with CAP_BPF alone: %s", msg)
	for _, want := range []string{"operation not permitted", "loading TracePoint program tp needs CAP_PERFMON,CAP_BPF; this process lacks CAP_PERFMON (its effective capabilities: CAP_BPF)"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "MEMLOCK") {
		t.Errorf("error %q still blames MEMLOCK", msg)
	}
	if !strings.Contains(out, "EPERM true") {
		t.Errorf("error does not match EPERM:\n%s", out)
	}
}

// TestPermissionError: the other causes, for an EPERM this process gets
// although it holds the capabilities (root here): a security module on
// kernels since 5.11; maps name the map; other errors are not explained.
func TestPermissionError(t *testing.T) {
	caps, err := CurrentCapabilities()
	if err != nil {
		t.Fatal(err)
	}
	if !caps.Effective.Has(CapBPF) && !caps.Effective.Has(CapSysAdmin) {
		t.Skip("needs CAP_BPF")
	}
	spec := epermSpec()
	spec.Maps = map[string]*ebpf.MapSpec{"counts": {Name: "counts", Type: ebpf.Hash}}
	_, v, err := KernelRelease()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("program tp: load program: %w"+memlockHint, unix.EPERM), "loading TracePoint program tp was refused although this process holds CAP_PERFMON,CAP_BPF"},
		{fmt.Errorf("map counts: map create: %w"+memlockHint, unix.EPERM), "creating map counts"},
		{fmt.Errorf("program tp: map counts: map create: %w"+memlockHint, unix.EPERM), "creating map counts"},
	} {
		got, lacking := permissionError(spec, tc.err)
		if got == nil || lacking {
			t.Errorf("%v: %v (lacking %v)", tc.err, got, lacking)
			continue
		}
		if !strings.Contains(got.Error(), tc.want) || strings.Contains(got.Error(), "MEMLOCK may be") || !errors.Is(got, unix.EPERM) {
			t.Errorf("%v: %q, want %q, no MEMLOCK hint, EPERM", tc.err, got, tc.want)
		}
		if !v.Less(memcgSince) && !strings.Contains(got.Error(), "security module") {
			t.Errorf("%q: on %v, want a security module named", got, v)
		}
	}
	if got, _ := permissionError(spec, fmt.Errorf("program tp: load program: %w", unix.EINVAL)); got != nil {
		t.Errorf("EINVAL explained: %v", got)
	}
	if got, _ := permissionError(spec, fmt.Errorf("something else: %w", unix.EPERM)); got != nil {
		t.Errorf("an EPERM of no load or map create explained: %v", got)
	}
}

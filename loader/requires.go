// SPDX-License-Identifier: Apache-2.0

package loader

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/features"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/config"
)

// KernelRelease returns the running kernel's release ("6.1.0-18-cloud-amd64")
// and its parsed version.
func KernelRelease() (string, config.KernelVersion, error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "", config.KernelVersion{}, fmt.Errorf("uname: %w", err)
	}
	rel := unix.ByteSliceToString(u.Release[:])
	v, err := config.ParseKernelVersion(rel)
	return rel, v, err
}

// CheckRequires returns nil when the running kernel meets cfg.Requires, and
// otherwise an error that says what is missing:
//
//	requires kernel >= 5.15, running 5.10.0-28-amd64
//	requires kprobes: kprobes not supported by this kernel (no kprobe PMU or kprobe_events)
func CheckRequires(cfg *config.Config, opts Options) error {
	r := cfg.Requires
	if r.Kernel != "" {
		want, err := config.ParseKernelVersion(r.Kernel)
		if err != nil {
			return fmt.Errorf("requires kernel >= %s: %w", r.Kernel, err)
		}
		rel, have, err := KernelRelease()
		if err != nil {
			return fmt.Errorf("requires kernel >= %s: cannot read the running version: %w", r.Kernel, err)
		}
		if have.Less(want) {
			return fmt.Errorf("requires kernel >= %s, running %s", r.Kernel, rel)
		}
	}
	for _, f := range r.Features {
		if err := HaveFeature(f, opts); err != nil {
			return fmt.Errorf("requires %s: %w", f, err)
		}
	}
	return nil
}

var featureCache sync.Map // "<feature>\x00<btf path>" → error (nil: supported)

// HaveFeature probes the running kernel for one of config.Features and
// returns nil when it is there, or an error wrapping ErrUnsupported that
// says why not. Results are cached for the life of the process.
func HaveFeature(name string, opts Options) error {
	key := name + "\x00" + opts.BTFPath
	if v, ok := featureCache.Load(key); ok {
		err, _ := v.(error)
		return err
	}
	err := probeFeature(name, opts)
	featureCache.Store(key, err)
	return err
}

func probeFeature(name string, opts Options) error {
	// Before 5.11 a probe program's memory counts against RLIMIT_MEMLOCK,
	// shared by every process of the user: with other BPF objects loaded,
	// the default limit refuses the probe with EPERM, which would read as
	// "not supported".
	if err := raiseMemlock(); err != nil {
		return fmt.Errorf("raise memlock limit for the %s probe: %w", name, err)
	}
	switch name {
	case "btf":
		if opts.BTFPath != "" {
			if _, err := os.Stat(opts.BTFPath); err != nil {
				return fmt.Errorf("--btf.path: %w", err)
			}
			return nil
		}
		if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
			return fmt.Errorf("kernel BTF %w: no /sys/kernel/btf/vmlinux (CONFIG_DEBUG_INFO_BTF) and no --btf.path", ErrUnsupported)
		}
		return nil
	case "kprobes":
		if !kprobesAvailable() {
			return fmt.Errorf("kprobes %w (no kprobe PMU or kprobe_events)", ErrUnsupported)
		}
		return nil
	case "uprobes":
		for _, p := range []string{
			"/sys/bus/event_source/devices/uprobe/type",
			"/sys/kernel/tracing/uprobe_events",
			"/sys/kernel/debug/tracing/uprobe_events",
		} {
			if _, err := os.Stat(p); err == nil {
				return nil
			}
		}
		return fmt.Errorf("uprobes %w (no uprobe PMU or uprobe_events)", ErrUnsupported)
	case "tracepoints":
		if err := ensureTracefs(); err != nil {
			var pe *TracefsPermissionError
			if errors.As(err, &pe) {
				// Supported, but not readable by this process.
				return err
			}
			return fmt.Errorf("tracepoints %w: %v", ErrUnsupported, err)
		}
		return nil
	case "raw_tracepoints":
		if err := features.HaveProgramType(ebpf.RawTracepoint); err != nil {
			return fmt.Errorf("raw tracepoints %w: %v", ErrUnsupported, err)
		}
		return nil
	case "tp_btf":
		if err := probeTracing(ebpf.AttachTraceRawTp, "sched_switch"); err != nil {
			return fmt.Errorf("tp_btf %w: %v", ErrUnsupported, err)
		}
		return nil
	case "fentry":
		var err error
		for _, fn := range []string{"bpf_fentry_test1", "vfs_read"} {
			if err = probeTracing(ebpf.AttachTraceFEntry, fn); err == nil || !errors.Is(err, btf.ErrNotFound) {
				break
			}
		}
		if err != nil {
			return fmt.Errorf("fentry/fexit %w: %v", ErrUnsupported, err)
		}
		return nil
	}
	return fmt.Errorf("unknown feature %q", name)
}

// probeTracing loads a two-instruction tracing program for target and
// attaches it for a moment.
func probeTracing(at ebpf.AttachType, target string) error {
	prog, err := ebpf.NewProgramWithOptions(&ebpf.ProgramSpec{
		Type:         ebpf.Tracing,
		AttachType:   at,
		AttachTo:     target,
		License:      "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()},
	}, ebpf.ProgramOptions{LogDisabled: true})
	if err != nil {
		return fmt.Errorf("load probe program for %s: %w", target, err)
	}
	defer prog.Close()
	l, err := link.AttachTracing(link.TracingOptions{Program: prog, AttachType: at})
	if err != nil {
		return fmt.Errorf("attach probe program to %s: %w", target, err)
	}
	return l.Close()
}

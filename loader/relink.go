// SPDX-License-Identifier: Apache-2.0

package loader

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// Detach and re-attach without reloading.
//
// Object.Detach closes the links of an object's programs and keeps the
// programs and maps loaded: the programs stop running, the maps keep what
// they counted. Object.Reattach links the same loaded programs again. A
// link needs less than a load: measured on Linux 6.18 in a process
// reduced to CAP_BPF alone (TestRelinkCapBPFOnly):
//
//	raw_tp, raw_tracepoint   BPF_RAW_TRACEPOINT_OPEN           CAP_BPF only
//	tp_btf, fentry, fexit    BPF_LINK_CREATE (tracing)         CAP_BPF only
//	tracepoint, tp           perf_event_open of the tracepoint  CAP_PERFMON, and
//	                         (tracefs id)                       CAP_DAC_READ_SEARCH
//	                                                            unless root
//	  with a perf event fd from elsewhere: BPF_LINK_CREATE     CAP_BPF only
//	  (BPF_PERF_EVENT, 5.15+; PERF_EVENT_IOC_SET_BPF before)
//	kprobe, uprobe, usdt,    perf_event_open                    CAP_PERFMON
//	perf_event
//
// That is at kernel.perf_event_paranoid=2, the default. A lower setting
// lets CAP_BPF alone open more: at 0 a CPU-wide software perf_event, at
// -1 a tracepoint too; kprobe and uprobe PMUs need CAP_PERFMON whatever
// the setting.
//
// So a tracepoint program re-links through a TracepointOpener (the
// privileged helper of package privsep) that opens the perf event for it;
// the other perf-event kinds re-link only if the process kept
// CAP_PERFMON (--capabilities.keep=perfmon).

// TracepointOpener opens the perf event of a tracepoint (PERF_TYPE_TRACEPOINT
// on every process, CPU 0, as cilium/ebpf's link.Tracepoint does), for a
// process that can no longer open it itself. privsep.Client implements it.
type TracepointOpener interface {
	OpenTracepoint(group, event string) (*os.File, error)
}

// Detach closes the links of every program of the object: the programs
// stop running and Attached is false, while programs and maps stay loaded
// (their file descriptors, map contents and memory) until Close. Detaching
// an object that is not attached does nothing.
func (o *Object) Detach() {
	for _, p := range o.Programs {
		if p.link != nil {
			p.link.Close()
			p.link = nil
		}
	}
}

// Reattach links every program of a detached object again, as Load
// attached it, without loading anything (see the table above). Tracepoint
// programs are linked to a perf event opened by tp when tp is not nil (the
// process needs only CAP_BPF then); else as at load. On the first failure
// every link made by this call is closed again, and the error names the
// program, its section and, for a permission error, the capability the
// attach kind needs and --capabilities.keep. An object already attached,
// closed, or that never loaded is an error.
func (o *Object) Reattach(tp TracepointOpener) error {
	if o.Collection == nil || o.env == nil {
		return errors.New("object is not loaded")
	}
	env := &attachEnv{cfg: o.env.cfg, coll: o.env.coll, libbpf: o.env.libbpf}
	for _, p := range o.Programs {
		if p.link != nil {
			return fmt.Errorf("program %s is attached already", p.Name)
		}
	}
	for _, p := range o.Programs {
		ps := o.Spec.Programs[p.Name]
		if ps == nil || p.Prog == nil {
			o.Detach()
			return fmt.Errorf("program %s: not loaded", p.Name)
		}
		var l link.Link
		var err error
		if k := canonicalKind(ps.SectionName); k == "tracepoint" && tp != nil {
			l, err = relinkTracepoint(ps.SectionName, p.Prog, tp)
		} else {
			l, err = attach(ps, p.Prog, env)
		}
		if err != nil {
			o.Detach()
			return fmt.Errorf("re-attach %s (%s): %w", p.Name, ps.SectionName, relinkError(ps.SectionName, tp != nil, err))
		}
		p.link = l
	}
	return nil
}

// relinkError names what a re-attach that was refused permission needs.
func relinkError(section string, haveOpener bool, err error) error {
	var tpe *TracefsPermissionError
	if !isPermission(err) && !errors.Is(err, unix.EACCES) || errors.As(err, &tpe) {
		return err
	}
	need := "CAP_PERFMON"
	keep := "perfmon"
	switch k := canonicalKind(section); k {
	case "tracepoint":
		if !haveOpener {
			need, keep = "CAP_PERFMON (and CAP_DAC_READ_SEARCH to read tracefs when not root)", "perfmon,dac_read_search"
		}
	case "raw_tp", "tp_btf", "fentry", "fexit", "fmod_ret":
		need, keep = "CAP_BPF", "bpf"
	case "xdp":
		need, keep = "CAP_NET_ADMIN", "net_admin"
	}
	return fmt.Errorf("%w: re-attaching %s programs after the capability drop needs %s; keep it with --capabilities.keep=%s",
		err, canonicalKind(section), need, keep)
}

// relinkTracepoint links prog to the perf event of the tracepoint of
// section ("tracepoint/<group>/<event>") opened by tp.
func relinkTracepoint(section string, prog *ebpf.Program, tp TracepointOpener) (link.Link, error) {
	_, target, _ := strings.Cut(section, "/")
	group, event, ok := strings.Cut(target, "/")
	if !ok {
		return nil, fmt.Errorf("section %q: want tracepoint/<group>/<event>", section)
	}
	f, err := tp.OpenTracepoint(group, event)
	if err != nil {
		return nil, err
	}
	l, err := LinkPerfEvent(f, prog)
	if err != nil {
		f.Close()
		return nil, err
	}
	return l, nil
}

// LinkPerfEvent attaches prog to the perf event f: with BPF_LINK_CREATE
// (attach type BPF_PERF_EVENT, Linux 5.15+), else with the
// PERF_EVENT_IOC_SET_BPF ioctl (4.1+). Neither needs more than CAP_BPF.
// The returned link owns f: closing it detaches prog and closes f.
// Errors: the kernel's (EINVAL for a program type that does not fit the
// event, EEXIST when the event has a program already).
func LinkPerfEvent(f *os.File, prog *ebpf.Program) (link.Link, error) {
	raw, err := link.AttachRawLink(link.RawLinkOptions{Target: int(f.Fd()), Program: prog, Attach: ebpf.AttachPerfEvent})
	if err == nil {
		return &perfLink{Link: raw, f: f}, nil
	}
	if !errors.Is(err, link.ErrNotSupported) && !errors.Is(err, unix.EINVAL) {
		return nil, fmt.Errorf("link to perf event: %w", err)
	}
	// Before 5.15: the perf event holds the program until it is closed.
	if err := unix.IoctlSetInt(int(f.Fd()), unix.PERF_EVENT_IOC_SET_BPF, prog.FD()); err != nil {
		return nil, fmt.Errorf("link to perf event (PERF_EVENT_IOC_SET_BPF): %w", err)
	}
	if err := unix.IoctlSetInt(int(f.Fd()), unix.PERF_EVENT_IOC_ENABLE, 0); err != nil {
		return nil, fmt.Errorf("enable perf event: %w", err)
	}
	return &perfLink{f: f}, nil
}

// perfLink is a program linked to a perf event the link owns.
type perfLink struct {
	link.Link // nil when linked by ioctl
	f         *os.File
}

func (l *perfLink) Close() error {
	var err error
	if l.Link != nil {
		err = l.Link.Close()
	}
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	return err
}

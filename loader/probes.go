// SPDX-License-Identifier: Apache-2.0

package loader

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/kernel-exporter/kernel_exporter/config"
)

// attachEnv is what attaching needs beyond a program and its section: the
// config's uprobes, usdt and perf_events targets, and the loaded collection
// (for the USDT argument spec map). One per Load call.
type attachEnv struct {
	cfg  *config.Config
	coll *ebpf.Collection
	// nextSpec is the next free USDT spec id (index into ke_usdt_specs
	// and libbpf's __bpf_usdt_specs).
	nextSpec uint32
	// libbpf is set for an object built with libbpf's usdt.bpf.h.
	libbpf *libbpfUSDT
}

func (e *attachEnv) uprobes(prog string) []config.Uprobe {
	var out []config.Uprobe
	if e != nil && e.cfg != nil {
		for _, u := range e.cfg.Uprobes {
			if u.Program == prog {
				out = append(out, u)
			}
		}
	}
	return out
}

func (e *attachEnv) usdt(prog string) []config.USDT {
	var out []config.USDT
	if e != nil && e.cfg != nil {
		for _, u := range e.cfg.USDT {
			if u.Program == prog {
				out = append(out, u)
			}
		}
	}
	return out
}

func (e *attachEnv) perfEvents(prog string) []config.PerfEvent {
	var out []config.PerfEvent
	if e != nil && e.cfg != nil {
		for _, p := range e.cfg.PerfEvents {
			if p.Program == prog {
				out = append(out, p)
			}
		}
	}
	return out
}

// checkProbeTargets matches the config's uprobes, usdt and perf_events
// entries with the object's programs before anything is loaded: every entry
// names a program with the right bare section, and every program with a
// bare uprobe, uretprobe, usdt or perf_event section has a target.
func checkProbeTargets(spec *ebpf.CollectionSpec, cfg *config.Config) error {
	if cfg == nil {
		cfg = &config.Config{}
	}
	check := func(path, prog string, sections ...string) error {
		ps, ok := spec.Programs[prog]
		if !ok {
			return cfg.Errorf(path+".program", "program %q not found in %s (programs: %v)", prog, cfg.Object, sortedPrograms(spec))
		}
		for _, s := range sections {
			if ps.SectionName == s {
				return nil
			}
		}
		return cfg.Errorf(path+".program", "program %q has section %q, want SEC(%q)", prog, ps.SectionName, sections[0])
	}
	targeted := map[string]bool{}
	for i, u := range cfg.Uprobes {
		if err := check(fmt.Sprintf("uprobes[%d]", i), u.Program, "uprobe", "uretprobe"); err != nil {
			return err
		}
		targeted[u.Program] = true
	}
	for i, u := range cfg.USDT {
		if err := check(fmt.Sprintf("usdt[%d]", i), u.Program, "usdt"); err != nil {
			return err
		}
		targeted[u.Program] = true
	}
	for i, p := range cfg.PerfEvents {
		if err := check(fmt.Sprintf("perf_events[%d]", i), p.Program, "perf_event"); err != nil {
			return err
		}
		targeted[p.Program] = true
	}
	for _, name := range sortedPrograms(spec) {
		sec := spec.Programs[name].SectionName
		list := map[string]string{"uprobe": "uprobes", "uretprobe": "uprobes", "usdt": "usdt", "perf_event": "perf_events"}[sec]
		if list != "" && !targeted[name] {
			return fmt.Errorf("program %s has section %q without a target: list it under %q in %s", name, sec, list, cfg.File)
		}
	}
	return nil
}

// multiLink is one program's attachments: several uprobe targets, USDT
// sites, or one perf event per CPU. It embeds a nil link.Link only to
// satisfy the interface (whose unexported method cannot be implemented
// outside cilium/ebpf); every method is overridden.
type multiLink struct {
	link.Link
	links []link.Link
	// closers run after the links are closed (perf event fds).
	closers []func() error
}

func (m *multiLink) add(l link.Link) { m.links = append(m.links, l) }

// result returns the single link as is, or m.
func (m *multiLink) result() link.Link {
	if len(m.links) == 1 && len(m.closers) == 0 {
		return m.links[0]
	}
	return m
}

// Close detaches every attachment.
func (m *multiLink) Close() error {
	var errs []error
	for _, l := range m.links {
		errs = append(errs, l.Close())
	}
	for _, c := range m.closers {
		errs = append(errs, c())
	}
	m.links, m.closers = nil, nil
	return errors.Join(errs...)
}

func (m *multiLink) Update(*ebpf.Program) error {
	return fmt.Errorf("update a multi-target link: %w", link.ErrNotSupported)
}

func (m *multiLink) Pin(string) error {
	return fmt.Errorf("pin a multi-target link: %w", link.ErrNotSupported)
}

func (m *multiLink) Unpin() error {
	return fmt.Errorf("unpin a multi-target link: %w", link.ErrNotSupported)
}

func (m *multiLink) Detach() error {
	return fmt.Errorf("detach a multi-target link: %w", link.ErrNotSupported)
}

func (m *multiLink) Info() (*link.Info, error) {
	return nil, fmt.Errorf("info of a multi-target link: %w", link.ErrNotSupported)
}

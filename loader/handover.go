// SPDX-License-Identifier: Apache-2.0

package loader

// Handing a loaded object to another process.
//
// After start-up the exporter keeps only CAP_BPF, which cannot load
// tracing programs (BPF_PROG_LOAD of a kprobe, tracepoint, raw_tp or
// tracing program needs CAP_PERFMON) nor open the perf events most attach
// kinds need. A reload is therefore loaded and attached by the privileged
// helper (package privsep), which passes what it made back as file
// descriptors: every map, every program, and for every program the BPF
// link descriptors that keep it attached. The exporter adopts them (Adopt)
// into an Object like the ones Load returns, and from then on owns them:
// closing its copies detaches and unloads, as for an object it loaded
// itself.
//
// A BPF link (BPF_LINK_CREATE, BPF_RAW_TRACEPOINT_OPEN on 5.8+, perf event
// links on 5.15+) lives as long as one descriptor of it is open, in any
// process, and holds its perf event and program: so the helper may close
// its own copies once it has sent them. An attachment that is not a BPF
// link (a perf event given the program by PERF_EVENT_IOC_SET_BPF, before
// 5.15) cannot be handed over that way: such a program comes without a
// link, and Adopt links it again itself, as Object.Reattach does.

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/config"
)

// Handover is a loaded object as file descriptors: what Object.Handover
// gives and Adopt takes. Map and program keys are the names of the
// object's CollectionSpec (the ELF's map and function names).
type Handover struct {
	Maps     map[string]int
	Programs map[string]int
	// Links holds, by program, the BPF link descriptors that keep it
	// attached (one, or one per target: uprobe targets, USDT sites, CPUs).
	// A program without an entry was attached in a way that cannot be
	// handed over: the receiver links it again.
	Links map[string][]int
	// Chosen and Errors describe the object's alternatives groups, in
	// config order: the index of the chosen choice (-1 for none), and the
	// error text of each choice tried and passed over ("" otherwise).
	Chosen []int
	Errors [][]string
}

// FDs returns every descriptor of h, maps first, then programs, then links.
func (h *Handover) FDs() []int {
	var out []int
	for _, n := range sortedKeys(h.Maps) {
		out = append(out, h.Maps[n])
	}
	for _, n := range sortedKeys(h.Programs) {
		out = append(out, h.Programs[n])
	}
	for _, n := range sortedKeys(h.Links) {
		out = append(out, h.Links[n]...)
	}
	return out
}

// Close closes every descriptor of h (for a receiver that gives up).
func (h *Handover) Close() {
	for _, fd := range h.FDs() {
		unix.Close(fd)
	}
	h.Maps, h.Programs, h.Links = nil, nil, nil
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// Handover returns the descriptors of the object's maps, programs and
// links. They stay the object's: send them, then Close the object. A
// program attached in a way that is not a BPF link is left out of Links
// (the receiver links it itself).
func (o *Object) Handover() (Handover, error) {
	if o.Collection == nil {
		return Handover{}, errors.New("object is not loaded")
	}
	h := Handover{Maps: map[string]int{}, Programs: map[string]int{}, Links: map[string][]int{}}
	for n, m := range o.Collection.Maps {
		h.Maps[n] = m.FD()
	}
	for _, p := range o.Programs {
		if p.Prog == nil {
			continue
		}
		h.Programs[p.Name] = p.Prog.FD()
		if p.link == nil {
			continue
		}
		if fds, ok := linkFDs(p.link); ok {
			h.Links[p.Name] = fds
		}
	}
	for _, a := range o.Alternatives {
		h.Chosen = append(h.Chosen, a.Chosen)
		errs := make([]string, len(a.Errors))
		for i, err := range a.Errors {
			if err != nil {
				errs[i] = err.Error()
			}
		}
		h.Errors = append(h.Errors, errs)
	}
	return h, nil
}

// linkFDs returns the BPF link descriptors of l, and false when a part of
// it is not a BPF link.
func linkFDs(l link.Link) ([]int, bool) {
	switch v := l.(type) {
	case *multiLink:
		var out []int
		for _, sub := range v.links {
			fds, ok := linkFDs(sub)
			if !ok {
				return nil, false
			}
			out = append(out, fds...)
		}
		return out, len(out) > 0
	case *perfLink:
		if v.Link == nil {
			return nil, false // PERF_EVENT_IOC_SET_BPF: the perf event holds it
		}
		return linkFDs(v.Link)
	case interface{ FD() int }:
		return []int{v.FD()}, true
	}
	return nil, false
}

// Adopt builds an Object from descriptors another process loaded (see the
// top of this file) for the object spec and config cfg, both parsed here
// from the same bytes: names in h must be the spec's. It takes ownership
// of every descriptor in h, whatever it returns. attach_to overrides are
// applied to spec, as Load does. A program that came without links is
// linked here (tracepoint programs through tp when not nil, as
// Object.Reattach does); if that fails, everything is closed and the error
// names the program and what its re-link needs. Errors: a name that is
// not in spec, a descriptor that is not a map, program or link, or a
// re-link's.
func Adopt(spec *ebpf.CollectionSpec, cfg *config.Config, h Handover, tp TracepointOpener) (obj *Object, err error) {
	coll := &ebpf.Collection{Maps: map[string]*ebpf.Map{}, Programs: map[string]*ebpf.Program{}}
	links := map[string]link.Link{}
	defer func() {
		if err == nil {
			return
		}
		for _, l := range links {
			l.Close()
		}
		coll.Close()
		h.Close()
	}()
	if err := applyAttachTo(spec, cfg); err != nil {
		return nil, err
	}
	for _, n := range sortedKeys(h.Maps) {
		if _, ok := spec.Maps[n]; !ok {
			return nil, fmt.Errorf("adopt: map %s is not in the object", sanitize(n))
		}
		m, err := ebpf.NewMapFromFD(h.Maps[n])
		delete(h.Maps, n)
		if err != nil {
			return nil, fmt.Errorf("adopt: map %s: %w", n, err)
		}
		coll.Maps[n] = m
		if want := spec.Maps[n].Type; m.Type() != want {
			return nil, fmt.Errorf("adopt: map %s is a %v, the object declares a %v", n, m.Type(), want)
		}
	}
	for _, n := range sortedKeys(h.Programs) {
		ps, ok := spec.Programs[n]
		if !ok {
			return nil, fmt.Errorf("adopt: program %s is not in the object", sanitize(n))
		}
		p, err := ebpf.NewProgramFromFD(h.Programs[n])
		delete(h.Programs, n)
		if err != nil {
			return nil, fmt.Errorf("adopt: program %s: %w", n, err)
		}
		coll.Programs[n] = p
		if p.Type() != ps.Type {
			return nil, fmt.Errorf("adopt: program %s is a %v, the object declares a %v", n, p.Type(), ps.Type)
		}
	}
	for _, n := range sortedKeys(h.Links) {
		if _, ok := coll.Programs[n]; !ok {
			return nil, fmt.Errorf("adopt: links of program %s, which was not handed over", sanitize(n))
		}
		ml := &multiLink{}
		fds := h.Links[n]
		delete(h.Links, n)
		for i, fd := range fds {
			l, err := link.NewFromFD(fd)
			if err != nil {
				for _, rest := range fds[i+1:] {
					unix.Close(rest)
				}
				ml.Close()
				return nil, fmt.Errorf("adopt: link of program %s: %w", n, err)
			}
			ml.add(l)
		}
		links[n] = ml.result()
	}
	lu, err := prepareLibbpfUSDT(spec)
	if err != nil {
		return nil, err
	}
	obj = &Object{Spec: spec, Collection: coll, env: &attachEnv{cfg: cfg, coll: coll, libbpf: lu}}
	groupOf := map[string]string{}
	for _, g := range cfg.Alternatives {
		for _, ch := range g.Programs {
			for _, p := range ch {
				groupOf[p] = g.Name
			}
		}
	}
	for _, n := range sortedKeys(coll.Programs) {
		obj.Programs = append(obj.Programs, &Program{Name: n, Section: spec.Programs[n].SectionName, Prog: coll.Programs[n], Alternative: groupOf[n], link: links[n]})
	}
	if len(obj.Programs) == 0 {
		return nil, errors.New("object has no programs to attach")
	}
	if len(h.Chosen) != len(cfg.Alternatives) || len(h.Errors) != len(cfg.Alternatives) {
		return nil, fmt.Errorf("adopt: %d alternatives groups resolved, the config has %d", len(h.Chosen), len(cfg.Alternatives))
	}
	for i, g := range cfg.Alternatives {
		a := Alternative{Name: g.Name, Optional: g.Optional, Chosen: h.Chosen[i], Errors: make([]error, len(g.Programs))}
		for _, ch := range g.Programs {
			a.Choices = append(a.Choices, ch.String())
		}
		if a.Chosen < -1 || a.Chosen >= len(a.Choices) || len(h.Errors[i]) != len(g.Programs) {
			return nil, fmt.Errorf("adopt: alternatives %q: choice %d of %d", g.Name, a.Chosen, len(a.Choices))
		}
		for j, text := range h.Errors[i] {
			if text != "" {
				a.Errors[j] = errors.New(text)
			}
		}
		obj.Alternatives = append(obj.Alternatives, a)
	}
	// Programs that came without links: link them here.
	env := obj.env
	for _, p := range obj.Programs {
		if p.link != nil {
			continue
		}
		ps := spec.Programs[p.Name]
		var l link.Link
		var err error
		if canonicalKind(ps.SectionName) == "tracepoint" && tp != nil {
			l, err = relinkTracepoint(ps.SectionName, p.Prog, tp)
		} else {
			l, err = attach(ps, p.Prog, env)
		}
		if err != nil {
			return nil, fmt.Errorf("attach %s (%s), which came without a BPF link: %w", p.Name, ps.SectionName, relinkError(ps.SectionName, tp != nil, err))
		}
		p.link = l
		links[p.Name] = l
	}
	return obj, nil
}

// SPDX-License-Identifier: Apache-2.0

package loader

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/cilium/ebpf"

	"github.com/kernel-exporter/kernel_exporter/config"
)

// Alternative is how one alternatives group of a config was resolved on
// the running kernel.
type Alternative struct {
	// Name is the group name from the config.
	Name     string
	Optional bool
	// Choices are the group's choices in config order, each written as its
	// programs joined by "+".
	Choices []string
	// Chosen indexes Choices: the choice that is loaded and attached, or -1
	// when none works (only possible for an optional group of a config
	// that is up).
	Chosen int
	// Errors holds, for each choice tried before the chosen one (or for
	// all when none works), why it did not load or attach; nil otherwise.
	Errors []error
}

// ChosenName returns the chosen choice ("lat_fentry+lat_fexit"), or "" when
// none works.
func (a Alternative) ChosenName() string {
	if a.Chosen < 0 {
		return ""
	}
	return a.Choices[a.Chosen]
}

// AttachKinds are the values accepted in Options.DisableAttach: the attach
// kinds of section names, as in "fentry/do_sendfile".
var AttachKinds = []string{"fentry", "fexit", "fmod_ret", "kprobe", "kretprobe", "tracepoint", "raw_tp", "tp_btf", "uprobe", "uretprobe", "usdt", "perf_event", "xdp"}

// canonicalKind maps section prefix aliases to the names in AttachKinds.
func canonicalKind(section string) string {
	switch k := kind(section); k {
	case "tp":
		return "tracepoint"
	case "raw_tracepoint":
		return "raw_tp"
	default:
		return k
	}
}

// prepare runs before anything is loaded: it checks the config's
// requirements, points attach_to programs at their kernel functions,
// checks that every program named in alternatives exists, and refuses
// disabled attach kinds among the programs outside any group.
func prepare(spec *ebpf.CollectionSpec, cfg *config.Config, opts Options) error {
	if err := CheckRequires(cfg, opts); err != nil {
		return err
	}
	if err := applyAttachTo(spec, cfg); err != nil {
		return err
	}
	grouped := map[string]bool{}
	for i, g := range cfg.Alternatives {
		for j, ch := range g.Programs {
			for _, p := range ch {
				if _, ok := spec.Programs[p]; !ok {
					return cfg.Errorf(fmt.Sprintf("alternatives[%d].programs[%d]", i, j), "program %q not found in %s (programs: %v)", p, cfg.Object, sortedPrograms(spec))
				}
				grouped[p] = true
			}
		}
	}
	for _, name := range sortedPrograms(spec) {
		if grouped[name] {
			continue
		}
		if k := canonicalKind(spec.Programs[name].SectionName); slices.Contains(opts.DisableAttach, k) {
			return fmt.Errorf("program %s (%s): %s programs are disabled by --attach.disable", name, spec.Programs[name].SectionName, k)
		}
	}
	return nil
}

// applyAttachTo sets the target function of the kprobe, kretprobe, fentry
// and fexit programs named in cfg.AttachTo: their section becomes
// "<kind>/<function>" (which is what attaches, and what self-metrics show)
// and, for fentry/fexit, the BTF target resolved at load.
func applyAttachTo(spec *ebpf.CollectionSpec, cfg *config.Config) error {
	for _, prog := range attachToPrograms(cfg.AttachTo) {
		fn := cfg.AttachTo[prog]
		ps, ok := spec.Programs[prog]
		if !ok {
			return cfg.Errorf("attach_to."+prog, "program %q not found in %s (programs: %v)", prog, cfg.Object, sortedPrograms(spec))
		}
		switch k := kind(ps.SectionName); k {
		case "kprobe", "kretprobe", "fentry", "fexit", "fmod_ret":
			ps.SectionName = k + "/" + fn
			ps.AttachTo = fn
		default:
			return cfg.Errorf("attach_to."+prog, "program %q has section %q: only kprobe, kretprobe, fentry and fexit programs take a kernel function", prog, ps.SectionName)
		}
	}
	return nil
}

func attachToPrograms(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// loadAlternatives resolves cfg.Alternatives group by group, in config
// order: for each group it tries the choices in order, loading the
// programs outside any group, the choices already made and the candidate,
// and keeps the first candidate that loads and attaches. The last
// successful attempt holds exactly the final set and is returned; earlier
// ones are closed. Each attempt is a copy of spec without the other
// programs, loaded by Load, so a failed attempt leaves nothing behind.
func loadAlternatives(spec *ebpf.CollectionSpec, cfg *config.Config, opts Options) (*Object, error) {
	groupOf := map[string]string{}
	for _, g := range cfg.Alternatives {
		for _, ch := range g.Programs {
			for _, p := range ch {
				groupOf[p] = g.Name
			}
		}
	}
	var keep []string
	for _, name := range sortedPrograms(spec) {
		if _, ok := groupOf[name]; !ok {
			keep = append(keep, name)
		}
	}
	results := make([]Alternative, 0, len(cfg.Alternatives))
	var best *Object
	for _, g := range cfg.Alternatives {
		res := Alternative{Name: g.Name, Optional: g.Optional, Chosen: -1, Errors: make([]error, len(g.Programs))}
		for _, ch := range g.Programs {
			res.Choices = append(res.Choices, ch.String())
		}
		for ci, ch := range g.Programs {
			obj, err := loadSubset(spec, cfg, opts, append(slices.Clone(keep), ch...))
			if err != nil {
				res.Errors[ci] = err
				continue
			}
			res.Chosen = ci
			keep = append(keep, ch...)
			if best != nil {
				best.Close()
			}
			best = obj
			break
		}
		results = append(results, res)
		if res.Chosen < 0 && !g.Optional {
			if best != nil {
				best.Close()
			}
			return &Object{Spec: spec, Alternatives: results}, errNoChoice(res)
		}
	}
	if best == nil {
		// Every group is optional and none works: the rest runs alone.
		obj, err := loadSubset(spec, cfg, opts, keep)
		if err != nil {
			if obj == nil {
				obj = &Object{Spec: spec}
			}
			obj.Alternatives = results
			return obj, err
		}
		best = obj
	}
	best.Alternatives = results
	for _, p := range best.Programs {
		p.Alternative = groupOf[p.Name]
	}
	return best, nil
}

// noChoiceError says why every choice of a group failed. Each choice's
// error stays in its chain (Unwrap), so that errors.Is(err, ErrUnsupported)
// and errors.As(err, **ebpf.VerifierError) see through it as they do for a
// config without alternatives.
type noChoiceError struct {
	msg  string
	errs []error
}

func (e *noChoiceError) Error() string   { return e.msg }
func (e *noChoiceError) Unwrap() []error { return e.errs }

// errNoChoice returns the noChoiceError of group a.
func errNoChoice(a Alternative) error {
	var b strings.Builder
	fmt.Fprintf(&b, "alternatives %q: no choice works on this kernel", a.Name)
	e := &noChoiceError{}
	for i, c := range a.Choices {
		fmt.Fprintf(&b, "; %s: %v", c, a.Errors[i])
		if a.Errors[i] != nil {
			e.errs = append(e.errs, a.Errors[i])
		}
	}
	e.msg = b.String()
	return e
}

// loadSubset loads a copy of spec with only the programs in keep, as a
// config without alternatives.
func loadSubset(spec *ebpf.CollectionSpec, cfg *config.Config, opts Options, keep []string) (*Object, error) {
	s := spec.Copy()
	for name := range s.Programs {
		if !slices.Contains(keep, name) {
			delete(s.Programs, name)
		}
	}
	c := *cfg
	c.Alternatives = nil
	c.AttachTo = nil // already applied to spec
	c.Requires = config.Requires{}
	c.Uprobes = onlyFor(cfg.Uprobes, keep, func(u config.Uprobe) string { return u.Program })
	c.USDT = onlyFor(cfg.USDT, keep, func(u config.USDT) string { return u.Program })
	c.PerfEvents = onlyFor(cfg.PerfEvents, keep, func(p config.PerfEvent) string { return p.Program })
	return Load(s, &c, opts)
}

// onlyFor returns the targets whose program is in keep.
func onlyFor[T any](targets []T, keep []string, program func(T) string) []T {
	var out []T
	for _, t := range targets {
		if slices.Contains(keep, program(t)) {
			out = append(out, t)
		}
	}
	return out
}

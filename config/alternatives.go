// SPDX-License-Identifier: Apache-2.0

package config

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Alternative is a group of interchangeable ways of feeding the same maps,
// best first:
//
//	alternatives:
//	  - name: latency
//	    programs:
//	      - [lat_fentry, lat_fexit]          # a choice may be several programs
//	      - [lat_kprobe, lat_kretprobe]
//	      - lat_tracepoint                   # or just one
//	    optional: false
//
// At start-up the loader tries the choices in order and keeps the first
// one whose programs all load and attach on the running kernel; the
// programs of the other choices are not loaded. Programs that are in no
// group load and attach as usual. When no choice works the config is down,
// unless the group is optional: then it is left out and the config runs
// without it.
type Alternative struct {
	// Name identifies the group in self-metrics (label "alternative") and
	// on the landing page.
	Name string `yaml:"name"`
	// Programs lists the choices, best first.
	Programs []Choice `yaml:"programs"`
	// Optional lets the config run without this group when no choice works.
	Optional bool `yaml:"optional"`
}

// Choice is one alternative of a group: the C function names of the BPF
// programs that are loaded together. In YAML it is a program name or a
// list of program names.
type Choice []string

// String joins the program names with "+" ("lat_fentry+lat_fexit").
func (c Choice) String() string { return strings.Join(c, "+") }

// UnmarshalYAML accepts a scalar (one program) or a list of scalars.
func (c *Choice) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		*c = Choice{n.Value}
		return nil
	case yaml.SequenceNode:
		out := make(Choice, 0, len(n.Content))
		for _, e := range n.Content {
			if e.Kind != yaml.ScalarNode {
				return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: wrong type: a choice is a program name or a list of program names", e.Line)}}
			}
			out = append(out, e.Value)
		}
		*c = out
		return nil
	}
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: wrong type: a choice is a program name or a list of program names", n.Line)}}
}

// Requires lists what a config needs from the running kernel:
//
//	requires:
//	  kernel: "5.15"              # minimum version: major.minor[.patch]
//	  features: [btf, kprobes]    # see Features
//
// When the kernel does not meet them, the config is not loaded and its
// status says why ("requires kernel >= 5.15, running 5.10.0-28-amd64").
type Requires struct {
	Kernel   string   `yaml:"kernel"`
	Features []string `yaml:"features"`
}

// Features are the names accepted in requires.features, with what each
// one means. The loader probes them on the running kernel.
var Features = map[string]string{
	"btf":             "kernel BTF: /sys/kernel/btf/vmlinux or --btf.path",
	"kprobes":         "kprobes and kretprobes (CONFIG_KPROBES)",
	"uprobes":         "uprobes and uretprobes (CONFIG_UPROBE_EVENTS)",
	"tracepoints":     "tracepoints (tracefs events)",
	"raw_tracepoints": "raw tracepoints (4.17+)",
	"tp_btf":          "BTF-typed raw tracepoints (5.5+)",
	"fentry":          "fentry/fexit BPF trampolines (5.5+, x86_64 and arm64)",
}

// FeatureNames returns the keys of Features, sorted.
func FeatureNames() []string {
	names := make([]string, 0, len(Features))
	for n := range Features {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// KernelVersion is a parsed "major.minor.patch".
type KernelVersion [3]int

// ParseKernelVersion reads the leading "major.minor[.patch]" of s, as in a
// uname release ("6.1.0-18-cloud-amd64" → 6.1.0).
func ParseKernelVersion(s string) (KernelVersion, error) {
	var v KernelVersion
	m := kernelVersionRe.FindStringSubmatch(s)
	if m == nil {
		return v, fmt.Errorf("kernel version %q: want major.minor[.patch]", s)
	}
	for i := 0; i < 3; i++ {
		if m[i+1] == "" {
			continue
		}
		n, err := strconv.Atoi(m[i+1])
		if err != nil {
			return v, fmt.Errorf("kernel version %q: %w", s, err)
		}
		v[i] = n
	}
	return v, nil
}

var kernelVersionRe = regexp.MustCompile(`^(\d+)\.(\d+)(?:\.(\d+))?`)

// Less reports whether v is older than w.
func (v KernelVersion) Less(w KernelVersion) bool {
	for i := range v {
		if v[i] != w[i] {
			return v[i] < w[i]
		}
	}
	return false
}

var (
	groupNameRe  = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*$`)
	kernelFuncRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.]*$`)
	progNameRe   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

func init() {
	// Name our types in "unknown key" errors (see typeNoun).
	probeTypeNouns["Alternative"] = "alternatives entry"
	probeTypeNouns["Requires"] = "requires"
}

// validateAlternatives checks alternatives, requires and attach_to.
// Whether the named programs exist is checked against the object when it
// is loaded.
func (c *Config) validateAlternatives() error {
	if len(c.Alternatives) > MaxAlternatives {
		return c.Errorf("alternatives", "%d groups, more than the limit of %d", len(c.Alternatives), MaxAlternatives)
	}
	groups := map[string]int{}
	member := map[string]string{}
	for i, g := range c.Alternatives {
		path := fmt.Sprintf("alternatives[%d]", i)
		if g.Name == "" {
			return c.Errorf(path+".name", "missing group name")
		}
		if len(g.Name) > MaxNameLen || !groupNameRe.MatchString(g.Name) {
			return c.Errorf(path+".name", "invalid group name %s (at most %d letters, digits, _ . -)", Quote(g.Name), MaxNameLen)
		}
		if j, ok := groups[g.Name]; ok {
			return c.Errorf(path+".name", "group %s already defined at alternatives[%d]", Quote(g.Name), j)
		}
		groups[g.Name] = i
		if len(g.Programs) == 0 {
			return c.Errorf(path+".programs", "group %s has no programs", Quote(g.Name))
		}
		if len(g.Programs) > MaxAlternatives {
			return c.Errorf(path+".programs", "%d choices, more than the limit of %d", len(g.Programs), MaxAlternatives)
		}
		for j, ch := range g.Programs {
			cp := fmt.Sprintf("%s.programs[%d]", path, j)
			if len(ch) == 0 {
				return c.Errorf(cp, "empty choice")
			}
			if len(ch) > MaxAlternatives {
				return c.Errorf(cp, "%d programs, more than the limit of %d", len(ch), MaxAlternatives)
			}
			for _, p := range ch {
				if len(p) > MaxProgramName || !progNameRe.MatchString(p) {
					return c.Errorf(cp, "invalid program name %s", Quote(p))
				}
				if prev, ok := member[p]; ok {
					return c.Errorf(cp, "program %s already listed at %s: a program may be in one choice only", Quote(p), prev)
				}
				member[p] = cp
			}
		}
	}
	if r := c.Requires; r.Kernel != "" {
		if _, err := ParseKernelVersion(r.Kernel); err != nil || len(r.Kernel) > MaxKernelVersion || !kernelVersionRe.MatchString(r.Kernel) || strings.ContainsAny(r.Kernel, " -") {
			return c.Errorf("requires.kernel", "invalid kernel version %s: want major.minor[.patch], e.g. \"5.15\"", Quote(r.Kernel))
		}
	}
	if len(c.Requires.Features) > MaxFeatures {
		return c.Errorf("requires.features", "%d features, more than the limit of %d", len(c.Requires.Features), MaxFeatures)
	}
	for i, f := range c.Requires.Features {
		if _, ok := Features[f]; !ok {
			return c.Errorf(fmt.Sprintf("requires.features[%d]", i), "unknown feature %s (known: %s)", Quote(f), strings.Join(FeatureNames(), ", "))
		}
	}
	if len(c.AttachTo) > MaxAttachTo {
		return c.Errorf("attach_to", "%d entries, more than the limit of %d", len(c.AttachTo), MaxAttachTo)
	}
	for _, p := range attachToKeys(c.AttachTo) {
		fn := c.AttachTo[p]
		if len(p) > MaxProgramName || !progNameRe.MatchString(p) {
			return c.Errorf("attach_to", "invalid program name %s", Quote(p))
		}
		if len(fn) > MaxSymbol || !kernelFuncRe.MatchString(fn) {
			path := "attach_to"
			if strings.HasPrefix(Quote(p), `"`) {
				path += "." + p // errors show only short names
			}
			return c.Errorf(path, "invalid kernel function name %s", Quote(fn))
		}
	}
	if len(c.Kaddrs) > MaxKaddrs {
		return c.Errorf("kaddrs", "%d symbols, more than the limit of %d", len(c.Kaddrs), MaxKaddrs)
	}
	for i, k := range c.Kaddrs {
		if len(k) > MaxSymbol || !kernelFuncRe.MatchString(k) {
			return c.Errorf(fmt.Sprintf("kaddrs[%d]", i), "invalid kernel symbol name %s", Quote(k))
		}
	}
	return nil
}

func attachToKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// OverrideAttachTo applies a command-line override to attach_to. spec is
// "<function>" (every program listed in attach_to now attaches to
// function) or "<program>=<function>" (that program only; it need not be
// listed in attach_to yet).
func (c *Config) OverrideAttachTo(spec string) error {
	prog, fn, one := strings.Cut(spec, "=")
	if !one {
		fn, prog = prog, ""
	}
	if !kernelFuncRe.MatchString(fn) {
		return fmt.Errorf("config %s: attach-to %q: invalid kernel function name %q", c.Name, spec, fn)
	}
	if prog == "" {
		if len(c.AttachTo) == 0 {
			return fmt.Errorf("config %s: attach-to %q: the config has no attach_to entries; use <program>=<function>", c.Name, spec)
		}
		for p := range c.AttachTo {
			c.AttachTo[p] = fn
		}
		return nil
	}
	if !progNameRe.MatchString(prog) {
		return fmt.Errorf("config %s: attach-to %q: invalid program name %q", c.Name, spec, prog)
	}
	if c.AttachTo == nil {
		c.AttachTo = map[string]string{}
	}
	c.AttachTo[prog] = fn
	return nil
}

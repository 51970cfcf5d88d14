// Package config defines the YAML schema of a kernel_exporter program and
// validates it.
//
// A program is a pair of files: <name>.bpf.o, a compiled CO-RE BPF object, and
// <name>.yaml, which says which BPF maps of the object become which metrics
// and how each map key is split into labels. The schema is a superset of the
// one used by cloudflare/ebpf_exporter v2, so its configs load unchanged; the
// keys we add (namespace, padding, sum_bucket, max_series, stack_map) are
// optional.
//
// Every map key is a packed byte string. Labels consume it in order: label i
// takes size bytes, then skips padding bytes. The sizes must add up to the
// map's key size. Histogram keys end with a label named "bucket" holding the
// slot number as an unsigned integer. Map values are u64 (8 bytes); per-CPU
// maps hold one u64 per CPU and are summed.
//
// Errors name the file, the line where yaml.v3 gives one, the field path and
// the offending value, e.g.
//
//	timers.yaml:7: metrics.counters[0].labels[0].size: must be > 0, got 0
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"
)

// DefaultNamespace prefixes every metric name unless a config sets its own.
const DefaultNamespace = "kernel"

// Config is one program: its YAML plus where its object lives.
type Config struct {
	// Name is the file name without .yaml; it is the value of the "config"
	// label on self-metrics.
	Name string `yaml:"-"`
	// File is the YAML path used in error messages.
	File string `yaml:"-"`
	// Object is the path of the <name>.bpf.o file, or a name inside an
	// embedded file system for bundled programs.
	Object string `yaml:"-"`

	// Namespace prefixes metric names: <namespace>_<metric name>.
	Namespace string  `yaml:"namespace"`
	Metrics   Metrics `yaml:"metrics"`
	// Kaddrs lists kernel symbols whose addresses are written into the
	// object's global variable kaddr_<symbol> before loading.
	Kaddrs []string `yaml:"kaddrs"`
	// CgroupIDMap and Tracing are ebpf_exporter v2 keys that this exporter
	// accepts but does not act on; see Ignored.
	CgroupIDMap yaml.Node `yaml:"cgroup_id_map"`
	Tracing     yaml.Node `yaml:"tracing"`
	// Uprobes, USDT and PerfEvents target programs with bare "uprobe",
	// "uretprobe", "usdt" and "perf_event" sections (see probes.go).
	Uprobes    []Uprobe    `yaml:"uprobes"`
	USDT       []USDT      `yaml:"usdt"`
	PerfEvents []PerfEvent `yaml:"perf_events"`
	// Alternatives, Requires and AttachTo choose what loads on the running
	// kernel (see alternatives.go).
	Alternatives []Alternative     `yaml:"alternatives"`
	Requires     Requires          `yaml:"requires"`
	AttachTo     map[string]string `yaml:"attach_to"`

	root *yaml.Node
}

// Metrics lists the maps that become metrics.
type Metrics struct {
	Counters   []Counter   `yaml:"counters"`
	Histograms []Histogram `yaml:"histograms"`
}

// Counter turns a map of key → u64 into a counter per decoded label set.
type Counter struct {
	// Name is both the BPF map name and the metric name (after the namespace).
	Name   string  `yaml:"name"`
	Help   string  `yaml:"help"`
	Labels []Label `yaml:"labels"`
	// MaxSeries bounds the number of series exported (0: DefaultMaxSeries).
	MaxSeries int `yaml:"max_series"`
	// PerfEventArray and FlushInterval are ebpf_exporter keys for perf
	// buffers; they are rejected with a clear error.
	PerfEventArray bool   `yaml:"perf_event_array"`
	FlushInterval  string `yaml:"flush_interval"`
}

// Histogram turns a map of key → u64 count, whose key ends in a bucket slot,
// into a Prometheus histogram per label set.
type Histogram struct {
	Name   string  `yaml:"name"`
	Help   string  `yaml:"help"`
	Labels []Label `yaml:"labels"`
	// BucketType is exp2, exp2zero, linear or fixed.
	BucketType BucketType `yaml:"bucket_type"`
	// BucketMin and BucketMax bound the slots that become buckets.
	BucketMin int `yaml:"bucket_min"`
	BucketMax int `yaml:"bucket_max"`
	// BucketMultiplier converts a bucket bound into base units, e.g. 1e-6
	// for microseconds → seconds. Zero means 1.
	BucketMultiplier float64 `yaml:"bucket_multiplier"`
	// BucketKeys are the slot values of a fixed histogram, ascending.
	BucketKeys []float64 `yaml:"bucket_keys"`
	// SumBucket is the slot that holds the sum of observed values (in
	// bucket units). Nil means bucket_max+1 for exp2, exp2zero and linear,
	// and no sum for fixed.
	SumBucket *int `yaml:"sum_bucket"`
	MaxSeries int  `yaml:"max_series"`
}

// Label is one field of a map key.
type Label struct {
	Name string `yaml:"name"`
	// Size is the field width in bytes.
	Size int `yaml:"size"`
	// Padding is skipped after the field (alignment holes in C structs).
	Padding  int       `yaml:"padding"`
	Decoders []Decoder `yaml:"decoders"`
}

// Decoder is one step of the chain that turns a label's bytes into its value.
type Decoder struct {
	Name         string            `yaml:"name"`
	StaticMap    map[string]string `yaml:"static_map"`
	AllowUnknown bool              `yaml:"allow_unknown"`
	Regexps      []string          `yaml:"regexps"`
	// StackMap names the stack-trace map read by the kstack decoder; empty
	// means the object's only BPF_MAP_TYPE_STACK_TRACE map.
	StackMap string `yaml:"stack_map"`
}

// BucketType says how histogram slots map to upper bounds.
type BucketType string

// Bucket types. For slot k and multiplier m the upper bound (le) is:
const (
	BucketExp2     BucketType = "exp2"     // 2^k · m
	BucketExp2Zero BucketType = "exp2zero" // 0 for k=0, else 2^(k-1) · m
	BucketLinear   BucketType = "linear"   // k · m
	BucketFixed    BucketType = "fixed"    // k · m, k taken from bucket_keys
)

// DefaultMaxSeries bounds series per metric when max_series is not set.
const DefaultMaxSeries = 10000

// Error is a config error at a position. Its text is
// "<file>:<line>: <path>: <message>" (":<line>" when known).
type Error struct {
	File string
	Line int
	Path string
	Msg  string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Path != "" {
		b.WriteString(": ")
		b.WriteString(e.Path)
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	return b.String()
}

// Errorf returns an *Error for the field at path (as in
// "metrics.counters[0].labels[1].size"), with the line of that field when the
// YAML source is known.
func (c *Config) Errorf(path, format string, args ...any) error {
	return &Error{File: c.File, Line: c.Line(path), Path: path, Msg: fmt.Sprintf(format, args...)}
}

// Load reads and validates <dir>/<name>.yaml. The object path is set to
// <dir>/<name>.bpf.o but not opened. Errors are *Error values.
func Load(dir, name string) (*Config, error) {
	file := filepath.Join(dir, name+".yaml")
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, &Error{File: file, Msg: err.Error()}
	}
	c, err := Parse(file, data)
	if err != nil {
		return nil, err
	}
	c.Name = name
	c.Object = filepath.Join(dir, name+".bpf.o")
	return c, nil
}

// Parse decodes YAML strictly (unknown keys are errors) and validates it.
// file is used in error messages only.
func Parse(file string, data []byte) (*Config, error) {
	c := &Config{File: file, Name: strings.TrimSuffix(filepath.Base(file), ".yaml")}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &Error{File: file, Msg: "empty config"}
		}
		return nil, yamlError(file, err)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err == nil {
		c.root = &root
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	return c, nil
}

var yamlLine = regexp.MustCompile(`^line (\d+): (.*)$`)
var unknownField = regexp.MustCompile(`^field (\S+) not found in type config\.(\w+)$`)
var wrongType = regexp.MustCompile("^cannot unmarshal !!(\\w+) `(.*)` into (.*)$")

// yamlError rewrites yaml.v3 errors into our "file:line: message" form.
func yamlError(file string, err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		if m := yamlLine.FindStringSubmatch(msg); m != nil {
			var line int
			fmt.Sscan(m[1], &line)
			return &Error{File: file, Line: line, Msg: m[2]}
		}
		return &Error{File: file, Msg: msg}
	}
	// Report the first problem; yaml.v3 lists them in document order.
	msg := te.Errors[0]
	e := &Error{File: file, Msg: msg}
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		fmt.Sscan(m[1], &e.Line)
		e.Msg = m[2]
	}
	if m := unknownField.FindStringSubmatch(e.Msg); m != nil {
		e.Msg = fmt.Sprintf("unknown key %q in %s", m[1], typeNoun(m[2]))
	} else if m := wrongType.FindStringSubmatch(e.Msg); m != nil {
		e.Msg = fmt.Sprintf("wrong type: got %s %q, want %s", yamlKind(m[1]), m[2], goTypeNoun(m[3]))
	}
	return e
}

func typeNoun(goType string) string {
	switch goType {
	case "Config":
		return "config"
	case "Metrics":
		return "metrics"
	case "Counter":
		return "counter"
	case "Histogram":
		return "histogram"
	case "Label":
		return "label"
	case "Decoder":
		return "decoder"
	}
	if n, ok := probeTypeNouns[goType]; ok {
		return n
	}
	return goType
}

func yamlKind(tag string) string {
	switch tag {
	case "str":
		return "string"
	case "int":
		return "integer"
	case "float":
		return "number"
	case "bool":
		return "boolean"
	case "seq":
		return "list"
	case "map":
		return "mapping"
	}
	return tag
}

func goTypeNoun(t string) string {
	switch {
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "map["):
		return "a mapping"
	case t == "int" || strings.HasPrefix(t, "uint") || strings.HasPrefix(t, "int"):
		return "an integer"
	case strings.HasPrefix(t, "float"):
		return "a number"
	case t == "bool":
		return "a boolean"
	case t == "string" || t == "config.BucketType":
		return "a string"
	case strings.HasPrefix(t, "config."):
		return "a mapping"
	}
	return t
}

// Line returns the 1-based line of the YAML node at path, or of its closest
// existing parent, or 0 when unknown. Path elements are keys separated by
// dots, with [i] for list indexes.
func (c *Config) Line(path string) int {
	if c.root == nil || len(c.root.Content) == 0 {
		return 0
	}
	n := c.root.Content[0]
	line := n.Line
	for _, part := range splitPath(path) {
		next := child(n, part)
		if next == nil {
			break
		}
		n = next
		line = n.Line
	}
	return line
}

func splitPath(path string) []string {
	var parts []string
	for _, p := range strings.Split(path, ".") {
		for p != "" {
			i := strings.IndexByte(p, '[')
			if i < 0 {
				parts = append(parts, p)
				break
			}
			if i > 0 {
				parts = append(parts, p[:i])
			}
			j := strings.IndexByte(p, ']')
			if j < i {
				parts = append(parts, p[i:])
				break
			}
			parts = append(parts, p[i:j+1])
			p = p[j+1:]
		}
	}
	return parts
}

func child(n *yaml.Node, part string) *yaml.Node {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == part {
				v := n.Content[i+1]
				if v.Kind == yaml.ScalarNode {
					// Point scalars at their own line (same as the key).
					return v
				}
				// For collections, the key's line reads better.
				k := *v
				k.Line = n.Content[i].Line
				return &k
			}
		}
	case yaml.SequenceNode:
		var idx int
		if _, err := fmt.Sscanf(part, "[%d]", &idx); err == nil && idx >= 0 && idx < len(n.Content) {
			return n.Content[idx]
		}
	}
	return nil
}

// Ignored returns the keys present in the config that are accepted for
// compatibility but have no effect.
func (c *Config) Ignored() []string {
	var keys []string
	if !c.CgroupIDMap.IsZero() {
		keys = append(keys, "cgroup_id_map")
	}
	if !c.Tracing.IsZero() {
		keys = append(keys, "tracing")
	}
	return keys
}

// MetricName returns <namespace>_<name>.
func (c *Config) MetricName(name string) string {
	ns := c.Namespace
	if ns == "" {
		ns = DefaultNamespace
	}
	return ns + "_" + name
}

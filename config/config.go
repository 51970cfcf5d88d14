// SPDX-License-Identifier: Apache-2.0

// Package config defines the YAML schema of a kernel_exporter program and
// validates it.
//
// A program is a pair of files: <name>.bpf.o, a compiled CO-RE BPF object, and
// <name>.yaml, which says which BPF maps of the object become which metrics
// and how each map key is split into labels. The schema is a superset of the
// one used by cloudflare/ebpf_exporter v2, so its configs load unchanged; the
// keys we add (namespace, padding, sum_bucket, max_series, stack_map, ttl,
// of) are optional.
//
// Every map key is a packed byte string. Labels consume it in order: label i
// takes size bytes, then skips padding bytes; a label with of decodes the
// bytes of an earlier label again and takes none. The sizes must add up to the
// map's key size. Histogram keys end with a label named "bucket" holding the
// slot number as an unsigned integer. A metric that lists no labels, or
// only names with decoders (overrides), gets that list from the BTF type of
// its map's key instead (btf_labels.go), then compiles the same way. A map
// value is an integer of 1, 2, 4 or 8 bytes (usually a u64), or, with
// values (see values.go), a struct whose numeric fields each become a
// metric. Per-CPU maps hold one value per CPU, summed unless per_cpu: label
// keeps a "cpu" label. Counters, gauges (the value is the current level)
// and histograms share this.
//
// Errors name the file, the line where yaml.v3 gives one, the field path and
// the offending value, e.g.
//
//	timers.yaml:7: metrics.counters[0].labels[0].size: must be 1 to 4096 bytes, got 0
//
// A config is untrusted input: limits.go bounds its size and every number
// and list in it, and errors show a value from the file only when it is a
// short token (see Quote), since a config name may point at a secret file
// and errors are served on the landing page.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/kernel-exporter/kernel_exporter/bounded"
	"github.com/kernel-exporter/kernel_exporter/internal/plural"
	"github.com/kernel-exporter/kernel_exporter/internal/printable"
	"github.com/kernel-exporter/kernel_exporter/internal/suggest"
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
	// CgroupIDMapNode is the cgroup_id_map section, read by CgroupIDMap.
	CgroupIDMapNode yaml.Node `yaml:"cgroup_id_map"`
	// Tracing turns ring buffer records into OpenTelemetry spans (see
	// tracing.go and package spans).
	Tracing Tracing `yaml:"tracing"`
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
	// Audit names kernel counters to compare metrics with (see audit.go
	// and package audit).
	Audit []Audit `yaml:"audit"`

	root *yaml.Node
	// btfBudget bounds the decoder settings of every label inferred from
	// BTF in this config together (see LabelsFromBTF).
	btfBudget *decoderBudget
}

// Metrics lists the maps that become metrics.
type Metrics struct {
	Counters   []Counter   `yaml:"counters"`
	Histograms []Histogram `yaml:"histograms"`
	Gauges     []Gauge     `yaml:"gauges"` // see values.go
}

// Counter turns a map of key → u64 into a counter per decoded label set.
type Counter struct {
	// Name is both the BPF map name and the metric name (after the namespace).
	Name   string  `yaml:"name"`
	Help   string  `yaml:"help"`
	Labels []Label `yaml:"labels"`
	// MaxSeries bounds the number of series exported (0: DefaultMaxSeries;
	// at most MaxMaxSeries).
	MaxSeries int `yaml:"max_series"`
	// TTL expires keys idle this long (empty: never; see TTL).
	TTL TTL `yaml:"ttl"`
	// Values and PerCPU: see values.go.
	Values []Value `yaml:"values"`
	PerCPU PerCPU  `yaml:"per_cpu"`
	// PerfEventArray says that Name is a BPF_MAP_TYPE_PERF_EVENT_ARRAY
	// map: each record a program writes to it with bpf_perf_event_output
	// is decoded with Labels (laid out as a map key would be) and adds 1
	// to its label set (see collector/perfarray.go). FlushInterval, a Go
	// duration (MinFlushInterval to MaxFlushInterval, empty:
	// DefaultFlushInterval), resets every series of such a counter that
	// often, as ebpf_exporter does.
	PerfEventArray bool   `yaml:"perf_event_array"`
	FlushInterval  string `yaml:"flush_interval"`
	// SkipZero leaves out map entries whose value is 0: a series only
	// such entries make is not exported. For array maps, whose entries
	// all exist, it exports the series a hash map of the same counts
	// would have.
	SkipZero bool `yaml:"skip_zero"`
}

// Histogram turns a map of key → u64 count, whose key ends in a bucket slot
// (or, with SlotsInValue, of key → one u64 count per slot), into a
// Prometheus histogram per label set.
type Histogram struct {
	Name   string  `yaml:"name"`
	Help   string  `yaml:"help"`
	Labels []Label `yaml:"labels"`
	// BucketType is exp2, exp2zero, linear or fixed.
	BucketType BucketType `yaml:"bucket_type"`
	// BucketMin and BucketMax bound the slots that become buckets: 0 to
	// MaxSlot (63 for exp2 and exp2zero), at most MaxBuckets of them.
	BucketMin int `yaml:"bucket_min"`
	BucketMax int `yaml:"bucket_max"`
	// BucketMultiplier converts a bucket bound into base units, e.g. 1e-6
	// for microseconds → seconds. Zero means 1; otherwise it must be finite
	// and > 0, and keep the largest bound finite.
	BucketMultiplier float64 `yaml:"bucket_multiplier"`
	// BucketKeys are the slot values of a fixed histogram, ascending:
	// integers from 0 to MaxSlot, at most MaxBuckets of them.
	BucketKeys []float64 `yaml:"bucket_keys"`
	// SumBucket is the slot that holds the sum of observed values (in
	// bucket units). Nil means bucket_max+1 for exp2, exp2zero and linear,
	// and the largest of bucket_keys + 1 for fixed (as ebpf_exporter reads
	// them). At most MaxSlot.
	SumBucket *int `yaml:"sum_bucket"`
	MaxSeries int  `yaml:"max_series"`
	// TTL expires keys idle this long (empty: never; see TTL).
	TTL TTL `yaml:"ttl"`
	// PerCPU: see values.go.
	PerCPU PerCPU `yaml:"per_cpu"`
	// SlotsInValue says that the map's value is an array of u64 counts,
	// one per slot (slot i at bytes [8i, 8i+8), the sum at sum_bucket
	// as in a key), and that the key holds only the labels, no bucket:
	// one map lookup per observation then updates both the bucket and
	// the sum. At most MaxValueSlots slots.
	SlotsInValue bool `yaml:"slots_in_value"`
}

// Label is one field of a map key.
type Label struct {
	Name string `yaml:"name"`
	// Size is the field width in bytes, 1 to MaxLabelSize; 0 (absent) in
	// a list of overrides of labels inferred from BTF (see
	// LabelOverrides), where the layout comes from the key's BTF.
	Size int `yaml:"size"`
	// Padding is skipped after the field (alignment holes in C structs),
	// 0 to MaxPadding bytes. The labels of a key take at most MaxKeySize
	// bytes in all.
	Padding  int       `yaml:"padding"`
	Decoders []Decoder `yaml:"decoders"`
	// Of names an earlier label of the same key whose bytes this label
	// decodes too, with its own decoders: one cgroup id field becomes
	// the namespace, pod and container labels. A label with Of takes no
	// bytes of the key: its size and padding are omitted (0), and the
	// label it names has no Of itself.
	Of string `yaml:"of"`
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
//
// Msg never quotes more of the file than a short token (see Quote), and the
// text is valid UTF-8.
type Error struct {
	File string
	Line int
	Path string
	Msg  string
	// Err is the cause when the file could not be read (a *bounded.Error:
	// errors.Is matches os.ErrNotExist, bounded.ErrNotRegular and
	// bounded.ErrTooLarge), nil otherwise.
	Err error
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
	return printable.String(b.String())
}

// Unwrap returns the cause of a read error (see Err).
func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error for the field at path (as in
// "metrics.counters[0].labels[1].size"), with the line of that field when the
// YAML source is known.
func (c *Config) Errorf(path, format string, args ...any) error {
	return &Error{File: c.File, Line: c.Line(path), Path: path, Msg: fmt.Sprintf(format, args...)}
}

// Load reads and validates <dir>/<name>.yaml. The object path is set to
// <dir>/<name>.bpf.o but not opened. name must pass CheckName. The file is
// read with bounded.ReadFile: it must be a regular file (a FIFO or a device
// is refused at once) of at most MaxFileSize bytes. Errors are *Error
// values; for a file that could not be read, errors.Is matches
// os.ErrNotExist, bounded.ErrNotRegular or bounded.ErrTooLarge.
func Load(dir, name string) (*Config, error) {
	c, _, err := LoadData(dir, name)
	return c, err
}

// LoadData is Load that also returns the bytes of the YAML it parsed (nil
// when it could not read them), for a digest of exactly what was parsed.
func LoadData(dir, name string) (*Config, []byte, error) {
	if err := CheckName(name); err != nil {
		return nil, nil, &Error{File: dir, Msg: err.Error()}
	}
	file := filepath.Join(dir, name+".yaml")
	data, err := bounded.ReadFile(file, "config", MaxFileSize)
	if err != nil {
		return nil, nil, &Error{File: file, Msg: readReason(err), Err: err}
	}
	c, err := Parse(file, data)
	if err != nil {
		return nil, data, err
	}
	c.Name = name
	c.Object = filepath.Join(dir, name+".bpf.o")
	return c, data, nil
}

// readReason is the reason of a read error, without the path (which
// *Error already shows).
func readReason(err error) string {
	var be *bounded.Error
	if errors.As(err, &be) {
		switch {
		case errors.Is(be.Err, bounded.ErrTooLarge):
			return fmt.Sprintf("larger than the %s limit of a config", bounded.Size(be.Limit))
		case errors.Is(be.Err, bounded.ErrNotRegular):
			return be.Err.Error()
		}
		err = be.Err
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Op + ": " + pe.Err.Error()
	}
	return err.Error()
}

// Parse decodes YAML strictly (unknown keys are errors) and validates it.
// file is used in error messages only. data longer than MaxFileSize is
// refused. Errors are *Error values.
func Parse(file string, data []byte) (*Config, error) {
	c := &Config{File: file, Name: strings.TrimSuffix(filepath.Base(file), ".yaml")}
	if len(data) > MaxFileSize {
		return nil, &Error{File: file, Msg: fmt.Sprintf("larger than the %s limit of a config", bounded.Size(MaxFileSize))}
	}
	// The node tree first: parsing is linear in the input, while decoding
	// into structs checks each mapping for duplicate keys in quadratic
	// time and expands aliases, so the tree's shape is bounded before.
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, yamlError(file, err)
	}
	if len(root.Content) == 0 {
		return nil, &Error{File: file, Msg: "empty config"}
	}
	c.root = &root
	if err := checkShape(file, &root); err != nil {
		return nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &Error{File: file, Msg: "empty config"}
		}
		return nil, yamlError(file, err)
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// checkShape bounds what decoding the tree into structs costs: at most
// MaxNodes nodes with aliases expanded, at most MaxMapping entries in a
// mapping, and at most MaxMappingWork for the sum over mappings of their
// entries squared (yaml.v3 compares every pair of keys of a mapping). A
// static_map's mapping is decoded in linear time by Decoder.UnmarshalYAML
// instead, so it is bounded by MaxStaticMap entries alone.
func checkShape(file string, root *yaml.Node) error {
	nodes, work := 0, 0
	fail := func(n *yaml.Node, path []string, format string, args ...any) error {
		return &Error{File: file, Line: n.Line, Path: strings.Join(path, ""), Msg: fmt.Sprintf(format, args...)}
	}
	var walk func(n *yaml.Node, path []string) error
	walk = func(n *yaml.Node, path []string) error {
		if n == nil {
			return nil
		}
		if nodes++; nodes > MaxNodes {
			return fail(n, path, "more than %d YAML nodes (aliases expanded)", MaxNodes)
		}
		if len(path) > MaxDepth {
			return fail(n, path, "nested deeper than %d levels (aliases expanded)", MaxDepth)
		}
		switch n.Kind {
		case yaml.AliasNode:
			return walk(n.Alias, append(path, ""))
		case yaml.DocumentNode:
			for _, c := range n.Content {
				if err := walk(c, path); err != nil {
					return err
				}
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				if err := walk(c, append(path, fmt.Sprintf("[%d]", i))); err != nil {
					return err
				}
			}
		case yaml.MappingNode:
			entries := len(n.Content) / 2
			if staticMapPath(path) {
				if entries > MaxStaticMap {
					return fail(n, path, "a mapping of %d entries, more than the limit of %d", entries, MaxStaticMap)
				}
				break // decoded in linear time, see Decoder.UnmarshalYAML
			}
			if entries > MaxMapping {
				return fail(n, path, "a mapping of %d entries, more than the limit of %d", entries, MaxMapping)
			}
			if work += entries * entries; work > MaxMappingWork {
				return fail(n, path, "mappings too large in total: the sum of their squared sizes is over %d", MaxMappingWork)
			}
			for i := 0; i+1 < len(n.Content); i += 2 {
				if err := walk(n.Content[i], path); err != nil {
					return err
				}
				// Path elements are keys that Quote would show, else "?".
				k := n.Content[i].Value
				if !strings.HasPrefix(Quote(k), `"`) || k == "" {
					k = "?"
				}
				if len(path) > 0 {
					k = "." + k
				}
				if err := walk(n.Content[i+1], append(path, k)); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return walk(root, nil)
}

// staticMapPath reports whether path (as built by checkShape, aliases
// leaving "" elements) is that of a decoder's static_map,
// metrics.<counters|histograms|gauges>[i].labels[j].decoders[k].static_map
// or tracing.spans[i].labels[j].decoders[k].static_map: only
// there does Decoder.UnmarshalYAML decode the mapping in linear time. A
// static_map key anywhere else (attach_to: {static_map: ...}) is decoded
// by yaml.v3 and bounded like any mapping.
func staticMapPath(path []string) bool {
	var p []string
	for _, e := range path {
		if e != "" {
			p = append(p, e)
		}
	}
	return len(p) == 8 && (p[0] == "metrics" && (p[1] == ".counters" || p[1] == ".histograms" || p[1] == ".gauges") || p[0] == "tracing" && p[1] == ".spans") &&
		isIndex(p[2]) && p[3] == ".labels" && isIndex(p[4]) && p[5] == ".decoders" && isIndex(p[6]) &&
		p[7] == ".static_map"
}

// isIndex reports whether a path element is a list index, "[N]".
func isIndex(e string) bool {
	return len(e) > 2 && e[0] == '[' && e[len(e)-1] == ']'
}

var (
	yamlLine      = regexp.MustCompile(`^line (\d+): (.*)$`)
	unknownField  = regexp.MustCompile(`^field (.*) not found in type config\.(\w+)$`)
	unknownAnchor = regexp.MustCompile(`^unknown anchor .* referenced$`)
	cannotDecode  = regexp.MustCompile(`^cannot decode \S+ .* as an? (!!\w+)$`)
	keyTwice      = regexp.MustCompile(`^mapping key .* already defined at line (\d+)$`)
	fieldTwice    = regexp.MustCompile(`^field (.*) already set in type config\.(\w+)$`)
	wrongTypeVal  = regexp.MustCompile("^cannot unmarshal (\\S+) `(.*)` into (.+)$")
	wrongTypeKind = regexp.MustCompile(`^cannot unmarshal (\S+) into (.+)$`)
)

// yamlError rewrites yaml.v3 errors into our "file:line: message" form.
// yaml.v3 quotes values from the file (up to 7 bytes of them); the
// rewritten message shows only what Quote allows.
func yamlError(file string, err error) error {
	var te *yaml.TypeError
	var msg string
	if errors.As(err, &te) && len(te.Errors) > 0 {
		// Report the first problem; yaml.v3 lists them in document order.
		msg = te.Errors[0]
	} else {
		msg = strings.TrimPrefix(err.Error(), "yaml: ")
	}
	e := &Error{File: file, Msg: msg}
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		if n, err := strconv.Atoi(m[1]); err == nil {
			e.Line = n
		}
		e.Msg = m[2]
	}
	e.Msg = yamlMessage(e.Msg)
	return e
}

// yamlMessage rewrites one yaml.v3 message (without its "line N: ").
func yamlMessage(msg string) string {
	if m := unknownField.FindStringSubmatch(msg); m != nil {
		if m[2] == "Config" {
			return unknownTopKey(m[1])
		}
		return fmt.Sprintf("unknown key %s in %s%s", Quote(m[1]), typeNoun(m[2]), didYouMean(m[1], m[2]))
	}
	// Anchors and tagged values may be the first bytes of a file that is
	// not a config: described, never quoted.
	if unknownAnchor.MatchString(msg) {
		return "unknown anchor referenced (an alias *name with no &name before it)"
	}
	if m := cannotDecode.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("a value tagged %s that is not one", m[1])
	}
	if m := keyTwice.FindStringSubmatch(msg); m != nil {
		// Keys are not shown: the line is enough to find the key, and the
		// first keys of a file that is not a config are its content.
		return "a key given twice: first at line " + m[1]
	}
	if m := fieldTwice.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("key %s set twice in %s", Quote(m[1]), typeNoun(m[2]))
	}
	if m := wrongTypeVal.FindStringSubmatch(msg); m != nil {
		if m[3] == "config.Config" {
			// The whole file is one scalar: nothing of it is shown.
			kind, ok := yamlKind(m[1])
			if !ok {
				kind = "value with a custom tag"
			}
			return fmt.Sprintf("not a config: the file is a single %s, not a mapping of config keys", kind)
		}
		kind, ok := yamlKind(m[1])
		if !ok {
			return fmt.Sprintf("wrong type: got a value with a custom tag, want %s", goTypeNoun(m[3]))
		}
		// yaml.v3 shows values longer than 10 bytes as their first 7 and "...".
		if len(m[2]) == 10 && strings.HasSuffix(m[2], "...") {
			return fmt.Sprintf("wrong type: got %s of more than 10 bytes, want %s", article(kind), goTypeNoun(m[3]))
		}
		if q := Quote(m[2]); strings.HasPrefix(q, `"`) {
			return fmt.Sprintf("wrong type: got %s %s, want %s", kind, q, goTypeNoun(m[3]))
		}
		return fmt.Sprintf("wrong type: got %s of %s, want %s", article(kind), plural.Count(len(m[2]), "byte"), goTypeNoun(m[3]))
	}
	if m := wrongTypeKind.FindStringSubmatch(msg); m != nil {
		kind, ok := yamlKind(m[1])
		if !ok {
			kind = "value with a custom tag"
		}
		return fmt.Sprintf("wrong type: got %s, want %s", article(kind), goTypeNoun(m[2]))
	}
	return Sanitize(msg)
}

// article puts "a" or "an" before a noun: "an integer", "a string".
func article(noun string) string {
	if noun != "" && strings.ContainsRune("aeiou", rune(noun[0])) {
		return "an " + noun
	}
	return "a " + noun
}

// topKeys are the keys a config may have at its top level.
var topKeys = []string{"alternatives", "attach_to", "audit", "cgroup_id_map", "kaddrs", "metrics", "namespace", "perf_events", "requires", "tracing", "uprobes", "usdt"}

// unknownTopKey describes an unknown key at the top level of a config. The
// first key of a file that is not a config (a config name pointing at a
// secret "user:password" file) is its content, so the key is shown only
// when it is a near miss of a known key (at most 2 edits), that is a typo
// of the schema, never a secret.
func unknownTopKey(k string) string {
	for _, known := range topKeys {
		if len(k) <= MaxToken && suggest.Distance(k, known) <= 2 {
			return fmt.Sprintf("unknown key %s at the top level (did you mean %q?)", Quote(k), known)
		}
	}
	return fmt.Sprintf("unknown key of %s at the top level: not a config? (known keys: %s)", plural.Count(len(k), "byte"), strings.Join(topKeys, ", "))
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
	case "Gauge":
		return "gauge"
	case "Value":
		return "value"
	case "Label":
		return "label"
	case "Decoder":
		return "decoder"
	case "Audit":
		return "audit entry"
	}
	if n, ok := probeTypeNouns[goType]; ok {
		return n
	}
	return goType
}

// yamlKind names a yaml.v3 short tag ("!!str" → "string"); ok is false
// for a custom tag, which comes from the file.
func yamlKind(tag string) (string, bool) {
	switch tag {
	case "!!str":
		return "string", true
	case "!!int":
		return "integer", true
	case "!!float":
		return "number", true
	case "!!bool":
		return "boolean", true
	case "!!seq":
		return "list", true
	case "!!map":
		return "mapping", true
	case "!!null":
		return "null", true
	case "!!binary":
		return "binary", true
	case "!!timestamp":
		return "timestamp", true
	case "!!merge":
		return "merge key", true
	}
	return "", false
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
	case t == "string" || t == "config.BucketType" || t == "config.TTL" || t == "config.PerCPU":
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
	return nil
}

// MetricName returns <namespace>_<name>.
func (c *Config) MetricName(name string) string {
	ns := c.Namespace
	if ns == "" {
		ns = DefaultNamespace
	}
	return ns + "_" + name
}

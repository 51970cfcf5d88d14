// SPDX-License-Identifier: Apache-2.0

// Package collector reads BPF maps at scrape time and turns them into
// Prometheus metrics.
//
// The data flow per config is: a Plan, compiled once from the config and the
// object's map specs (key layout, decoder chains, bucket bounds), then at each
// scrape: read every map (batch lookups, reused buffers), decode each key into
// label values through a bounded per-metric LRU cache, sum keys that decode to
// the same label set, and emit const metrics. Concurrent scrapes of one config
// share a single read in flight. Each entry's value bytes go to every
// metric of its map (several for a struct value): a metric reads its
// ValueField from each CPU's value, and sums the CPUs or keeps each under
// a "cpu" label (plan_values.go, percpu.go); counters and gauges add it to
// their series, histograms to the key's bucket. A metric with a ttl also
// tracks how long each key has been idle, and at the end of a complete read
// deletes from the map the keys of series idle for ttl (expire.go);
// Config.StartExpiry reads such a config in the background so that keys
// expire without scrapes.
package collector

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/kernel-exporter/kernel_exporter/config"
	"github.com/kernel-exporter/kernel_exporter/decoder"
)

// Plan is a config compiled against its object: what to read and how to
// decode it. It holds no kernel resources.
type Plan struct {
	Config  *config.Config
	Metrics []*MetricPlan

	// Warnings are the config's problems accepted with
	// --compat.ebpf-exporter, which the caller logs: listed labels that
	// contradict the key's BTF (config.CheckKeyLabels), each a
	// *config.Error.
	Warnings []error

	stacks map[string]*ebpf.Map // filled by Bind
	spec   *ebpf.CollectionSpec
	compat bool // env.Compat
}

// MetricPlan describes one metric's map and key layout.
type MetricPlan struct {
	Name      string // metric name with namespace
	MapName   string
	Help      string
	Histogram bool
	// MaxSeries is the metric's max_series; 0 when the config sets none,
	// and New applies Limits.MaxSeries (--config.max-series).
	MaxSeries int
	// TTL is the metric's ttl: keys idle this long are deleted from the
	// map (see expire.go); 0 when the config sets none.
	TTL time.Duration

	KeySize   int
	ValueSize int // bytes per value (per CPU for per-CPU maps)
	PerCPU    bool
	// Inferred is true when the labels come from the BTF type of the
	// map's key (see resolveLabels), false when the config lists them.
	Inferred bool

	// Kind is KindCounter, KindGauge or KindHistogram (Histogram is set
	// with the latter). Value is the integer each value holds for this
	// metric: the whole value, or a field of a struct (plan_values.go).
	Kind  Kind
	Value ValueField
	// CPULabel: a per-CPU map read per CPU (per_cpu: label). The key the
	// labels describe is then the CPU number (4 bytes) then the map key:
	// Labels[0] is "cpu", and KeySize and BucketOff count the 4 bytes.
	CPULabel bool

	Labels []LabelPlan // label fields, without the bucket for histograms
	// Histogram only: the bucket field, slot → bucket index, and bounds.
	BucketOff, BucketSize int
	Buckets               Buckets
	// SkipZero (counters): entries whose value is 0 add nothing and make
	// no series.
	SkipZero bool
	// ValueSlots, for a histogram with slots_in_value, is the number of
	// u64 slot counts in each value (slot i at bytes [8i, 8i+8)); the key
	// then has no bucket field: BucketOff is KeySize, BucketSize 0. 0
	// otherwise.
	ValueSlots int

	// Perf: the map is a perf event array whose records, laid out as
	// Labels over KeySize bytes, each count 1 (perfarray.go); the
	// series reset every Flush.
	Perf  bool
	Flush time.Duration
}

// LabelPlan is one label: the key bytes [Off, Off+Size) and its decoders.
type LabelPlan struct {
	Name  string
	Off   int
	Size  int
	Chain decoder.Chain
}

// Compile checks cfg against the maps in spec and builds the decoders. Its
// errors are *config.Error values naming the file, line and field; they
// quote names from the config or the object only as config.Quote allows.
//
// Compile does not trust cfg to be validated: every label must lie inside
// its map's key (sizes 1 to config.MaxLabelSize bytes, padding 0 to
// config.MaxPadding, in total at most config.MaxKeySize), and a histogram
// has at most config.MaxBuckets buckets, so that no scrape can index past a
// key and no histogram allocates more than that.
func Compile(cfg *config.Config, spec *ebpf.CollectionSpec, env *decoder.Env) (*Plan, error) {
	if spec == nil {
		spec = &ebpf.CollectionSpec{}
	}
	p := &Plan{Config: cfg, spec: spec, stacks: map[string]*ebpf.Map{}, compat: env != nil && env.Compat}
	for i, c := range cfg.Metrics.Counters {
		path := fmt.Sprintf("metrics.counters[%d]", i)
		if c.PerfEventArray {
			mp, err := p.compilePerf(path, &c, env)
			if err != nil {
				return nil, err
			}
			p.Metrics = append(p.Metrics, mp)
			continue
		}
		cLabels, perCPU := p.referenceCPULabel(c.Name, c.Labels, c.PerCPU)
		labels, inferred, err := p.resolveLabels(path, c.Name, cLabels, false)
		if err != nil {
			return nil, err
		}
		mp, err := p.compileMetric(path, c.Name, c.Help, labels, env, len(labels) > 0)
		if err != nil {
			return nil, err
		}
		mp.Inferred = inferred
		mp.MaxSeries = c.MaxSeries
		mp.SkipZero = c.SkipZero
		if mp.TTL, err = p.compileTTL(path, c.Name, c.TTL); err != nil {
			return nil, err
		}
		mps, err := p.compileValues(path, mp, KindCounter, c.Values, false, perCPU, c.Help, env)
		if err != nil {
			return nil, err
		}
		p.Metrics = append(p.Metrics, mps...)
	}
	for i := range cfg.Metrics.Histograms {
		h := &cfg.Metrics.Histograms[i]
		path := fmt.Sprintf("metrics.histograms[%d]", i)
		if h.SlotsInValue {
			mps, err := p.compileValueSlots(path, h, env)
			if err != nil {
				return nil, err
			}
			p.Metrics = append(p.Metrics, mps...)
			continue
		}
		labels, inferred, err := p.resolveLabels(path, h.Name, h.Labels, true)
		if err != nil {
			return nil, err
		}
		if len(labels) == 0 {
			return nil, cfg.Errorf(path+".labels", "histogram has no %q label", config.BucketLabel)
		}
		last := len(labels) - 1
		mp, err := p.compileMetric(path, h.Name, h.Help, labels[:last], env, false)
		if err != nil {
			return nil, err
		}
		mp.Histogram = true
		mp.Inferred = inferred
		mp.MaxSeries = h.MaxSeries
		if mp.TTL, err = p.compileTTL(path, h.Name, h.TTL); err != nil {
			return nil, err
		}
		b := labels[last]
		off, err := p.labelsEnd(path, labels[:last])
		if err != nil {
			return nil, err
		}
		bp := fmt.Sprintf("%s.labels[%d]", path, last)
		if err := checkLabel(cfg, bp, b, off, mp.KeySize); err != nil {
			return nil, err
		}
		if b.Size != 1 && b.Size != 2 && b.Size != 4 && b.Size != 8 {
			return nil, cfg.Errorf(bp+".size", "bucket label size must be 1, 2, 4 or 8 bytes, got %d", b.Size)
		}
		mp.BucketOff = off
		mp.BucketSize = b.Size
		if want := off + b.Size + b.Padding; want != mp.KeySize {
			return nil, sumError(cfg, path, h.Name, labels, mp.KeySize)
		}
		if n := bucketCount(h); n > config.MaxBuckets {
			return nil, cfg.Errorf(path+".bucket_max", "%d buckets, more than the limit of %d", n, config.MaxBuckets)
		}
		mp.Buckets = NewBuckets(h)
		mp.Buckets.LeaveOut = env != nil && env.Compat
		mps, err := p.compileValues(path, mp, KindHistogram, nil, false, h.PerCPU, h.Help, env)
		if err != nil {
			return nil, err
		}
		p.Metrics = append(p.Metrics, mps...)
	}
	if err := p.compileGauges(env); err != nil {
		return nil, err
	}
	return p, nil
}

// compileValueSlots compiles a histogram with slots_in_value: its key
// holds only labels (laid out as a counter's: the whole key when listed,
// from BTF otherwise) and its value is an array of u64 counts, one per
// slot. A value that is not a whole number of u64 (1 to
// config.MaxValueSlots of them) is an error naming the map.
func (p *Plan) compileValueSlots(path string, h *config.Histogram, env *decoder.Env) ([]*MetricPlan, error) {
	cfg := p.Config
	labels, inferred, err := p.resolveLabels(path, h.Name, h.Labels, false)
	if err != nil {
		return nil, err
	}
	mp, err := p.compileMetric(path, h.Name, h.Help, labels, env, len(labels) > 0)
	if err != nil {
		return nil, err
	}
	mp.Histogram = true
	mp.Inferred = inferred
	mp.MaxSeries = h.MaxSeries
	if h.TTL != "" {
		return nil, cfg.Errorf(path+".ttl", "metric %s: ttl is not supported with slots_in_value", config.Quote(h.Name))
	}
	if n := mp.ValueSize / 8; mp.ValueSize%8 != 0 || n < 1 || n > config.MaxValueSlots {
		return nil, cfg.Errorf(path+".slots_in_value", "map %s has %d-byte values, want 1 to %d u64 slot counts (a multiple of 8 bytes)", config.Quote(h.Name), mp.ValueSize, config.MaxValueSlots)
	}
	mp.ValueSlots = mp.ValueSize / 8
	mp.BucketOff = mp.KeySize // the whole key is labels
	if n := bucketCount(h); n > config.MaxBuckets {
		return nil, cfg.Errorf(path+".bucket_max", "%d buckets, more than the limit of %d", n, config.MaxBuckets)
	}
	mp.Buckets = NewBuckets(h)
	mp.Buckets.LeaveOut = env != nil && env.Compat
	return p.compileValues(path, mp, KindHistogram, nil, false, h.PerCPU, h.Help, env)
}

// checkLabel checks that label l, at byte off of a key of keySize bytes,
// has a size and padding in range and lies inside the key.
func checkLabel(cfg *config.Config, lp string, l config.Label, off, keySize int) error {
	if l.Size <= 0 || l.Size > config.MaxLabelSize {
		return cfg.Errorf(lp+".size", "must be 1 to %d bytes, got %d", config.MaxLabelSize, l.Size)
	}
	if l.Padding < 0 || l.Padding > config.MaxPadding {
		return cfg.Errorf(lp+".padding", "must be 0 to %d bytes, got %d", config.MaxPadding, l.Padding)
	}
	// off <= MaxKeySize (see labelsEnd), so these sums cannot overflow.
	if off+l.Size > keySize {
		return cfg.Errorf(lp+".size", "bytes %d to %d are past the end of the %d-byte map key", off, off+l.Size, keySize)
	}
	return nil
}

// labelsEnd returns the key offset after labels, checking each as
// checkLabel does against the largest key.
func (p *Plan) labelsEnd(path string, labels []config.Label) (int, error) {
	off := 0
	for i, l := range labels {
		if l.Of != "" {
			continue // no bytes of its own; compileMetric checks it
		}
		lp := fmt.Sprintf("%s.labels[%d]", path, i)
		if err := checkLabel(p.Config, lp, l, off, config.MaxKeySize); err != nil {
			return 0, err
		}
		if off += l.Size + l.Padding; off > config.MaxKeySize {
			return 0, p.Config.Errorf(lp+".padding", "labels up to here take %d bytes, more than the %d-byte limit of a map key", off, config.MaxKeySize)
		}
	}
	return off, nil
}

// bucketCount returns the number of buckets h asks for (at most
// config.MaxBuckets+1, for any h).
func bucketCount(h *config.Histogram) int {
	if h.BucketType == config.BucketFixed {
		return min(len(h.BucketKeys), config.MaxBuckets+1)
	}
	if h.BucketMin < 0 || h.BucketMax < h.BucketMin {
		return 0
	}
	if h.BucketMax-h.BucketMin >= config.MaxBuckets || h.BucketMax-h.BucketMin < 0 {
		return config.MaxBuckets + 1
	}
	return h.BucketMax - h.BucketMin + 1
}

// compileMetric builds the plan of one map. checkSize asks that the labels
// cover the whole key (counters with labels; histograms check later).
func (p *Plan) compileMetric(path, name, help string, labels []config.Label, env *decoder.Env, checkSize bool) (*MetricPlan, error) {
	cfg := p.Config
	ms, ok := p.spec.Maps[name]
	if !ok || ms == nil {
		return nil, cfg.Errorf(path+".name", "map %s not found in %s (maps: %s)", config.Quote(name), cfg.Object, mapNames(p.spec))
	}
	mp := &MetricPlan{
		Name:      cfg.MetricName(name),
		MapName:   name,
		Help:      help,
		KeySize:   int(ms.KeySize),
		ValueSize: int(ms.ValueSize),
		PerCPU:    isPerCPU(ms.Type),
	}
	if !readable(ms.Type) {
		if ms.Type == ebpf.PerfEventArray {
			return nil, cfg.Errorf(path+".name", "map %s is a perf event array: set perf_event_array: true to count its records", config.Quote(name))
		}
		return nil, cfg.Errorf(path+".name", "map %s has type %s, want a hash or array map", config.Quote(name), ms.Type)
	}
	off, err := p.compileLabels(path, mp, labels, env)
	if err != nil {
		return nil, err
	}
	if checkSize && off != mp.KeySize {
		return nil, sumError(cfg, path, name, labels, mp.KeySize)
	}
	return mp, nil
}

// compileLabels builds mp.Labels from labels laid out over mp.KeySize
// bytes, and returns the offset after the last one.
func (p *Plan) compileLabels(path string, mp *MetricPlan, labels []config.Label, env *decoder.Env) (int, error) {
	cfg := p.Config
	off := 0
	for i, l := range labels {
		lp := fmt.Sprintf("%s.labels[%d]", path, i)
		at, size := off, l.Size
		if l.Of != "" {
			// The bytes of an earlier label (config.Label.Of); validated
			// by config, checked again for configs built in code.
			j := slices.IndexFunc(labels[:i], func(e config.Label) bool { return e.Name == l.Of && e.Of == "" })
			if j < 0 || l.Size != 0 || l.Padding != 0 {
				return 0, cfg.Errorf(lp+".of", "no earlier label %s with bytes of its own, or size or padding set", config.Quote(l.Of))
			}
			at, size = mp.Labels[j].Off, mp.Labels[j].Size
		} else if err := checkLabel(cfg, lp, l, off, mp.KeySize); err != nil {
			return 0, err
		}
		chain, err := env.NewChain(l.Decoders, size, p.stackReader)
		if err != nil {
			var ce *decoder.ChainError
			if errors.As(err, &ce) {
				return 0, cfg.Errorf(fmt.Sprintf("%s.decoders[%d].name", lp, ce.Index), "%s", config.Sanitize(ce.Err.Error()))
			}
			return 0, cfg.Errorf(lp+".decoders", "%s", config.Sanitize(err.Error()))
		}
		mp.Labels = append(mp.Labels, LabelPlan{Name: l.Name, Off: at, Size: size, Chain: chain})
		// checkLabel bounds size and padding and off+size <= KeySize, so
		// this stays far from overflowing.
		off += l.Size + l.Padding
	}
	return off, nil
}

// mapNames lists the object's maps for an error, as config.Quote shows
// them, at most config.MaxListed.
func mapNames(spec *ebpf.CollectionSpec) string {
	// ke_map_update_errors and ke_dropped are the helpers' own (maphealth.go,
	// drops.go), never a metric.
	names := slices.DeleteFunc(sortedKeys(spec.Maps), func(n string) bool { return n == UpdateErrorsMap || n == DroppedMap })
	if len(names) == 0 {
		return "none"
	}
	return config.JoinListed(len(names), func(b *strings.Builder, i int) {
		if q := config.Quote(names[i]); strings.HasPrefix(q, `"`) {
			b.WriteString(names[i]) // a short token
		} else {
			b.WriteString(q)
		}
	})
}

func isPerCPU(t ebpf.MapType) bool {
	switch t {
	case ebpf.PerCPUHash, ebpf.PerCPUArray, ebpf.LRUCPUHash:
		return true
	}
	return false
}

// compileTTL checks the ttl of the metric of map name at path: in range
// (config.ParseTTL), and only on maps whose entries can be deleted (the
// hash family; an array's entries always exist).
func (p *Plan) compileTTL(path, name string, ttl config.TTL) (time.Duration, error) {
	d, err := p.Config.ParseTTL(path, name, ttl)
	if err != nil || d == 0 {
		return d, err
	}
	if t := p.spec.Maps[name].Type; !deletable(t) {
		return 0, p.Config.Errorf(path+".ttl", "metric %s: map %s is a %s map, whose entries cannot be deleted: ttl needs a hash, percpu_hash, lru_hash or lru_percpu_hash map", config.Quote(name), config.Quote(name), mapTypeName(t))
	}
	return d, nil
}

// deletable reports whether a map type's entries can be deleted.
func deletable(t ebpf.MapType) bool {
	switch t {
	case ebpf.Hash, ebpf.PerCPUHash, ebpf.LRUHash, ebpf.LRUCPUHash:
		return true
	}
	return false
}

// mapTypeName is the name of a readable map type as in BPF_MAP_TYPE_*,
// lower case.
func mapTypeName(t ebpf.MapType) string {
	switch t {
	case ebpf.Array:
		return "array"
	case ebpf.PerCPUArray:
		return "percpu_array"
	}
	return t.String()
}

func readable(t ebpf.MapType) bool {
	switch t {
	case ebpf.Hash, ebpf.Array, ebpf.PerCPUHash, ebpf.PerCPUArray, ebpf.LRUHash, ebpf.LRUCPUHash:
		return true
	}
	return false
}

// stackReader resolves a kstack decoder's stack map once the object is
// loaded (see Bind).
func (p *Plan) stackReader(name string) (decoder.StackReader, error) {
	if name == "" {
		for n, ms := range p.spec.Maps {
			if ms.Type == ebpf.StackTrace {
				if name != "" {
					return nil, fmt.Errorf("object has several stack-trace maps; set stack_map")
				}
				name = n
			}
		}
		if name == "" {
			return nil, fmt.Errorf("object has no stack-trace map")
		}
	}
	if ms, ok := p.spec.Maps[name]; !ok || ms.Type != ebpf.StackTrace {
		return nil, fmt.Errorf("stack_map %q is not a stack-trace map of the object", name)
	}
	return &stackMap{plan: p, name: name}, nil
}

type stackMap struct {
	plan *Plan
	name string
}

// Stack reads the frames of one stack id (u64 addresses, innermost first).
func (s *stackMap) Stack(id uint32) ([]uint64, error) {
	m := s.plan.stacks[s.name]
	if m == nil {
		return nil, fmt.Errorf("stack map %q is not loaded", s.name)
	}
	frames := make([]uint64, m.ValueSize()/8)
	if err := m.Lookup(id, frames); err != nil {
		return nil, err
	}
	for i, f := range frames {
		if f == 0 {
			return frames[:i], nil
		}
	}
	return frames, nil
}

// Bind attaches the loaded collection's stack maps to the plan's decoders.
func (p *Plan) Bind(coll *ebpf.Collection) {
	for n, m := range coll.Maps {
		if m.Type() == ebpf.StackTrace {
			p.stacks[n] = m
		}
	}
}

// Buckets maps histogram slots to Prometheus buckets.
type Buckets struct {
	// Upper are the bucket upper bounds in base units, ascending.
	Upper []float64
	// Multiplier converts the raw sum into base units.
	Multiplier float64
	// SumSlot holds the sum (-1: none).
	SumSlot int64

	// LeaveOut drops slots that are neither a bucket nor the sum slot
	// from the histogram (Slot returns -3), as cloudflare/ebpf_exporter
	// reads its maps; set under --compat.ebpf-exporter (decoder.Env.Compat).
	// Without it they are observations: below bucket_min in the first
	// bucket, others in +Inf only.
	LeaveOut bool

	// exp2, exp2zero and linear: slots min..max are buckets 0..max-min,
	// slots below min count in bucket 0, slots above max in +Inf only.
	min, max uint64
	// fixed: keys are the bucket_keys as slots, ascending; index[slot] is
	// the bucket of a slot (-1: none) when the largest key is below
	// config.MaxBuckets, else keys are searched.
	fixed bool
	keys  []uint64
	index []int32
}

// NewBuckets computes bounds for a validated histogram config. It never
// makes more than config.MaxBuckets buckets: the excess of an unvalidated
// config is left out (Compile refuses such configs).
func NewBuckets(h *config.Histogram) Buckets {
	mult := h.BucketMultiplier
	if mult == 0 {
		mult = 1
	}
	b := Buckets{Multiplier: mult, SumSlot: -1}
	switch h.BucketType {
	case config.BucketFixed:
		b.fixed = true
		keys := h.BucketKeys[:min(len(h.BucketKeys), config.MaxBuckets)]
		for _, k := range keys {
			if !(k >= 0 && k <= config.MaxSlot) {
				k = 0 // not a slot: only an unvalidated config has it
			}
			b.keys = append(b.keys, uint64(k))
			b.Upper = append(b.Upper, k*mult)
		}
		if n := len(b.keys); n > 0 && b.keys[n-1] < config.MaxBuckets {
			b.index = make([]int32, b.keys[n-1]+1)
			for i := range b.index {
				b.index[i] = -1
			}
			for i, k := range b.keys {
				// Equal keys: the slot goes to the last of them.
				b.index[k] = int32(i)
			}
		}
		if n := len(b.keys); n > 0 {
			// The reference's sum slot of a fixed histogram.
			b.SumSlot = int64(b.keys[n-1]) + 1
		}
	default:
		lo, hi := max(h.BucketMin, 0), max(h.BucketMax, 0)
		hi = min(hi, lo+config.MaxBuckets-1)
		if h.BucketMax < lo {
			hi = lo - 1 // no buckets
		}
		b.min, b.max = uint64(lo), uint64(hi)
		for k := lo; k <= hi; k++ {
			var up float64
			switch h.BucketType {
			case config.BucketExp2:
				up = math.Ldexp(1, k)
			case config.BucketExp2Zero:
				if k > 0 {
					up = math.Ldexp(1, k-1)
				}
			case config.BucketLinear:
				up = float64(k)
			}
			b.Upper = append(b.Upper, up*mult)
		}
		b.SumSlot = int64(h.BucketMax) + 1
	}
	if h.SumBucket != nil {
		b.SumSlot = int64(*h.SumBucket)
	}
	return b
}

// Slot returns the bucket index of a slot: >= 0 for a bucket, -1 for +Inf
// only (an unknown slot), -2 for the sum slot, -3 for a slot left out
// (LeaveOut: a slot that is neither a bucket nor the sum).
func (b *Buckets) Slot(slot uint64) int {
	if b.SumSlot >= 0 && slot == uint64(b.SumSlot) {
		return -2
	}
	i := b.slot(slot)
	if b.LeaveOut && (i == -1 || (!b.fixed && slot < b.min)) {
		return -3
	}
	return i
}

func (b *Buckets) slot(slot uint64) int {
	if b.fixed {
		if slot < uint64(len(b.index)) {
			return int(b.index[slot])
		}
		if b.index != nil {
			return -1
		}
		// The last key equal to slot, if any.
		i := sort.Search(len(b.keys), func(i int) bool { return b.keys[i] > slot }) - 1
		if i >= 0 && b.keys[i] == slot {
			return i
		}
		return -1
	}
	if len(b.Upper) == 0 || slot > b.max {
		return -1
	}
	if slot < b.min {
		return 0 // below bucket_min: counts in the first bucket
	}
	return int(slot - b.min)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

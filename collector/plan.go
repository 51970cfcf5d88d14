// Package collector reads BPF maps at scrape time and turns them into
// Prometheus metrics.
//
// The data flow per config is: a Plan, compiled once from the config and the
// object's map specs (key layout, decoder chains, bucket bounds), then at each
// scrape: read every map (batch lookups, reused buffers), decode each key into
// label values through a bounded per-metric LRU cache, sum keys that decode to
// the same label set, and emit const metrics. Concurrent scrapes of one config
// share a single read in flight.
package collector

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/cilium/ebpf"
	"github.com/kernel-exporter/kernel_exporter/config"
	"github.com/kernel-exporter/kernel_exporter/decoder"
)

// Plan is a config compiled against its object: what to read and how to
// decode it. It holds no kernel resources.
type Plan struct {
	Config  *config.Config
	Metrics []*MetricPlan

	stacks map[string]*ebpf.Map // filled by Bind
	spec   *ebpf.CollectionSpec
}

// MetricPlan describes one metric's map and key layout.
type MetricPlan struct {
	Name      string // metric name with namespace
	MapName   string
	Help      string
	Histogram bool
	MaxSeries int

	KeySize   int
	ValueSize int // bytes per value (per CPU for per-CPU maps)
	PerCPU    bool

	Labels []LabelPlan // label fields, without the bucket for histograms
	// Histogram only: the bucket field, slot → bucket index, and bounds.
	BucketOff, BucketSize int
	Buckets               Buckets
}

// LabelPlan is one label: the key bytes [Off, Off+Size) and its decoders.
type LabelPlan struct {
	Name  string
	Off   int
	Size  int
	Chain decoder.Chain
}

// Compile checks cfg against the maps in spec and builds the decoders. Its
// errors are *config.Error values naming the file, line and field.
func Compile(cfg *config.Config, spec *ebpf.CollectionSpec, env *decoder.Env) (*Plan, error) {
	p := &Plan{Config: cfg, spec: spec, stacks: map[string]*ebpf.Map{}}
	for i, c := range cfg.Metrics.Counters {
		path := fmt.Sprintf("metrics.counters[%d]", i)
		mp, err := p.compileMetric(path, c.Name, c.Help, c.Labels, env, len(c.Labels) > 0)
		if err != nil {
			return nil, err
		}
		mp.MaxSeries = config.MaxSeries(c.MaxSeries)
		p.Metrics = append(p.Metrics, mp)
	}
	for i, h := range cfg.Metrics.Histograms {
		path := fmt.Sprintf("metrics.histograms[%d]", i)
		mp, err := p.compileMetric(path, h.Name, h.Help, h.Labels[:len(h.Labels)-1], env, false)
		if err != nil {
			return nil, err
		}
		mp.Histogram = true
		mp.MaxSeries = config.MaxSeries(h.MaxSeries)
		b := h.Labels[len(h.Labels)-1]
		mp.BucketOff = config.KeySize(h.Labels[:len(h.Labels)-1])
		mp.BucketSize = b.Size
		if want := mp.BucketOff + b.Size + b.Padding; want != mp.KeySize {
			return nil, cfg.Errorf(path+".labels", "label sizes add up to %d bytes, but map %q has %d-byte keys", want, h.Name, mp.KeySize)
		}
		mp.Buckets = NewBuckets(&h)
		p.Metrics = append(p.Metrics, mp)
	}
	return p, nil
}

// compileMetric builds the plan of one map. checkSize asks that the labels
// cover the whole key (counters with labels; histograms check later).
func (p *Plan) compileMetric(path, name, help string, labels []config.Label, env *decoder.Env, checkSize bool) (*MetricPlan, error) {
	cfg := p.Config
	ms, ok := p.spec.Maps[name]
	if !ok {
		return nil, cfg.Errorf(path+".name", "map %q not found in %s (maps: %s)", name, cfg.Object, mapNames(p.spec))
	}
	mp := &MetricPlan{
		Name:      cfg.MetricName(name),
		MapName:   name,
		Help:      help,
		KeySize:   int(ms.KeySize),
		ValueSize: int(ms.ValueSize),
		PerCPU:    isPerCPU(ms.Type),
	}
	if ms.ValueSize != 8 {
		return nil, cfg.Errorf(path+".name", "map %q has %d-byte values, want 8 (u64)", name, ms.ValueSize)
	}
	if !readable(ms.Type) {
		return nil, cfg.Errorf(path+".name", "map %q has type %s, want a hash or array map", name, ms.Type)
	}
	off := 0
	for i, l := range labels {
		lp := fmt.Sprintf("%s.labels[%d]", path, i)
		chain, err := env.NewChain(l.Decoders, l.Size, p.stackReader)
		if err != nil {
			var ce *decoder.ChainError
			if errors.As(err, &ce) {
				return nil, cfg.Errorf(fmt.Sprintf("%s.decoders[%d].name", lp, ce.Index), "%v", ce.Err)
			}
			return nil, cfg.Errorf(lp+".decoders", "%v", err)
		}
		mp.Labels = append(mp.Labels, LabelPlan{Name: l.Name, Off: off, Size: l.Size, Chain: chain})
		off += l.Size + l.Padding
	}
	if checkSize && off != mp.KeySize {
		return nil, cfg.Errorf(path+".labels", "label sizes add up to %d bytes, but map %q has %d-byte keys", off, name, mp.KeySize)
	}
	return mp, nil
}

func mapNames(spec *ebpf.CollectionSpec) string {
	s := ""
	for _, n := range sortedKeys(spec.Maps) {
		if s != "" {
			s += ", "
		}
		s += n
	}
	if s == "" {
		return "none"
	}
	return s
}

func isPerCPU(t ebpf.MapType) bool {
	switch t {
	case ebpf.PerCPUHash, ebpf.PerCPUArray, ebpf.LRUCPUHash:
		return true
	}
	return false
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
	// index[slot] is the bucket of a slot, -1 for none; slots past the end
	// of index go to +Inf only.
	index []int
	// SumSlot holds the sum (-1: none).
	SumSlot int64
}

// NewBuckets computes bounds for a validated histogram config.
func NewBuckets(h *config.Histogram) Buckets {
	mult := h.BucketMultiplier
	if mult == 0 {
		mult = 1
	}
	b := Buckets{Multiplier: mult, SumSlot: -1}
	switch h.BucketType {
	case config.BucketFixed:
		maxKey := int(h.BucketKeys[len(h.BucketKeys)-1])
		b.index = make([]int, maxKey+1)
		for i := range b.index {
			b.index[i] = -1
		}
		for i, k := range h.BucketKeys {
			b.index[int(k)] = i
			b.Upper = append(b.Upper, k*mult)
		}
	default:
		b.index = make([]int, h.BucketMax+1)
		for slot := 0; slot <= h.BucketMax; slot++ {
			i := slot - h.BucketMin
			if i < 0 {
				i = 0 // below bucket_min: counts in the first bucket
			}
			b.index[slot] = i
		}
		for k := h.BucketMin; k <= h.BucketMax; k++ {
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
// only (an unknown slot), -2 for the sum slot.
func (b *Buckets) Slot(slot uint64) int {
	if b.SumSlot >= 0 && slot == uint64(b.SumSlot) {
		return -2
	}
	if slot < uint64(len(b.index)) {
		return b.index[slot]
	}
	return -1
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

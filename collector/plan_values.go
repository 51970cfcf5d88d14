// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"fmt"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"

	"github.com/kernel-exporter/kernel_exporter/config"
	"github.com/kernel-exporter/kernel_exporter/decoder"
)

// ValueField is the integer a metric reads from each map value (from each
// CPU's value, in a per-CPU map): bytes [Off, Off+Size) of the value, in
// host byte order, Size 1, 2, 4 or 8, sign-extended when Signed. A map
// value that is one integer is ValueField{0, value size, signed}; a field
// of a struct value has the offset, size and signedness its BTF gives.
type ValueField struct {
	Field  string // the struct member's name; "" for the whole value
	Off    int
	Size   int
	Signed bool
}

// read returns the field of one value, sign-extended to 64 bits when
// Signed. b holds at least Off+Size bytes (Compile checks that the field
// lies inside the map's value).
func (v ValueField) read(b []byte) uint64 {
	b = b[v.Off : v.Off+v.Size]
	switch v.Size {
	case 1:
		if v.Signed {
			return uint64(int64(int8(b[0])))
		}
		return uint64(b[0])
	case 2:
		x := nativeEndian.Uint16(b)
		if v.Signed {
			return uint64(int64(int16(x)))
		}
		return uint64(x)
	case 4:
		x := nativeEndian.Uint32(b)
		if v.Signed {
			return uint64(int64(int32(x)))
		}
		return uint64(x)
	}
	return nativeEndian.Uint64(b)
}

// compileValues sets what mp reads from its map's values and returns the
// plans of its metrics: mp itself for a value that is one integer, or one
// plan per entry of values for a struct value (the plans share mp's map,
// key layout and labels; the collector reads the map once for all of
// them). With per_cpu: label (on a per-CPU map only) the plans get a
// leading "cpu" label (see addCPULabel). help is the metric's help, the
// default of its values'.
//
// Errors are *config.Error values at path (as "metrics.gauges[0]") naming
// the metric, the map and, for a struct value, the field.
func (p *Plan) compileValues(path string, mp *MetricPlan, kind Kind, values []config.Value, signed bool, perCPU config.PerCPU, help string, env *decoder.Env) ([]*MetricPlan, error) {
	cfg := p.Config
	ms := p.spec.Maps[mp.MapName]
	mp.Kind = kind
	if perCPU == config.PerCPULabel {
		if !mp.PerCPU {
			return nil, cfg.Errorf(path+".per_cpu", "metric %s: per_cpu: label needs a per-CPU map, but map %s is a %s map", config.Quote(mp.MapName), config.Quote(mp.MapName), mapTypeName(ms.Type))
		}
		if err := p.addCPULabel(path, mp, env); err != nil {
			return nil, err
		}
	}
	if mp.TTL > 0 && (len(values) > 0 || mp.CPULabel) {
		return nil, cfg.Errorf(path+".ttl", "metric %s: ttl is not supported with values or per_cpu: label", config.Quote(mp.MapName))
	}
	if mp.ValueSlots > 0 {
		mp.Value = ValueField{Size: 8} // slot 0; percpu.go reads the others
		return []*MetricPlan{mp}, nil
	}
	if len(values) == 0 {
		switch ms.ValueSize {
		case 1, 2, 4, 8:
		default:
			return nil, cfg.Errorf(path+".name", "map %s has %d-byte values, want an integer of 1, 2, 4 or 8 bytes (or a struct, with values:)", config.Quote(mp.MapName), ms.ValueSize)
		}
		mp.Value = ValueField{Size: int(ms.ValueSize), Signed: signed}
		return []*MetricPlan{mp}, nil
	}
	st, err := valueStruct(ms)
	if err != nil {
		return nil, cfg.Errorf(path+".values", "metric %s: map %s: %s", config.Quote(mp.MapName), config.Quote(mp.MapName), err)
	}
	plans := make([]*MetricPlan, 0, len(values))
	for i, v := range values {
		vp := fmt.Sprintf("%s.values[%d]", path, i)
		f, err := structField(st, v.Field, int(ms.ValueSize))
		if err != nil {
			return nil, cfg.Errorf(vp+".field", "metric %s: map %s: field %s: %s", config.Quote(v.Name), config.Quote(mp.MapName), config.Quote(v.Field), err)
		}
		vm := *mp
		vm.Name = cfg.MetricName(v.Name)
		vm.Help = v.Help
		if vm.Help == "" {
			vm.Help = help
		}
		vm.Value = f
		plans = append(plans, &vm)
	}
	return plans, nil
}

// valueStruct returns the struct of a map's value in the object's BTF.
func valueStruct(ms *ebpf.MapSpec) (*btf.Struct, error) {
	if ms.Value == nil {
		return nil, fmt.Errorf("the object has no BTF for its value (declare the map with __type(value, struct ...))")
	}
	st, ok := btf.As[*btf.Struct](ms.Value)
	if !ok {
		return nil, fmt.Errorf("its value is not a struct in the object's BTF")
	}
	return st, nil
}

// structField finds the member name of st (in anonymous members too) and
// checks that it is an integer or enum of 1, 2, 4 or 8 bytes, byte
// aligned, inside a value of valueSize bytes.
func structField(st *btf.Struct, name string, valueSize int) (ValueField, error) {
	m, off, ok := findMember(st.Members, name, 0, 0)
	if !ok {
		return ValueField{}, fmt.Errorf("not a field of the value struct (fields: %s)", memberNames(st.Members))
	}
	if m.BitfieldSize != 0 {
		return ValueField{}, fmt.Errorf("a bit field, want an integer of 1, 2, 4 or 8 bytes")
	}
	if off%8 != 0 {
		return ValueField{}, fmt.Errorf("not byte aligned")
	}
	f := ValueField{Field: name, Off: int(off / 8)}
	switch t := btf.UnderlyingType(m.Type).(type) {
	case *btf.Int:
		f.Size, f.Signed = int(t.Size), t.Encoding == btf.Signed
	case *btf.Enum:
		f.Size, f.Signed = int(t.Size), t.Signed
	default:
		return ValueField{}, fmt.Errorf("%s, want an integer of 1, 2, 4 or 8 bytes", kindName(t))
	}
	switch f.Size {
	case 1, 2, 4, 8:
	default:
		return ValueField{}, fmt.Errorf("a %d-byte integer, want 1, 2, 4 or 8 bytes", f.Size)
	}
	if f.Off+f.Size > valueSize {
		return ValueField{}, fmt.Errorf("bytes %d to %d are past the end of the %d-byte value", f.Off, f.Off+f.Size, valueSize)
	}
	return f, nil
}

// findMember looks for name among members at bit offset base, and inside
// anonymous struct and union members, at most 8 levels deep.
func findMember(members []btf.Member, name string, base btf.Bits, depth int) (btf.Member, btf.Bits, bool) {
	for _, m := range members {
		if m.Name == name {
			return m, base + m.Offset, true
		}
	}
	if depth >= 8 {
		return btf.Member{}, 0, false
	}
	for _, m := range members {
		if m.Name != "" {
			continue
		}
		var inner []btf.Member
		switch t := btf.UnderlyingType(m.Type).(type) {
		case *btf.Struct:
			inner = t.Members
		case *btf.Union:
			inner = t.Members
		}
		if f, off, ok := findMember(inner, name, base+m.Offset, depth+1); ok {
			return f, off, true
		}
	}
	return btf.Member{}, 0, false
}

// memberNames lists the named members for an error, as config.Quote shows
// them, at most 16.
func memberNames(members []btf.Member) string {
	var names []string
	for _, m := range members {
		if m.Name == "" {
			continue
		}
		if len(names) == 16 {
			names = append(names, "...")
			break
		}
		names = append(names, strings.Trim(config.Quote(m.Name), `"`))
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// kindName names a BTF type's kind for an error, with its article.
func kindName(t btf.Type) string {
	switch t.(type) {
	case *btf.Pointer:
		return "a pointer"
	case *btf.Array:
		return "an array"
	case *btf.Struct:
		return "a struct"
	case *btf.Union:
		return "a union"
	case *btf.Float:
		return "a floating-point number"
	}
	return "not an integer"
}

// addCPULabel makes mp read a per-CPU map one CPU at a time: the collector
// reads each CPU's value under a key made of the CPU number (u32, host
// byte order) then the map key, so the plan gets a leading "cpu" label
// (uint decoder) at bytes [0, 4) and every other offset, KeySize and
// BucketOff move 4 bytes on.
func (p *Plan) addCPULabel(path string, mp *MetricPlan, env *decoder.Env) error {
	for _, l := range mp.Labels {
		if l.Name == config.CPULabel {
			// Validation refuses a listed one; this is one from the key's BTF.
			return p.Config.Errorf(path+".per_cpu", "metric %s: the key already has a label %q, which per_cpu: label would add", config.Quote(mp.MapName), config.CPULabel)
		}
	}
	chain, err := env.NewChain([]config.Decoder{{Name: "uint"}}, cpuKeySize, p.stackReader)
	if err != nil {
		return p.Config.Errorf(path+".per_cpu", "%s", config.Sanitize(err.Error()))
	}
	labels := make([]LabelPlan, 0, len(mp.Labels)+1)
	labels = append(labels, LabelPlan{Name: config.CPULabel, Off: 0, Size: cpuKeySize, Chain: chain})
	for _, l := range mp.Labels {
		l.Off += cpuKeySize
		labels = append(labels, l)
	}
	mp.Labels = labels
	mp.KeySize += cpuKeySize
	if mp.Histogram {
		mp.BucketOff += cpuKeySize
	}
	mp.CPULabel = true
	return nil
}

// cpuKeySize is the size of the CPU number before the map key with
// per_cpu: label.
const cpuKeySize = 4

// compileGauges adds the plans of the config's gauges.
func (p *Plan) compileGauges(env *decoder.Env) error {
	cfg := p.Config
	for i := range cfg.Metrics.Gauges {
		g := &cfg.Metrics.Gauges[i]
		path := fmt.Sprintf("metrics.gauges[%d]", i)
		gLabels, perCPU := p.referenceCPULabel(g.Name, g.Labels, g.PerCPU)
		labels, inferred, err := p.resolveLabels(path, g.Name, gLabels, false)
		if err != nil {
			return err
		}
		mp, err := p.compileMetric(path, g.Name, g.Help, labels, env, len(labels) > 0)
		if err != nil {
			return err
		}
		mp.Inferred = inferred
		mp.MaxSeries = g.MaxSeries
		if mp.TTL, err = p.compileTTL(path, g.Name, g.TTL); err != nil {
			return err
		}
		mps, err := p.compileValues(path, mp, KindGauge, g.Values, g.Signed, perCPU, g.Help, env)
		if err != nil {
			return err
		}
		p.Metrics = append(p.Metrics, mps...)
	}
	return nil
}

// referenceCPULabel recognizes cloudflare/ebpf_exporter's way of asking
// for per-CPU series: a counter or gauge on a per-CPU map that sets no
// per_cpu and whose last label, named "cpu" and decoded by uint alone,
// lies just past the map's key (the reference appends the CPU number to the
// key). It returns the labels without that one and per_cpu: label, which
// exports the same series; otherwise labels and perCPU unchanged. A last
// label "cpu" inside the key is a field of the key, read as such; a "cpu"
// label alone is the reference's per-CPU counter without labels.
func (p *Plan) referenceCPULabel(mapName string, labels []config.Label, perCPU config.PerCPU) ([]config.Label, config.PerCPU) {
	n := len(labels)
	if perCPU != "" || n == 0 {
		return labels, perCPU
	}
	last := labels[n-1]
	if last.Name != config.CPULabel || last.Padding != 0 || len(last.Decoders) != 1 || last.Decoders[0].Name != "uint" {
		return labels, perCPU
	}
	ms, ok := p.spec.Maps[mapName]
	// A cpu label alone: the reference reads such a map's one key (a u32
	// 0) as no labels.
	if !ok || ms == nil || !isPerCPU(ms.Type) || (n > 1 && config.KeySize(labels[:n-1]) != int(ms.KeySize)) {
		return labels, perCPU
	}
	return labels[:n-1], config.PerCPULabel
}

// SPDX-License-Identifier: Apache-2.0

package config

// Labels inferred from BTF.
//
// A metric that gives no labels, or only label overrides (entries with a
// name and decoders, no size and no padding), takes its key layout from the
// BTF type of its map's key, as the object declares it with
// __type(key, struct ...) in a .maps section:
//
//   - each field of the key struct becomes a label named after the field,
//     in field order, with the field's size; the bytes between a field and
//     the next one (and after the last field) become its padding, so
//     padding never becomes a label;
//   - integer fields (typedefs and qualifiers resolved) of 1, 2, 4 or 8
//     bytes decode with uint; signed integers too, so their bits read as
//     unsigned (-1 in an int prints 4294967295): override them (errno, hex)
//     when negative values matter;
//   - enum fields decode with uint then a static_map built from the enum's
//     value names in BTF, with allow_unknown: a value the enum does not name
//     prints as its number, so no series is dropped;
//   - arrays of 1-byte integers (char comm[16], __u8 name[N]) decode with
//     string;
//   - any other field (a nested struct, a union, a pointer, another array,
//     a bitfield) is a config error naming the field, unless an override
//     gives its decoders: an override takes the field's bytes as they are
//     laid out, whatever their type (an in6_addr with inet_ip).
//
// A histogram's bucket slot is the LAST field of its key struct, whatever
// its name: it becomes the "bucket" label (an integer of 1, 2, 4 or 8
// bytes), as explicit labels end with the bucket. A key that is a plain
// integer is the bucket alone for a histogram; for a counter it gives no
// labels (one series summing every key, as a counter without labels always
// did), and the same holds for a map without BTF.
//
// The result is the label list explicit YAML would give, checked by the
// same validation (names, reserved names, sizes, decoder settings), and
// compiled by the same plan compiler.

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/cilium/ebpf/btf"
	"gopkg.in/yaml.v3"
)

// LabelOverrides reports whether labels is a list of decoder overrides for
// labels inferred from BTF: not empty, and no entry sets a size or a
// padding. Each entry names a key field and gives its decoders.
func LabelOverrides(labels []Label) bool {
	if len(labels) == 0 {
		return false
	}
	for _, l := range labels {
		if l.Size != 0 || l.Padding != 0 {
			return false
		}
	}
	return true
}

// InferLabels reports whether a metric with these labels takes its key
// layout from BTF: no labels, or only overrides (see LabelOverrides).
func InferLabels(labels []Label) bool {
	return len(labels) == 0 || LabelOverrides(labels)
}

// LabelsFromBTF returns the labels of the metric at path (as
// "metrics.counters[0]"), whose map mapName has keys of keySize bytes of
// BTF type key (nil or btf.Void when the object has no BTF for it), with
// overrides (see LabelOverrides) replacing the decoders of the fields they
// name. For a histogram the last label is the bucket.
//
// It returns nil labels for a counter whose key is a plain integer, and
// for a metric whose key has no BTF (a histogram without labels is then
// refused by the plan compiler, as it always was). Errors are *Error values naming the file, the metric, the map and
// the field, as in
//
//	x.yaml:4: metrics.counters[0]: metric "calls_total", map "calls_total": key field "addr" (struct "in6_addr"): nested struct: set its decoders with a labels entry {name: addr, decoders: [...]}, or write every label with its size
//
// Every number from the BTF is range-checked: at most MaxLabels fields,
// offsets in whole bytes, ascending and inside the key, at most MaxKeySize
// bytes, enum tables of at most MaxStaticMap entries, and at most
// MaxStaticMapTotal entries over all the config's inferred labels (an enum
// shared by several keys counts once per key).
func (c *Config) LabelsFromBTF(path, metric, mapName string, key btf.Type, keySize int, overrides []Label, histogram bool) ([]Label, error) {
	fail := func(format string, args ...any) error {
		return c.Errorf(path, "metric %s, map %s: %s", Quote(metric), Quote(mapName), fmt.Sprintf(format, args...))
	}
	over := map[string]int{}
	for i, l := range overrides {
		over[l.Name] = i
	}
	used := make([]bool, len(overrides))
	if key != nil {
		key = btf.UnderlyingType(key)
	}
	var labels []Label
	switch t := key.(type) {
	case nil, *btf.Void:
		if len(overrides) > 0 {
			return nil, fail("label overrides, but the map key has no BTF type to infer labels from: write every label with its size")
		}
		return nil, nil
	case *btf.Int, *btf.Enum:
		size := int(typeSize(t))
		if !histogram {
			if len(overrides) > 0 {
				return nil, fail("label overrides, but the map key is a plain %d-byte integer, not a struct with named fields: write the labels with their sizes", size)
			}
			return nil, nil
		}
		if len(overrides) > 0 {
			return nil, fail("label overrides, but the map key is a plain integer, the bucket slot alone: there is no field to override")
		}
		if size != keySize {
			return nil, fail("the BTF key type is %d bytes, but the map has %d-byte keys", size, keySize)
		}
		labels = []Label{{Name: BucketLabel, Size: size}}
	case *btf.Struct:
		var err error
		if labels, err = c.structLabels(t, keySize, overrides, over, used, histogram, fail); err != nil {
			return nil, err
		}
	default:
		return nil, fail("the map key is of BTF kind %s, not a struct or an integer: write the labels with their sizes", kindName(t))
	}
	for i, u := range used {
		if !u {
			return nil, c.Errorf(fmt.Sprintf("%s.labels[%d].name", path, i), "metric %s, map %s: the key has no field %s to set decoders for", Quote(metric), Quote(mapName), Quote(overrides[i].Name))
		}
	}
	// One budget for all the inferred labels of the config: an enum
	// shared by every map's key is counted for each of them, so that an
	// object cannot make each of MaxMetrics metrics build MaxStaticMap
	// entries.
	if c.btfBudget == nil {
		c.btfBudget = &decoderBudget{regexps: MaxRegexpsTotal, regexpCost: MaxRegexpCostTotal, staticMap: MaxStaticMapTotal}
	}
	if err := c.validateLabels(path, labels, histogram, false, c.btfBudget); err != nil {
		var e *Error
		if errors.As(err, &e) {
			return nil, fail("labels inferred from the BTF key: %s (at %s)", e.Msg, e.Path)
		}
		return nil, err
	}
	return labels, nil
}

// structLabels lays out the fields of a key struct as labels.
func (c *Config) structLabels(t *btf.Struct, keySize int, overrides []Label, over map[string]int, used []bool, histogram bool, fail func(string, ...any) error) ([]Label, error) {
	name := typeName(t)
	if len(t.Members) == 0 {
		return nil, fail("the key, %s, has no fields", name)
	}
	if len(t.Members) > MaxLabels {
		return nil, fail("the key, %s, has %d fields, more than the limit of %d labels", name, len(t.Members), MaxLabels)
	}
	if int64(t.Size) != int64(keySize) {
		return nil, fail("the BTF key type, %s, is %d bytes, but the map has %d-byte keys", name, t.Size, keySize)
	}
	labels := make([]Label, 0, len(t.Members))
	end := 0 // end of the previous field, in bytes
	for i, m := range t.Members {
		field := func(format string, args ...any) error {
			return fail("key field %s (%s): %s", Quote(m.Name), typeName(m.Type), fmt.Sprintf(format, args...))
		}
		if m.Name == "" {
			return nil, fail("key field %d of %s has no name (an anonymous struct or union): name it", i, name)
		}
		if m.BitfieldSize != 0 {
			return nil, field("a bitfield: labels take whole bytes; make it a whole integer field")
		}
		if m.Offset%8 != 0 {
			return nil, field("not at a whole byte offset")
		}
		off := int64(m.Offset / 8)
		size, err := btf.Sizeof(m.Type)
		if err != nil || size <= 0 || size > MaxLabelSize {
			return nil, field("size unknown or not 1 to %d bytes", MaxLabelSize)
		}
		if off < int64(end) || off+int64(size) > int64(keySize) {
			return nil, field("bytes %d to %d overlap the previous field or pass the end of the %d-byte key", off, off+int64(size), keySize)
		}
		if off > int64(end) {
			if len(labels) == 0 {
				return nil, field("starts at byte %d: key bytes before the first field", off)
			}
			labels[len(labels)-1].Padding = int(off) - end
		}
		end = int(off) + size
		l := Label{Name: m.Name, Size: size}
		last := i == len(t.Members)-1
		if histogram && last {
			if _, ok := over[m.Name]; ok {
				return nil, field("is the bucket slot (the last field of a histogram's key), which takes no decoders")
			}
			if it, ok := btf.UnderlyingType(m.Type).(*btf.Int); !ok || !intSize(int(it.Size)) {
				return nil, field("the last field of a histogram's key is its bucket slot and must be an integer of 1, 2, 4 or 8 bytes")
			}
			l.Name = BucketLabel
		} else if j, ok := over[m.Name]; ok {
			used[j] = true
			l.Decoders = overrides[j].Decoders
		} else if l.Decoders, err = fieldDecoders(m.Type); err != nil {
			return nil, field("%v: set its decoders with a labels entry {name: %s, decoders: [...]}, or write every label with its size", err, m.Name)
		}
		labels = append(labels, l)
	}
	if end < keySize {
		labels[len(labels)-1].Padding += keySize - end
	}
	return labels, nil
}

// fieldDecoders infers the decoders of a field from its BTF type.
func fieldDecoders(t btf.Type) ([]Decoder, error) {
	switch u := btf.UnderlyingType(t).(type) {
	case *btf.Int:
		if !intSize(int(u.Size)) {
			return nil, fmt.Errorf("a %d-byte integer (uint takes 1, 2, 4 or 8)", u.Size)
		}
		return []Decoder{{Name: "uint"}}, nil
	case *btf.Enum:
		if !intSize(int(u.Size)) {
			return nil, fmt.Errorf("a %d-byte enum (uint takes 1, 2, 4 or 8)", u.Size)
		}
		if len(u.Values) == 0 {
			return []Decoder{{Name: "uint"}}, nil
		}
		if len(u.Values) > MaxStaticMap {
			return nil, fmt.Errorf("an enum of %d values, more than the limit of %d", len(u.Values), MaxStaticMap)
		}
		mask := ^uint64(0)
		if u.Size < 8 {
			mask = 1<<(8*u.Size) - 1
		}
		m := make(map[string]string, len(u.Values))
		for _, v := range u.Values {
			k := strconv.FormatUint(v.Value&mask, 10)
			if _, dup := m[k]; !dup && v.Name != "" {
				m[k] = v.Name // the first name of a value wins
			}
		}
		return []Decoder{{Name: "uint"}, {Name: "static_map", StaticMap: m, AllowUnknown: true}}, nil
	case *btf.Array:
		if e, ok := btf.UnderlyingType(u.Type).(*btf.Int); ok && e.Size == 1 {
			return []Decoder{{Name: "string"}}, nil
		}
		return nil, errors.New("an array whose elements are not chars")
	case *btf.Struct:
		return nil, errors.New("nested struct")
	case *btf.Union:
		return nil, errors.New("a union")
	case *btf.Pointer:
		return nil, errors.New("a pointer")
	default:
		return nil, fmt.Errorf("a %s", kindName(u))
	}
}

// sizeGiven reports whether one of the first n labels of the metric at
// path writes a size or a padding key in the YAML (size: 0 is a bad
// size, not an override). Always false for a config built in code.
func (c *Config) sizeGiven(path string, n int) bool {
	if c.root == nil || len(c.root.Content) == 0 {
		return false
	}
	node := resolve(c.root.Content[0])
	for _, part := range splitPath(path + ".labels") {
		if node = child(node, part); node == nil {
			return false
		}
		node = resolve(node)
	}
	if node.Kind != yaml.SequenceNode {
		return false
	}
	for i := 0; i < n && i < len(node.Content); i++ {
		l := resolve(node.Content[i])
		if l.Kind != yaml.MappingNode {
			continue
		}
		for j := 0; j+1 < len(l.Content); j += 2 {
			if k := l.Content[j].Value; k == "size" || k == "padding" {
				return true
			}
		}
	}
	return false
}

func intSize(n int) bool { return n == 1 || n == 2 || n == 4 || n == 8 }

func typeSize(t btf.Type) uint32 {
	switch u := t.(type) {
	case *btf.Int:
		return u.Size
	case *btf.Enum:
		return u.Size
	}
	return 0
}

// typeName names a BTF type for an error, its names as Quote shows them:
// struct "in6_addr", "__u32", "char"[16].
func typeName(t btf.Type) string {
	n := Quote(t.TypeName())
	switch u := btf.UnderlyingType(t).(type) {
	case *btf.Struct:
		if t.TypeName() == "" {
			return "anonymous struct"
		}
		return "struct " + n
	case *btf.Union:
		if t.TypeName() == "" {
			return "anonymous union"
		}
		return "union " + n
	case *btf.Enum:
		if t.TypeName() == "" {
			return "anonymous enum"
		}
		return "enum " + n
	case *btf.Array:
		return typeName(u.Type) + "[" + strconv.FormatUint(uint64(u.Nelems), 10) + "]"
	case *btf.Pointer:
		return typeName(u.Target) + " *"
	}
	if t.TypeName() == "" {
		return kindName(t)
	}
	return n
}

// kindName names the kind of a BTF type.
func kindName(t btf.Type) string {
	switch t.(type) {
	case *btf.Struct:
		return "struct"
	case *btf.Union:
		return "union"
	case *btf.Enum:
		return "enum"
	case *btf.Int:
		return "integer"
	case *btf.Array:
		return "array"
	case *btf.Pointer:
		return "pointer"
	case *btf.Func, *btf.FuncProto:
		return "function"
	case *btf.Fwd:
		return "forward declaration"
	}
	return "BTF type"
}

// SPDX-License-Identifier: Apache-2.0

package config

// Explicit labels checked against the key's BTF.
//
// A metric that lists its labels with their sizes lays the key out itself.
// When the object declares the map's key type in BTF (a struct, or a plain
// integer), CheckKeyLabels holds that layout to the type's:
//
//   - each label with bytes of its own must line up with a field: its
//     bytes are exactly those of a member of the key struct, or of a
//     member of a nested struct or union, or of an array element (a
//     label may skip fields with its padding, but not start or end
//     inside one, nor span two); a label may also be a field then
//     padding bytes (a 1-byte class read as 2 bytes with the padding
//     byte after it, as in cloudflare/ebpf_exporter's pci example);
//   - a label named like a field of the key (at any depth) must be that
//     field;
//   - the first decoder of a label must read the field as its type
//     holds it: string and dname (a C string) are refused over an
//     integer of 2 bytes or more, an enum or a pointer, and the integer
//     decoders (uint, errno, signal, syscall, ksym, ifname, majorminor,
//     kstack, pci_*) over an array of 1-byte integers (a char array).
//
// A key without BTF, or of another kind, is not checked. The sizes still
// have to add up to the key's (the plan compiler checks that with or
// without BTF).

import (
	"fmt"
	"strings"

	"github.com/cilium/ebpf/btf"
)

// LabelSpan is the key bytes [Off, Off+Size) of the label at Index of a
// label list, then Padding bytes it skips.
type LabelSpan struct {
	Index              int
	Name               string
	Off, Size, Padding int
}

// LabelSpans lays labels out from byte 0, skipping those that share an
// earlier label's bytes (Of). ok is false when a size or padding is out of
// range (size 1 to MaxLabelSize, padding 0 to MaxPadding) or the labels
// pass MaxKeySize: the caller's own checks report those.
func LabelSpans(labels []Label) (spans []LabelSpan, end int, ok bool) {
	for i, l := range labels {
		if l.Of != "" {
			continue
		}
		if l.Size <= 0 || l.Size > MaxLabelSize || l.Padding < 0 || l.Padding > MaxPadding {
			return nil, 0, false
		}
		spans = append(spans, LabelSpan{Index: i, Name: l.Name, Off: end, Size: l.Size, Padding: l.Padding})
		if end += l.Size + l.Padding; end > MaxKeySize {
			return nil, 0, false
		}
	}
	return spans, end, true
}

// FormatSpans describes label spans for an error, as
// `"sig" 0-4, "comm" 4-20`, a padding as `+4 padding`, at most 16 of
// them (MaxListed).
func FormatSpans(spans []LabelSpan) string {
	return JoinListed(len(spans), func(b *strings.Builder, i int) {
		s := spans[i]
		fmt.Fprintf(b, "%s %d-%d", Quote(s.Name), s.Off, s.Off+s.Size)
		if s.Padding > 0 {
			fmt.Fprintf(b, " +%d padding", s.Padding)
		}
	})
}

// keyField is a field of a key type: the key bytes [off, off+size).
type keyField struct {
	name      string // "" for an array element or a key that is an integer
	off, size int
	typ       btf.Type
}

func (f keyField) String() string {
	if f.name == "" {
		return fmt.Sprintf("bytes %d to %d (%s)", f.off, f.off+f.size, typeName(f.typ))
	}
	return fmt.Sprintf("key field %s (bytes %d to %d, %s)", Quote(f.name), f.off, f.off+f.size, typeName(f.typ))
}

// maxFieldDepth bounds how deep the checks look into nested types.
const maxFieldDepth = 8

// members returns the fields directly inside field f: a struct's or
// union's members (bitfields and members of unknown size left out), or an
// array's elements. At most MaxKeySize of them.
func members(f keyField) []keyField {
	var out []keyField
	switch t := btf.UnderlyingType(f.typ).(type) {
	case *btf.Struct:
		out = appendMembers(out, f.off, t.Members)
	case *btf.Union:
		out = appendMembers(out, f.off, t.Members)
	case *btf.Array:
		size, err := btf.Sizeof(t.Type)
		if err != nil || size <= 0 {
			return nil
		}
		for i := 0; i < int(t.Nelems) && i < MaxKeySize; i++ {
			out = append(out, keyField{off: f.off + i*size, size: size, typ: t.Type})
		}
	}
	return out
}

func appendMembers(out []keyField, base int, ms []btf.Member) []keyField {
	for i, m := range ms {
		if i == MaxKeySize {
			break
		}
		size, err := btf.Sizeof(m.Type)
		if m.BitfieldSize != 0 || m.Offset%8 != 0 || err != nil || size <= 0 || size > MaxKeySize {
			continue
		}
		out = append(out, keyField{name: m.Name, off: base + int(m.Offset/8), size: size, typ: m.Type})
	}
	return out
}

// maxFieldVisits bounds the fields one lookup visits: unions of unions
// repeat the same types at every level.
const maxFieldVisits = 4096

// lineUp returns the field, at any depth in f, whose bytes are exactly
// [off, off+size): f itself, or one inside a member that holds them all.
// budget counts down the fields visited (maxFieldVisits).
func lineUp(f keyField, off, size, depth int, budget *int) (keyField, bool) {
	if f.off == off && f.size == size {
		return f, true
	}
	if *budget--; *budget <= 0 || depth == maxFieldDepth || off < f.off || off+size > f.off+f.size {
		return keyField{}, false
	}
	for _, m := range members(f) {
		if m.off <= off && off+size <= m.off+m.size {
			if g, ok := lineUp(m, off, size, depth+1, budget); ok {
				return g, true
			}
		}
	}
	return keyField{}, false
}

// named returns the fields named name at any depth in f (array elements
// have no names and are not looked into), at most 16. budget counts down
// the fields visited.
func named(f keyField, name string, depth int, out []keyField, budget *int) []keyField {
	if *budget--; *budget <= 0 || depth == maxFieldDepth {
		return out
	}
	switch btf.UnderlyingType(f.typ).(type) {
	case *btf.Struct, *btf.Union:
	default:
		return out
	}
	for _, m := range members(f) {
		if len(out) == 16 {
			break
		}
		if m.name == name {
			out = append(out, m)
		}
		out = named(m, name, depth+1, out, budget)
	}
	return out
}

// textDecoders read a field's bytes as a C string; intDecoders as an
// integer.
var (
	textDecoders = map[string]bool{"string": true, "dname": true}
	intDecoders  = map[string]bool{
		"uint": true, "errno": true, "signal": true, "syscall": true, "ksym": true,
		"ifname": true, "majorminor": true, "kstack": true,
		"pci_vendor": true, "pci_device": true, "pci_class": true, "pci_subclass": true,
	}
)

// decoderMismatch says why the decoder named d cannot read field f, or "".
func decoderMismatch(d string, f keyField) string {
	switch t := btf.UnderlyingType(f.typ).(type) {
	case *btf.Int:
		if textDecoders[d] && t.Size > 1 {
			return fmt.Sprintf("an integer, but its decoder %s reads a C string: use uint or another integer decoder", Quote(d))
		}
	case *btf.Enum:
		if textDecoders[d] {
			return fmt.Sprintf("an enum, but its decoder %s reads a C string: use uint (then static_map for names)", Quote(d))
		}
	case *btf.Pointer:
		if textDecoders[d] {
			return fmt.Sprintf("a pointer, but its decoder %s reads a C string: the string is not in the key", Quote(d))
		}
	case *btf.Array:
		if e, ok := btf.UnderlyingType(t.Type).(*btf.Int); ok && e.Size == 1 && intDecoders[d] {
			return fmt.Sprintf("a char array, but its decoder %s reads an integer: use string", Quote(d))
		}
	}
	return ""
}

// CheckKeyLabels checks the explicit labels of the metric at path (as
// "metrics.counters[0]"), whose map mapName has keys of keySize bytes of
// BTF type key, against that type (see the rules above). For a histogram
// the last label is the bucket, which takes no decoders. It returns nil
// when key is nil, btf.Void or not a struct or an integer of keySize
// bytes, or when a size or padding is out of range (see LabelSpans).
//
// The error, an *Error at the first label that breaks a rule, names the
// label, the key field it lands on, and gives both layouts and their
// sums, as in
//
//	x.yaml:6: metrics.counters[0].labels[0]: label "comm" is bytes 0 to 16 of the key, but key field "comm" is bytes 4 to 20 ("char"[16]); it lands on key field "sig" (bytes 0 to 4, "__u32") and part of key field "comm" (bytes 4 to 20, "char"[16]) (labels: "comm" 0-16, "signal" 16-20, 20 bytes; map "signals_total" key struct "sig_key": "sig" 0-4, "comm" 4-20, 20 bytes)
func (c *Config) CheckKeyLabels(path, mapName string, key btf.Type, keySize int, labels []Label, histogram bool) error {
	if key == nil {
		return nil
	}
	root := keyField{size: keySize, typ: key}
	var top []keyField
	switch t := btf.UnderlyingType(key).(type) {
	case *btf.Struct:
		if int64(t.Size) != int64(keySize) {
			return nil // LabelsFromBTF's concern; explicit labels go by the map
		}
		top = members(root)
	case *btf.Int, *btf.Enum:
		if int(typeSize(t)) != keySize {
			return nil
		}
		top = []keyField{root}
	default:
		return nil
	}
	spans, end, ok := LabelSpans(labels)
	if !ok || len(top) == 1 && top[0].name == "" && end != keySize {
		// A key that is one integer is one field: labels that do not
		// add up to it are the plan compiler's sum error, which says as
		// much.
		return nil
	}
	layout := func() string {
		keyDesc := typeName(key)
		fields := make([]LabelSpan, len(top))
		for i, f := range top {
			fields[i] = LabelSpan{Name: f.name, Off: f.off, Size: f.size}
		}
		if len(top) == 1 && top[0].name == "" {
			return fmt.Sprintf("labels: %s, %d bytes; map %s key %s, %d bytes", FormatSpans(spans), end, Quote(mapName), keyDesc, keySize)
		}
		return fmt.Sprintf("labels: %s, %d bytes; map %s key %s: %s, %d bytes", FormatSpans(spans), end, Quote(mapName), keyDesc, FormatSpans(fields), keySize)
	}
	for k, s := range spans {
		l := labels[s.Index]
		lp := fmt.Sprintf("%s.labels[%d]", path, s.Index)
		fail := func(format string, args ...any) error {
			return c.Errorf(lp, "label %s is bytes %d to %d of the key, %s (%s)", Quote(l.Name), s.Off, s.Off+s.Size, fmt.Sprintf(format, args...), layout())
		}
		f, lined := keyField{}, false
		budget := maxFieldVisits
		for _, t := range top {
			if f, lined = lineUp(t, s.Off, s.Size, 0, &budget); lined {
				break
			}
		}
		if !lined {
			f, lined = withPadding(top, s)
		}
		budget = maxFieldVisits
		if same := named(root, l.Name, 0, nil, &budget); len(same) > 0 && !(lined && f.name == l.Name) && !spanOf(same, s) {
			return fail("but %s is %s; it lands on %s", sameName(same[0]), spanText(same[0]), landsOn(top, s))
		}
		if !lined {
			return fail("which do not line up with a field of the key: it lands on %s", landsOn(top, s))
		}
		bucket := histogram && k == len(spans)-1
		if len(l.Decoders) > 0 && !bucket {
			if why := decoderMismatch(l.Decoders[0].Name, f); why != "" {
				return fail("%s, %s", f, why)
			}
		}
	}
	return nil
}

// withPadding returns the field of top that s starts with when s is that
// field then only padding (bytes of no field), as a 1-byte class read
// with the padding byte after it as 2 bytes: the program zeroes a key's
// padding, so an integer decoder reads the field's value.
func withPadding(top []keyField, s LabelSpan) (keyField, bool) {
	for i, f := range top {
		if f.off != s.Off || f.size >= s.Size {
			continue
		}
		for _, g := range top[i+1:] {
			if g.off < s.Off+s.Size && f.off+f.size < g.off+g.size {
				return keyField{}, false
			}
		}
		return f, true
	}
	return keyField{}, false
}

// spanOf reports whether one of fields has the bytes of s.
func spanOf(fields []keyField, s LabelSpan) bool {
	for _, f := range fields {
		if f.off == s.Off && f.size == s.Size {
			return true
		}
	}
	return false
}

func sameName(f keyField) string { return "key field " + Quote(f.name) }

func spanText(f keyField) string {
	return fmt.Sprintf("bytes %d to %d (%s)", f.off, f.off+f.size, typeName(f.typ))
}

// landsOn describes the key fields that bytes of s overlap (at most 4),
// and the padding bytes it covers.
func landsOn(top []keyField, s LabelSpan) string {
	var parts []string
	n := 0
	for _, f := range top {
		if f.off < s.Off+s.Size && s.Off < f.off+f.size {
			if n < 4 {
				what := f.String()
				if s.Off > f.off || s.Off+s.Size < f.off+f.size {
					what = "part of " + what
				}
				parts = append(parts, what)
			}
			n++
		}
	}
	if n > 4 {
		parts = append(parts, fmt.Sprintf("%d more fields", n-4))
	}
	if pad := s.Size - covered(top, s); pad > 0 {
		parts = append(parts, fmt.Sprintf("%d bytes of padding", pad))
	}
	return strings.Join(parts, " and ")
}

// covered counts the bytes of s inside fields of top.
func covered(top []keyField, s LabelSpan) int {
	n := 0
	for b := s.Off; b < s.Off+s.Size; b++ {
		for _, f := range top {
			if f.off <= b && b < f.off+f.size {
				n++
				break
			}
		}
	}
	return n
}

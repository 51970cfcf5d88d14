// SPDX-License-Identifier: Apache-2.0

package usdt

import (
	"debug/elf"
	"errors"
	"fmt"
	"math/bits"

	"github.com/cilium/ebpf/btf"
)

// Programs built with libbpf's <bpf/usdt.bpf.h> (the header of ebpf_exporter's
// usdt example) read their arguments from two maps the header declares:
//
//	__bpf_usdt_specs          ARRAY, key int spec id, value struct __bpf_usdt_spec
//	__bpf_usdt_ip_to_spec_id  HASH, key long probe address, value __u32 spec id
//	                          (read only when the kernel lacks BPF cookies)
//
// The spec id is the attachment's BPF cookie. struct __bpf_usdt_spec is
//
//	struct __bpf_usdt_arg_spec args[12];
//	__u64 usdt_cookie;   // bpf_usdt_cookie(): 0 for SEC("usdt/...") programs
//	short arg_cnt;
//
// and each struct __bpf_usdt_arg_spec has
//
//	__u64 val_off;        // the constant, or the displacement of a memory operand
//	enum __bpf_usdt_arg_type arg_type;
//	                      // BPF_USDT_ARG_CONST, _REG, _REG_DEREF, (libbpf 1.7+) _SIB
//	short reg_off;        // offsetof(struct pt_regs, <register>)
//	bool arg_signed;
//	char arg_bitshift;    // 64 - 8*size: the bits a 1-, 2- or 4-byte value clears
//
// libbpf 1.7 made arg_type an 8-bit bitfield and put two bitfields in the
// padding after it, for x86 scale-index-base operands ("8@-8(%rbp,%rax,8)"):
// idx_reg_off (12 bits, the index register's pt_regs offset) and
// scale_bitshift (4 bits, log2 of the scale). The object's BTF says which
// layout it was built with; LibbpfLayout reads it from there.

// Names of libbpf's USDT maps in <bpf/usdt.bpf.h>.
const (
	LibbpfSpecsMap    = "__bpf_usdt_specs"
	LibbpfIPToSpecMap = "__bpf_usdt_ip_to_spec_id"
)

// Bounds of the layouts NewLibbpfLayout accepts.
const (
	// maxLibbpfSpec bounds the size in bytes of struct __bpf_usdt_spec
	// (208 bytes in libbpf 0.8 to 1.7).
	maxLibbpfSpec = 4096
	// maxLibbpfArgs bounds the length of its args array (12 in libbpf).
	maxLibbpfArgs = 64
	// maxLibbpfMembers bounds the members of each struct.
	maxLibbpfMembers = 16
	// maxLibbpfEnum bounds the enumerators of enum __bpf_usdt_arg_type.
	maxLibbpfEnum = 64
)

// bitField is where one member of a libbpf struct lies: a bit offset from
// the start of its struct and a width in bits (1 to 64). The struct is in
// the host's byte order; only little-endian hosts (x86-64, arm64) are
// supported, where bit n is bit n%8 of byte n/8.
type bitField struct {
	off, width uint32
	signed     bool
}

// LibbpfLayout is the layout of libbpf's struct __bpf_usdt_spec in one BPF
// object, read from its BTF by NewLibbpfLayout.
type LibbpfLayout struct {
	// SpecSize is the size in bytes of struct __bpf_usdt_spec (the value
	// size of __bpf_usdt_specs); MaxArgs the length of its args array.
	SpecSize uint32
	MaxArgs  int
	// HasSIB says whether the layout has the scale-index-base fields
	// (libbpf 1.7+).
	HasSIB bool

	argsOff, argSize uint32 // bytes
	cookie, argCnt   bitField

	valOff, argType, regOff, argSigned, argBitshift bitField
	idxRegOff, scaleBitshift                        bitField

	// Values of enum __bpf_usdt_arg_type; typeBad is a value of the field
	// that is none of the enum's, for arguments that cannot be read (the
	// header's bpf_usdt_arg returns -EINVAL for it).
	typeConst, typeReg, typeDeref, typeSIB, typeBad uint64
}

// NewLibbpfLayout reads the layout of struct __bpf_usdt_spec from t, the
// BTF value type of an object's __bpf_usdt_specs map. Struct, array and
// enum are taken only by their member and enumerator names (val_off,
// arg_type, reg_off, arg_signed, arg_bitshift, optional idx_reg_off and
// scale_bitshift, members named __reserved*; args, usdt_cookie, arg_cnt;
// BPF_USDT_ARG_CONST, _REG, _REG_DEREF, optional _SIB), with their offsets
// and widths from the BTF. A member it does not know, a missing one, a
// field that overlaps another or lies outside its struct, or a struct
// larger than 4 KiB is an error naming the struct and member: that layout
// would be written wrongly.
func NewLibbpfLayout(t btf.Type) (*LibbpfLayout, error) {
	spec, ok := btf.UnderlyingType(t).(*btf.Struct)
	if !ok || spec.Name != "__bpf_usdt_spec" {
		return nil, fmt.Errorf("value type of %s is %s, want struct __bpf_usdt_spec", LibbpfSpecsMap, typeName(t))
	}
	if spec.Size == 0 || spec.Size > maxLibbpfSpec {
		return nil, fmt.Errorf("struct __bpf_usdt_spec: size %d bytes, want 1 to %d", spec.Size, maxLibbpfSpec)
	}
	if len(spec.Members) > maxLibbpfMembers {
		return nil, fmt.Errorf("struct __bpf_usdt_spec: %d members, more than %d", len(spec.Members), maxLibbpfMembers)
	}
	l := &LibbpfLayout{SpecSize: spec.Size}
	var argStruct *btf.Struct
	var seen []bitField
	found := map[string]bool{}
	for _, m := range spec.Members {
		if found[m.Name] {
			return nil, fmt.Errorf("struct __bpf_usdt_spec: member %s twice", token(m.Name))
		}
		found[m.Name] = true
		switch m.Name {
		case "args":
			arr, ok := btf.UnderlyingType(m.Type).(*btf.Array)
			if !ok || m.BitfieldSize != 0 || m.Offset%8 != 0 {
				return nil, fmt.Errorf("struct __bpf_usdt_spec: member args is %s, want an array of struct __bpf_usdt_arg_spec", typeName(m.Type))
			}
			st, ok := btf.UnderlyingType(arr.Type).(*btf.Struct)
			if !ok || st.Name != "__bpf_usdt_arg_spec" {
				return nil, fmt.Errorf("struct __bpf_usdt_spec: member args is an array of %s, want struct __bpf_usdt_arg_spec", typeName(arr.Type))
			}
			if arr.Nelems == 0 || arr.Nelems > maxLibbpfArgs || st.Size == 0 {
				return nil, fmt.Errorf("struct __bpf_usdt_spec: member args has %d elements of %d bytes, want 1 to %d non-empty ones", arr.Nelems, st.Size, maxLibbpfArgs)
			}
			l.argsOff, l.argSize, l.MaxArgs, argStruct = uint32(m.Offset/8), st.Size, int(arr.Nelems), st
			seen = append(seen, bitField{off: uint32(m.Offset), width: 8 * st.Size * arr.Nelems})
		case "usdt_cookie", "arg_cnt":
			f, err := intField("__bpf_usdt_spec", m)
			if err != nil {
				return nil, err
			}
			if m.Name == "usdt_cookie" {
				l.cookie = f
			} else {
				l.argCnt = f
			}
			seen = append(seen, f)
		default:
			return nil, fmt.Errorf("struct __bpf_usdt_spec: member %s is not in a layout this version knows (libbpf 0.8 to 1.7)", token(m.Name))
		}
	}
	for _, n := range []string{"args", "usdt_cookie", "arg_cnt"} {
		if !found[n] {
			return nil, fmt.Errorf("struct __bpf_usdt_spec: no member %s", n)
		}
	}
	if err := checkFields("__bpf_usdt_spec", spec.Size, seen); err != nil {
		return nil, err
	}
	if err := l.readArgSpec(argStruct); err != nil {
		return nil, err
	}
	return l, nil
}

// readArgSpec reads struct __bpf_usdt_arg_spec and its enum.
func (l *LibbpfLayout) readArgSpec(st *btf.Struct) error {
	const name = "__bpf_usdt_arg_spec"
	if len(st.Members) > maxLibbpfMembers {
		return fmt.Errorf("struct %s: %d members, more than %d", name, len(st.Members), maxLibbpfMembers)
	}
	var seen []bitField
	var enum *btf.Enum
	found := map[string]bool{}
	for _, m := range st.Members {
		if found[m.Name] {
			return fmt.Errorf("struct %s: member %s twice", name, token(m.Name))
		}
		found[m.Name] = true
		var dst *bitField
		switch m.Name {
		case "val_off":
			dst = &l.valOff
		case "arg_type":
			dst = &l.argType
			e, ok := btf.UnderlyingType(m.Type).(*btf.Enum)
			if !ok {
				return fmt.Errorf("struct %s: member arg_type is %s, want enum __bpf_usdt_arg_type", name, typeName(m.Type))
			}
			enum = e
		case "reg_off":
			dst = &l.regOff
		case "arg_signed":
			dst = &l.argSigned
		case "arg_bitshift":
			dst = &l.argBitshift
		case "idx_reg_off":
			dst = &l.idxRegOff
		case "scale_bitshift":
			dst = &l.scaleBitshift
		default:
			if len(m.Name) >= 10 && m.Name[:10] == "__reserved" {
				continue
			}
			return fmt.Errorf("struct %s: member %s is not in a layout this version knows (libbpf 0.8 to 1.7)", name, token(m.Name))
		}
		f, err := intField(name, m)
		if err != nil {
			return err
		}
		*dst = f
		seen = append(seen, f)
	}
	for _, n := range []string{"val_off", "arg_type", "reg_off", "arg_signed", "arg_bitshift"} {
		if !found[n] {
			return fmt.Errorf("struct %s: no member %s", name, n)
		}
	}
	if found["idx_reg_off"] != found["scale_bitshift"] {
		return fmt.Errorf("struct %s: members idx_reg_off and scale_bitshift come together, this one has only one", name)
	}
	if l.valOff.width != 64 {
		return fmt.Errorf("struct %s: member val_off is %d bits wide, want 64", name, l.valOff.width)
	}
	if err := checkFields(name, st.Size, seen); err != nil {
		return err
	}
	return l.readEnum(enum, found["idx_reg_off"])
}

// readEnum reads the values of enum __bpf_usdt_arg_type.
func (l *LibbpfLayout) readEnum(e *btf.Enum, haveIdx bool) error {
	if len(e.Values) > maxLibbpfEnum {
		return fmt.Errorf("enum __bpf_usdt_arg_type: %d values, more than %d", len(e.Values), maxLibbpfEnum)
	}
	vals := map[string]uint64{}
	used := map[uint64]bool{}
	for _, v := range e.Values {
		vals[v.Name] = v.Value
		used[v.Value] = true
	}
	for _, n := range []string{"BPF_USDT_ARG_CONST", "BPF_USDT_ARG_REG", "BPF_USDT_ARG_REG_DEREF"} {
		if _, ok := vals[n]; !ok {
			return fmt.Errorf("enum __bpf_usdt_arg_type: no value %s", n)
		}
	}
	l.typeConst, l.typeReg, l.typeDeref = vals["BPF_USDT_ARG_CONST"], vals["BPF_USDT_ARG_REG"], vals["BPF_USDT_ARG_REG_DEREF"]
	sib, haveSIB := vals["BPF_USDT_ARG_SIB"]
	if haveSIB != haveIdx {
		return errors.New("enum __bpf_usdt_arg_type and struct __bpf_usdt_arg_spec disagree: BPF_USDT_ARG_SIB comes with members idx_reg_off and scale_bitshift")
	}
	l.HasSIB, l.typeSIB = haveSIB, sib
	for _, v := range []uint64{l.typeConst, l.typeReg, l.typeDeref, l.typeSIB} {
		if !fits(l.argType, v) {
			return fmt.Errorf("enum __bpf_usdt_arg_type: value %d does not fit member arg_type (%d bits)", v, l.argType.width)
		}
	}
	for v := uint64(0); ; v++ {
		if !fits(l.argType, v) {
			return errors.New("enum __bpf_usdt_arg_type: no spare value of member arg_type for arguments that cannot be read")
		}
		if !used[v] {
			l.typeBad = v
			return nil
		}
	}
}

// intField returns the place of an integer, enum or bool member.
func intField(st string, m btf.Member) (bitField, error) {
	var size uint32
	var signed bool
	switch u := btf.UnderlyingType(m.Type).(type) {
	case *btf.Int:
		size, signed = u.Size, u.Encoding == btf.Signed
	case *btf.Enum:
		size, signed = u.Size, u.Signed
	default:
		return bitField{}, fmt.Errorf("struct %s: member %s is %s, want an integer", st, token(m.Name), typeName(m.Type))
	}
	if size == 0 || size > 8 {
		return bitField{}, fmt.Errorf("struct %s: member %s is %d bytes, want 1 to 8", st, token(m.Name), size)
	}
	f := bitField{off: uint32(m.Offset), width: 8 * size, signed: signed}
	if m.BitfieldSize != 0 {
		if uint32(m.BitfieldSize) > f.width {
			return bitField{}, fmt.Errorf("struct %s: member %s is a %d-bit field of a %d-bit type", st, token(m.Name), m.BitfieldSize, f.width)
		}
		f.width = uint32(m.BitfieldSize)
	} else if m.Offset%8 != 0 {
		return bitField{}, fmt.Errorf("struct %s: member %s is not byte-aligned", st, token(m.Name))
	}
	return f, nil
}

// checkFields checks that fields lie inside a struct of size bytes and do
// not overlap.
func checkFields(st string, size uint32, fs []bitField) error {
	for i, f := range fs {
		if uint64(f.off)+uint64(f.width) > 8*uint64(size) {
			return fmt.Errorf("struct %s: a member at bit %d lies outside the struct's %d bytes", st, f.off, size)
		}
		for _, g := range fs[:i] {
			if f.off < g.off+g.width && g.off < f.off+f.width {
				return fmt.Errorf("struct %s: members at bits %d and %d overlap", st, g.off, f.off)
			}
		}
	}
	return nil
}

// fits reports whether v (read as a two's complement value when the field is
// signed) is representable in f.
func fits(f bitField, v uint64) bool {
	if f.width >= 64 {
		return true
	}
	if f.signed {
		s := int64(v)
		lim := int64(1) << (f.width - 1)
		return s >= -lim && s < lim
	}
	return v < uint64(1)<<f.width
}

// put writes the low f.width bits of v at f in b (little-endian bit order).
func put(b []byte, base uint32, f bitField, v uint64) {
	off := 8*base + f.off
	for i := uint32(0); i < f.width; i++ {
		bit := off + i
		if v>>i&1 != 0 {
			b[bit/8] |= 1 << (bit % 8)
		} else {
			b[bit/8] &^= 1 << (bit % 8)
		}
	}
}

// LibbpfSpec encodes a probe site's arguments as a struct __bpf_usdt_spec
// in layout l: SpecSize bytes in the host's (little-endian) byte order, with
// usdt_cookie set to cookie. An argument libbpf's header cannot read (a
// kind this package does not parse, an absolute or register-less memory
// operand, or a scale-index-base operand in a layout before libbpf 1.7) is
// written with an arg_type outside the enum: bpf_usdt_arg returns -EINVAL
// for it, as ke_usdt_arg does for ArgUnsupported. Errors: more arguments
// than the layout holds, or a register offset that does not fit its field.
func (l *LibbpfLayout) LibbpfSpec(machine elf.Machine, args []Arg, cookie uint64) ([]byte, error) {
	if len(args) > l.MaxArgs {
		return nil, fmt.Errorf("probe has %d arguments, libbpf's struct __bpf_usdt_spec holds %d", len(args), l.MaxArgs)
	}
	if !fits(l.argCnt, uint64(len(args))) {
		return nil, fmt.Errorf("probe has %d arguments, more than member arg_cnt holds", len(args))
	}
	b := make([]byte, l.SpecSize)
	put(b, 0, l.cookie, cookie)
	put(b, 0, l.argCnt, uint64(len(args)))
	for i, a := range args {
		base := l.argsOff + uint32(i)*l.argSize
		typ, val, reg, idx, shift, ok := l.argPlace(machine, a)
		if !ok {
			put(b, base, l.argType, l.typeBad)
			continue
		}
		if !fits(l.regOff, uint64(reg)) || (l.HasSIB && (!fits(l.idxRegOff, uint64(idx)) || !fits(l.scaleBitshift, uint64(shift)))) {
			return nil, fmt.Errorf("argument %d: register offset does not fit libbpf's struct __bpf_usdt_arg_spec", i)
		}
		put(b, base, l.argType, typ)
		put(b, base, l.valOff, uint64(val))
		put(b, base, l.regOff, uint64(reg))
		if l.HasSIB {
			put(b, base, l.idxRegOff, uint64(idx))
			put(b, base, l.scaleBitshift, uint64(shift))
		}
		if a.Signed {
			put(b, base, l.argSigned, 1)
		}
		put(b, base, l.argBitshift, uint64(64-8*a.Size))
	}
	return b, nil
}

// argPlace returns the libbpf arg_type, val_off, reg_off, idx_reg_off and
// scale_bitshift of a; ok is false for an argument libbpf's header cannot
// read.
func (l *LibbpfLayout) argPlace(machine elf.Machine, a Arg) (typ uint64, val int64, reg, idx int16, shift uint8, ok bool) {
	if a.Size != 1 && a.Size != 2 && a.Size != 4 && a.Size != 8 {
		return 0, 0, 0, 0, 0, false
	}
	switch a.Kind {
	case ArgConst:
		return l.typeConst, a.Value, 0, 0, 0, true
	case ArgReg:
		r, ok := ptRegsOffset(machine, a.Base)
		return l.typeReg, 0, r, 0, 0, ok
	case ArgMem:
		r, ok := ptRegsOffset(machine, a.Base)
		if a.Base == "" || !ok {
			return 0, 0, 0, 0, 0, false
		}
		if a.Index == "" {
			return l.typeDeref, a.Value, r, 0, 0, true
		}
		x, ok := ptRegsOffset(machine, a.Index)
		if !l.HasSIB || !ok || a.Scale <= 0 || a.Scale&(a.Scale-1) != 0 {
			return 0, 0, 0, 0, 0, false
		}
		return l.typeSIB, a.Value, r, x, uint8(bits.TrailingZeros(uint(a.Scale))), true
	}
	return 0, 0, 0, 0, 0, false
}

// typeName names a BTF type for an error: its sanitized name.
func typeName(t btf.Type) string {
	if t == nil {
		return "no type"
	}
	if n := btf.UnderlyingType(t).TypeName(); n != "" {
		return "type " + token(n)
	}
	return "an unnamed type"
}

// SPDX-License-Identifier: Apache-2.0

package usdt

import (
	"debug/elf"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/cilium/ebpf/btf"
)

// libbpfMember is one member of a test layout: name, type, bit offset and
// bitfield width (0: not a bitfield).
type libbpfMember struct {
	name      string
	typ       btf.Type
	off, bits uint32
}

var (
	btfU8    = &btf.Int{Name: "__u8", Size: 1}
	btfU16   = &btf.Int{Name: "__u16", Size: 2}
	btfU64   = &btf.Int{Name: "__u64", Size: 8}
	btfShort = &btf.Int{Name: "short", Size: 2, Encoding: btf.Signed}
	btfBool  = &btf.Int{Name: "_Bool", Size: 1, Encoding: btf.Bool}
	btfChar  = &btf.Int{Name: "char", Size: 1, Encoding: btf.Signed}
)

func argTypeEnum(sib bool) *btf.Enum {
	e := &btf.Enum{Name: "__bpf_usdt_arg_type", Size: 4, Values: []btf.EnumValue{
		{Name: "BPF_USDT_ARG_CONST", Value: 0}, {Name: "BPF_USDT_ARG_REG", Value: 1}, {Name: "BPF_USDT_ARG_REG_DEREF", Value: 2},
	}}
	if sib {
		e.Values = append(e.Values, btf.EnumValue{Name: "BPF_USDT_ARG_SIB", Value: 3})
	}
	return e
}

// libbpfSpecType builds struct __bpf_usdt_spec around an arg spec of the
// given members and size, with nargs arguments, as clang lays it out.
func libbpfSpecType(argMembers []libbpfMember, argSize uint32, nargs uint32) *btf.Struct {
	arg := &btf.Struct{Name: "__bpf_usdt_arg_spec", Size: argSize}
	for _, m := range argMembers {
		arg.Members = append(arg.Members, btf.Member{Name: m.name, Type: m.typ, Offset: btf.Bits(m.off), BitfieldSize: btf.Bits(m.bits)})
	}
	argsEnd := argSize * nargs
	return &btf.Struct{Name: "__bpf_usdt_spec", Size: argsEnd + 16, Members: []btf.Member{
		{Name: "args", Type: &btf.Array{Index: &btf.Int{Size: 4}, Type: arg, Nelems: nargs}},
		{Name: "usdt_cookie", Type: btfU64, Offset: btf.Bits(8 * argsEnd)},
		{Name: "arg_cnt", Type: btfShort, Offset: btf.Bits(8 * (argsEnd + 8))},
	}}
}

// oldArgMembers is struct __bpf_usdt_arg_spec of libbpf 0.8 to 1.6 (Debian
// 12's libbpf-dev 1.1, ebpf_exporter's pinned 1.5).
func oldArgMembers() []libbpfMember {
	return []libbpfMember{
		{"val_off", btfU64, 0, 0},
		{"arg_type", argTypeEnum(false), 64, 0},
		{"reg_off", btfShort, 96, 0},
		{"arg_signed", btfBool, 112, 0},
		{"arg_bitshift", btfChar, 120, 0},
	}
}

// sibArgMembers is libbpf 1.7's, on a little-endian target.
func sibArgMembers() []libbpfMember {
	return []libbpfMember{
		{"val_off", btfU64, 0, 0},
		{"arg_type", argTypeEnum(true), 64, 8},
		{"idx_reg_off", btfU16, 72, 12},
		{"scale_bitshift", btfU16, 84, 4},
		{"__reserved", btfU8, 88, 8},
		{"reg_off", btfShort, 96, 0},
		{"arg_signed", btfBool, 112, 0},
		{"arg_bitshift", btfChar, 120, 0},
	}
}

// libbpfTestArgs are x86-64 arguments of each kind: a register, a memory
// operand, a negative constant, a scale-index-base operand, a byte
// register, and an absolute address (which libbpf cannot read).
const libbpfTestArgs = "-4@%edi -8@-16(%rbp) -4@$-9 8@8(%rcx,%rax,8) 1@%sil 4@0x1234"

// argBytes returns the 16 bytes of argument i of an encoded spec.
func argBytes(b []byte, i int) []byte { return b[16*i : 16*i+16] }

func TestLibbpfLayoutOld(t *testing.T) {
	l, err := NewLibbpfLayout(libbpfSpecType(oldArgMembers(), 16, 12))
	if err != nil {
		t.Fatal(err)
	}
	if l.SpecSize != 208 || l.MaxArgs != 12 || l.HasSIB {
		t.Fatalf("layout: size %d, %d args, SIB %v; want 208, 12, false", l.SpecSize, l.MaxArgs, l.HasSIB)
	}
	b, err := l.LibbpfSpec(elf.EM_X86_64, ParseArgs(elf.EM_X86_64, libbpfTestArgs, 0x1000, nil), 0x77)
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	if len(b) != 208 || le.Uint64(b[192:]) != 0x77 || le.Uint16(b[200:]) != 6 {
		t.Fatalf("%d bytes, cookie %#x, arg_cnt %d; want 208, 0x77, 6", len(b), le.Uint64(b[192:]), le.Uint16(b[200:]))
	}
	// val_off, arg_type (u32), reg_off, arg_signed, arg_bitshift.
	type want struct {
		val       uint64
		typ       uint32
		reg       uint16
		signed    byte
		bitshift  byte
		unreadble bool
	}
	for i, w := range []want{
		{0, 1, 112, 1, 32, false},                 // -4@%edi: REG rdi
		{uint64(^uint64(15)), 2, 32, 1, 0, false}, // -8@-16(%rbp): REG_DEREF rbp, -16
		{uint64(^uint64(8)), 0, 0, 1, 32, false},  // -4@$-9: CONST -9
		{0, 3, 0, 0, 0, true},                     // SIB: no such type before 1.7
		{0, 1, 104, 0, 56, false},                 // 1@%sil: REG rsi
		{0, 3, 0, 0, 0, true},                     // absolute address
	} {
		a := argBytes(b, i)
		got := want{le.Uint64(a), le.Uint32(a[8:]), le.Uint16(a[12:]), a[14], a[15], w.unreadble}
		if got != w {
			t.Errorf("arg %d: got %+v, want %+v", i, got, w)
		}
	}
	for i := 6; i < 12; i++ {
		for _, c := range argBytes(b, i) {
			if c != 0 {
				t.Fatalf("arg %d beyond arg_cnt is not zero: % x", i, argBytes(b, i))
			}
		}
	}
}

func TestLibbpfLayoutSIB(t *testing.T) {
	l, err := NewLibbpfLayout(libbpfSpecType(sibArgMembers(), 16, 12))
	if err != nil {
		t.Fatal(err)
	}
	if !l.HasSIB || l.SpecSize != 208 {
		t.Fatalf("layout: SIB %v, size %d; want true, 208", l.HasSIB, l.SpecSize)
	}
	b, err := l.LibbpfSpec(elf.EM_X86_64, ParseArgs(elf.EM_X86_64, libbpfTestArgs, 0x1000, nil), 0)
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	// 8@8(%rcx,%rax,8): val_off 8, arg_type 3 (byte 8), idx_reg_off rax=80
	// in bits 72-83, scale_bitshift 3 in bits 84-87, reg_off rcx=88.
	a := argBytes(b, 3)
	if le.Uint64(a) != 8 || a[8] != 3 || le.Uint16(a[9:])&0xfff != 80 || a[10]>>4 != 3 || a[11] != 0 || le.Uint16(a[12:]) != 88 || a[15] != 0 {
		t.Errorf("SIB argument: % x", a)
	}
	// -4@%edi as in the old layout: only arg_type is one byte now.
	a = argBytes(b, 0)
	if a[8] != 1 || a[9] != 0 || a[10] != 0 || le.Uint16(a[12:]) != 112 || a[14] != 1 || a[15] != 32 {
		t.Errorf("register argument: % x", a)
	}
	// The absolute address is unreadable: a type outside the enum (4).
	if a := argBytes(b, 5); a[8] != 4 {
		t.Errorf("unreadable argument: arg_type %d, want 4", a[8])
	}
}

// TestLibbpfLayoutRefused checks that layouts this version does not know
// are refused with the member named, and an over-long argument list too.
func TestLibbpfLayoutRefused(t *testing.T) {
	replace := func(name string, m libbpfMember) []libbpfMember {
		var out []libbpfMember
		for _, o := range oldArgMembers() {
			if o.name == name {
				if m.name == "" {
					continue
				}
				o = m
			}
			out = append(out, o)
		}
		return out
	}
	for _, c := range []struct {
		what string
		typ  btf.Type
		want string
	}{
		{"not the struct", &btf.Struct{Name: "other", Size: 8}, "want struct __bpf_usdt_spec"},
		{"unknown arg member", libbpfSpecType(append(oldArgMembers(), libbpfMember{"scale", btfShort, 128, 0}), 18, 12), "member scale is not in a layout"},
		{"missing reg_off", libbpfSpecType(replace("reg_off", libbpfMember{}), 16, 12), "no member reg_off"},
		{"idx without scale", libbpfSpecType(append(oldArgMembers(), libbpfMember{"idx_reg_off", btfShort, 128, 0}), 18, 12), "come together"},
		{"SIB fields without the enum value", libbpfSpecType(replace("arg_type", libbpfMember{"arg_type", argTypeEnum(false), 64, 8}), 16, 12), ""},
		{"overlap", libbpfSpecType(replace("reg_off", libbpfMember{"reg_off", btfShort, 64, 0}), 16, 12), "overlap"},
		{"outside", libbpfSpecType(replace("arg_bitshift", libbpfMember{"arg_bitshift", btfChar, 128, 0}), 16, 12), "outside"},
		{"arg_type not an enum", libbpfSpecType(replace("arg_type", libbpfMember{"arg_type", btfU16, 64, 0}), 16, 12), "want enum __bpf_usdt_arg_type"},
		{"val_off not 64 bits", libbpfSpecType(replace("val_off", libbpfMember{"val_off", &btf.Int{Size: 4}, 0, 0}), 16, 12), "want 64"},
	} {
		_, err := NewLibbpfLayout(c.typ)
		if c.want == "" {
			// A one-byte arg_type is fine without the SIB fields.
			if err != nil {
				t.Errorf("%s: %v", c.what, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.what, err, c.want)
		}
	}
	l, err := NewLibbpfLayout(libbpfSpecType(oldArgMembers(), 16, 2))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.LibbpfSpec(elf.EM_X86_64, ParseArgs(elf.EM_X86_64, "4@$1 4@$2 4@$3", 0, nil), 0); err == nil || !strings.Contains(err.Error(), "holds 2") {
		t.Errorf("3 arguments in a 2-argument layout: error %v", err)
	}
}

// fuzzNames are the member names FuzzLibbpfLayout picks from.
var fuzzNames = []string{"val_off", "arg_type", "reg_off", "arg_signed", "arg_bitshift", "idx_reg_off", "scale_bitshift", "__reserved", "scale", "args", "usdt_cookie", "arg_cnt"}

// fuzzLayout builds struct __bpf_usdt_spec from data: a header (arg struct
// size, args count, enum values), then 4-byte member records of the arg
// struct (name, type, bit offset, bitfield width).
func fuzzLayout(data []byte) btf.Type {
	if len(data) < 4 {
		return &btf.Int{Size: 4}
	}
	argSize, nargs, nenum, sib := uint32(data[0]%64), uint32(data[1]%80), int(data[2]%8), data[3]&1 != 0
	data = data[4:]
	e := &btf.Enum{Name: "__bpf_usdt_arg_type", Size: 4}
	names := []string{"BPF_USDT_ARG_CONST", "BPF_USDT_ARG_REG", "BPF_USDT_ARG_REG_DEREF", "BPF_USDT_ARG_SIB", "OTHER"}
	for i := 0; i < nenum && len(data) > 0; i++ {
		e.Values = append(e.Values, btf.EnumValue{Name: names[i%len(names)], Value: uint64(data[0])})
		data = data[1:]
	}
	if sib {
		e.Size, e.Signed = 1, true
	}
	types := []btf.Type{btfU8, btfU16, btfU64, btfShort, btfBool, btfChar, e, &btf.Int{Size: 4}}
	var ms []libbpfMember
	for len(data) >= 4 && len(ms) < 20 {
		ms = append(ms, libbpfMember{fuzzNames[int(data[0])%len(fuzzNames)], types[int(data[1])%len(types)], uint32(data[2]) % 160, uint32(data[3]) % 20})
		data = data[4:]
	}
	return libbpfSpecType(ms, argSize, nargs)
}

// FuzzLibbpfLayout feeds NewLibbpfLayout struct layouts built from
// arbitrary bytes (member names, types, offsets and bitfield widths as an
// object's BTF may give them). It must never panic; an accepted layout
// encodes any argument list it holds into exactly SpecSize bytes, with
// arg_cnt and usdt_cookie where the layout says; errors are short and
// printable.
func FuzzLibbpfLayout(f *testing.F) {
	f.Add([]byte{16, 12, 3, 0, 0, 1, 2,
		0, 2, 0, 0, 1, 6, 64, 0, 2, 3, 96, 0, 3, 4, 112, 0, 4, 5, 120, 0}, libbpfTestArgs)
	f.Add([]byte{16, 12, 4, 1, 0, 1, 2, 3,
		0, 2, 0, 0, 1, 6, 64, 8, 5, 1, 72, 12, 6, 1, 84, 4, 7, 0, 88, 8, 2, 3, 96, 0, 3, 4, 112, 0, 4, 5, 120, 0}, "8@(%rax,%rbx,2) -2@%ax")
	f.Add([]byte{}, "")
	f.Fuzz(func(t *testing.T, data []byte, args string) {
		l, err := NewLibbpfLayout(fuzzLayout(data))
		if err != nil {
			checkText(t, "NewLibbpfLayout", err.Error())
			return
		}
		if l.SpecSize > maxLibbpfSpec || l.MaxArgs > maxLibbpfArgs {
			t.Fatalf("accepted a spec of %d bytes with %d arguments", l.SpecSize, l.MaxArgs)
		}
		parsed := ParseArgs(elf.EM_X86_64, args, 0x1000, nil)
		b, err := l.LibbpfSpec(elf.EM_X86_64, parsed, 0x5a5a)
		if err != nil {
			checkText(t, "LibbpfSpec", err.Error())
			return
		}
		if uint32(len(b)) != l.SpecSize {
			t.Fatalf("%d bytes, want %d", len(b), l.SpecSize)
		}
		if got := get(b, l.argCnt); got != uint64(len(parsed)) {
			t.Fatalf("arg_cnt %d, want %d", got, len(parsed))
		}
		if got := get(b, l.cookie); got != 0x5a5a&mask(l.cookie.width) {
			t.Fatalf("usdt_cookie %#x", got)
		}
	})
}

// get reads field f of b (the inverse of put at base 0).
func get(b []byte, f bitField) uint64 {
	var v uint64
	for i := uint32(0); i < f.width; i++ {
		bit := f.off + i
		if b[bit/8]>>(bit%8)&1 != 0 {
			v |= 1 << i
		}
	}
	return v
}

func mask(width uint32) uint64 {
	if width >= 64 {
		return ^uint64(0)
	}
	return 1<<width - 1
}

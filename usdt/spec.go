// SPDX-License-Identifier: Apache-2.0

package usdt

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"math/bits"
)

// MaxArgs is the most arguments a probe may have (<sys/sdt.h> allows 12).
const MaxArgs = 12

// SpecSize is the size in bytes of an encoded Spec: the value size of the
// BPF map ke_usdt_specs in include/kernel_exporter/usdt.bpf.h.
const SpecSize = MaxArgs*16 + 8

// SpecArg is one argument as BPF reads it; the layout is struct ke_usdt_arg
// (16 bytes, native byte order).
type SpecArg struct {
	// Off is the constant (ArgConst) or the displacement (ArgMem).
	Off int64
	// RegOff is the byte offset in the kernel's struct pt_regs of the
	// value (ArgReg) or base (ArgMem) register; -1 for none.
	RegOff int16
	// IdxOff is the offset in struct pt_regs of the index register; -1 for
	// none.
	IdxOff int16
	// Kind is an ArgKind.
	Kind uint8
	// Size is the width in bytes (1, 2, 4 or 8).
	Size uint8
	// Signed is 1 for sign extension, 0 for zero extension.
	Signed uint8
	// ScaleShift is log2 of the index scale.
	ScaleShift uint8
}

// Spec is a probe site's argument table, the value of one ke_usdt_specs
// entry (struct ke_usdt_spec, SpecSize bytes).
type Spec struct {
	Args  [MaxArgs]SpecArg
	NArgs uint32
	_     uint32
}

// x86PtRegs are the offsets in the x86-64 kernel's struct pt_regs.
var x86PtRegs = map[string]int16{
	"r15": 0, "r14": 8, "r13": 16, "r12": 24, "rbp": 32, "rbx": 40,
	"r11": 48, "r10": 56, "r9": 64, "r8": 72, "rax": 80, "rcx": 88,
	"rdx": 96, "rsi": 104, "rdi": 112, "rip": 128, "rsp": 152,
}

// ptRegsOffset returns the offset of a register (as named in Arg.Base) in
// the kernel's struct pt_regs of machine. arm64's pt_regs starts with
// user_pt_regs: regs[31], sp, pc.
func ptRegsOffset(machine elf.Machine, reg string) (int16, bool) {
	switch machine {
	case elf.EM_X86_64:
		off, ok := x86PtRegs[reg]
		return off, ok
	case elf.EM_AARCH64:
		if reg == "sp" {
			return 31 * 8, true
		}
		var n int
		if _, err := fmt.Sscanf(reg, "x%d", &n); err == nil && n >= 0 && n <= 30 {
			return int16(n * 8), true
		}
	}
	return 0, false
}

// NewSpec encodes args for BPF. Unsupported arguments are encoded with
// kind ArgUnsupported, which the BPF helper reports as an error when read.
func NewSpec(machine elf.Machine, args []Arg) (Spec, error) {
	var s Spec
	if len(args) > MaxArgs {
		return s, fmt.Errorf("probe has %d arguments, at most %d are supported", len(args), MaxArgs)
	}
	s.NArgs = uint32(len(args))
	for i, a := range args {
		sa := SpecArg{Off: a.Value, RegOff: -1, IdxOff: -1, Kind: uint8(a.Kind), Size: uint8(a.Size)}
		if a.Signed {
			sa.Signed = 1
		}
		if a.Kind == ArgReg || a.Kind == ArgMem {
			if a.Base != "" {
				off, ok := ptRegsOffset(machine, a.Base)
				if !ok {
					sa.Kind = uint8(ArgUnsupported)
				}
				sa.RegOff = off
			}
			if a.Index != "" {
				off, ok := ptRegsOffset(machine, a.Index)
				if !ok {
					sa.Kind = uint8(ArgUnsupported)
				}
				sa.IdxOff = off
				sa.ScaleShift = uint8(bits.TrailingZeros(uint(a.Scale)))
			}
		}
		if sa.Kind == uint8(ArgUnsupported) {
			sa = SpecArg{RegOff: -1, IdxOff: -1}
		}
		s.Args[i] = sa
	}
	return s, nil
}

// MarshalBinary returns the spec in the layout of struct ke_usdt_spec, in
// the host's byte order.
func (s *Spec) MarshalBinary() ([]byte, error) {
	b := make([]byte, 0, SpecSize)
	bo := binary.NativeEndian
	for _, a := range s.Args {
		b = bo.AppendUint64(b, uint64(a.Off))
		b = bo.AppendUint16(b, uint16(a.RegOff))
		b = bo.AppendUint16(b, uint16(a.IdxOff))
		b = append(b, a.Kind, a.Size, a.Signed, a.ScaleShift)
	}
	b = bo.AppendUint32(b, s.NArgs)
	b = bo.AppendUint32(b, 0)
	return b, nil
}

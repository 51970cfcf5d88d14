// SPDX-License-Identifier: Apache-2.0

package usdt

import (
	"debug/elf"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ArgKind says where a probe argument's value is.
type ArgKind uint8

// Argument kinds. The numbers are the KE_USDT_ARG_* values of
// include/kernel_exporter/usdt.bpf.h.
const (
	// ArgUnsupported: an operand this package cannot read (e.g. x86 %ah,
	// a vector register); BPF reads of it fail.
	ArgUnsupported ArgKind = 0
	// ArgConst: the value is Arg.Value.
	ArgConst ArgKind = 1
	// ArgReg: the value is in register Arg.Base.
	ArgReg ArgKind = 2
	// ArgMem: the value is in user memory at
	// Base + Index<<log2(Scale) + Value.
	ArgMem ArgKind = 3
)

func (k ArgKind) String() string {
	switch k {
	case ArgConst:
		return "const"
	case ArgReg:
		return "reg"
	case ArgMem:
		return "mem"
	}
	return "unsupported"
}

// Arg is one probe argument.
type Arg struct {
	// Text is the argument as written in the note, e.g. "-4@-20(%rbp)".
	Text string
	// Size is the width in bytes: 1, 2, 4 or 8.
	Size int
	// Signed arguments are sign-extended to 64 bits, others zero-extended.
	Signed bool
	Kind   ArgKind
	// Value is the constant (ArgConst) or the displacement (ArgMem). For a
	// memory operand relative to the instruction pointer that names a
	// symbol (x86 "counter(%rip)"), Value is the symbol's address minus the
	// probe's PC: at the probe, the register holds the probe's run-time
	// address, so register + Value is the symbol's run-time address in a
	// position-independent file too.
	Value int64
	// Base is the register holding the value (ArgReg) or the base address
	// (ArgMem; empty for an absolute address), by its 64-bit name: "rax",
	// "rbp", "rip", "x29", "sp", ...
	Base string
	// Index and Scale are an x86 memory operand's index register and scale
	// (1, 2, 4 or 8); Index is empty when there is none.
	Index string
	Scale int
	// Err is why the argument is ArgUnsupported.
	Err error
}

// ParseArgs parses a probe's argument string in the assembler syntax of
// machine (elf.EM_X86_64 or elf.EM_AARCH64). pc is the probe's link-time
// address and resolve looks up symbol addresses (both for operands that
// name a symbol; resolve may be nil). Unreadable arguments are returned
// with Kind ArgUnsupported rather than failing the probe. A text longer
// than MaxArgsText bytes is one ArgUnsupported argument. Errors quote the
// text only as a short sanitized token (see Token).
func ParseArgs(machine elf.Machine, text string, pc uint64, resolve func(string) (uint64, bool)) []Arg {
	if len(text) > MaxArgsText {
		return []Arg{{Text: text[:MaxArgsText], Size: 8, Kind: ArgUnsupported,
			Err: fmt.Errorf("argument string of %d bytes, more than the limit of %d", len(text), MaxArgsText)}}
	}
	var args []Arg
	for _, f := range splitArgs(text) {
		a := Arg{Text: f, Size: 8}
		op := f
		if sz, rest, ok := strings.Cut(f, "@"); ok {
			n, err := strconv.Atoi(sz)
			if n < 0 {
				a.Signed, n = true, -n
			}
			if err != nil || (n != 1 && n != 2 && n != 4 && n != 8) {
				a.Err = fmt.Errorf("argument %s: bad size %s", token(f), token(sz))
				args = append(args, a)
				continue
			}
			a.Size, op = n, rest
		}
		var err error
		switch machine {
		case elf.EM_X86_64:
			err = parseX86(&a, op, pc, resolve)
		case elf.EM_AARCH64:
			err = parseARM64(&a, op)
		default:
			err = fmt.Errorf("machine %v is not supported (want x86-64 or aarch64)", machine)
		}
		if err != nil {
			a.Kind, a.Err = ArgUnsupported, fmt.Errorf("argument %s: %w", token(f), err)
		}
		args = append(args, a)
	}
	return args
}

// splitArgs splits an argument string at spaces outside brackets (AArch64
// writes "8@[sp, 16]").
func splitArgs(text string) []string {
	var out []string
	depth, start := 0, -1
	for i, c := range text {
		switch {
		case c == '[' || c == '(':
			depth++
		case c == ']' || c == ')':
			depth--
		case (c == ' ' || c == '\t') && depth <= 0:
			if start >= 0 {
				out = append(out, text[start:i])
				start = -1
			}
			continue
		}
		if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		out = append(out, text[start:])
	}
	return out
}

// x86Regs maps every name of a general-purpose x86-64 register (64, 32, 16
// and low 8 bits) to its 64-bit name.
var x86Regs = func() map[string]string {
	m := map[string]string{"rip": "rip", "eip": "rip"}
	for _, r := range []string{"ax", "bx", "cx", "dx"} {
		m["r"+r], m["e"+r], m[r], m[r[:1]+"l"] = "r"+r, "r"+r, "r"+r, "r"+r
	}
	for _, r := range []string{"si", "di", "bp", "sp"} {
		m["r"+r], m["e"+r], m[r], m[r+"l"] = "r"+r, "r"+r, "r"+r, "r"+r
	}
	for i := 8; i <= 15; i++ {
		r := "r" + strconv.Itoa(i)
		m[r], m[r+"d"], m[r+"w"], m[r+"b"], m[r+"l"] = r, r, r, r, r
	}
	return m
}()

func x86Reg(s string) (string, error) {
	name, ok := strings.CutPrefix(s, "%")
	if !ok {
		return "", fmt.Errorf("want a register, got %s", token(s))
	}
	r, ok := x86Regs[name]
	if !ok {
		return "", fmt.Errorf("register %%%s is not supported", token(name))
	}
	return r, nil
}

// parseX86 parses AT&T operands: $imm, %reg, disp(base,index,scale),
// sym+off(%rip), and absolute addresses.
func parseX86(a *Arg, op string, pc uint64, resolve func(string) (uint64, bool)) error {
	switch {
	case strings.HasPrefix(op, "$"):
		v, err := parseInt(op[1:])
		if err != nil {
			return fmt.Errorf("constant %s: %w", token(op), err)
		}
		a.Kind, a.Value = ArgConst, v
		return nil
	case strings.HasPrefix(op, "%"):
		r, err := x86Reg(op)
		if err != nil {
			return err
		}
		a.Kind, a.Base = ArgReg, r
		return nil
	}
	disp, inner, hasParen := strings.Cut(op, "(")
	if hasParen {
		var ok bool
		if inner, ok = strings.CutSuffix(inner, ")"); !ok {
			return fmt.Errorf("memory operand %s: missing )", token(op))
		}
		parts := strings.Split(inner, ",")
		if len(parts) > 3 {
			return fmt.Errorf("memory operand %s: too many parts", token(op))
		}
		if p := strings.TrimSpace(parts[0]); p != "" {
			r, err := x86Reg(p)
			if err != nil {
				return err
			}
			a.Base = r
		}
		if len(parts) >= 2 {
			r, err := x86Reg(strings.TrimSpace(parts[1]))
			if err != nil {
				return err
			}
			a.Index, a.Scale = r, 1
			if len(parts) == 3 {
				s, err := strconv.Atoi(strings.TrimSpace(parts[2]))
				if err != nil || (s != 1 && s != 2 && s != 4 && s != 8) {
					return fmt.Errorf("memory operand %s: bad scale", token(op))
				}
				a.Scale = s
			}
		}
	}
	a.Kind = ArgMem
	if disp == "" {
		return nil
	}
	if v, err := parseInt(disp); err == nil {
		a.Value = v
		return nil
	}
	// A symbol, optionally with +N or -N.
	sym, off := disp, int64(0)
	if i := strings.LastIndexAny(disp, "+-"); i > 0 {
		v, err := parseInt(disp[i:])
		if err != nil {
			return fmt.Errorf("displacement %s: %w", token(disp), err)
		}
		sym, off = disp[:i], v
	}
	if resolve == nil {
		return fmt.Errorf("symbol %s: no symbol table", token(sym))
	}
	addr, ok := resolve(sym)
	if !ok {
		return fmt.Errorf("symbol %s not found", token(sym))
	}
	if a.Base == "rip" {
		a.Value = int64(addr-pc) + off
		return nil
	}
	// Without %rip the symbol is an absolute address (or the base of an
	// indexed array): only right in files loaded where they were linked,
	// i.e. non-PIE executables.
	a.Value = int64(addr) + off
	return nil
}

// parseARM64 parses AArch64 operands: an immediate (optionally #), xN, wN,
// sp, and [reg], [reg, off] memory operands.
func parseARM64(a *Arg, op string) error {
	if inner, ok := strings.CutPrefix(op, "["); ok {
		inner, ok = strings.CutSuffix(inner, "]")
		if !ok {
			return fmt.Errorf("memory operand %s: missing ]", token(op))
		}
		base, off, hasOff := strings.Cut(inner, ",")
		r, err := arm64Reg(strings.TrimSpace(base))
		if err != nil {
			return err
		}
		a.Kind, a.Base = ArgMem, r
		if hasOff {
			v, err := parseInt(strings.TrimPrefix(strings.TrimSpace(off), "#"))
			if err != nil {
				return fmt.Errorf("memory operand %s: %w", token(op), err)
			}
			a.Value = v
		}
		return nil
	}
	if v, err := parseInt(strings.TrimPrefix(op, "#")); err == nil {
		a.Kind, a.Value = ArgConst, v
		return nil
	}
	r, err := arm64Reg(op)
	if err != nil {
		return err
	}
	a.Kind, a.Base = ArgReg, r
	return nil
}

func arm64Reg(s string) (string, error) {
	if s == "sp" || s == "wsp" {
		return "sp", nil
	}
	if len(s) >= 2 && (s[0] == 'x' || s[0] == 'w') {
		if n, err := strconv.Atoi(s[1:]); err == nil && n >= 0 && n <= 30 {
			return "x" + s[1:], nil
		}
	}
	return "", fmt.Errorf("register %s is not supported", token(s))
}

// parseInt parses a signed decimal or 0x hexadecimal integer (a leading 0
// is not octal).
func parseInt(s string) (int64, error) {
	if s == "" {
		return 0, errors.New("empty number")
	}
	neg := false
	switch s[0] {
	case '-':
		neg, s = true, s[1:]
	case '+':
		s = s[1:]
	}
	base := 10
	if h, ok := strings.CutPrefix(strings.ToLower(s), "0x"); ok {
		s, base = h, 16
	}
	u, err := strconv.ParseUint(s, base, 64)
	if err != nil {
		// strconv's error quotes the text: the caller names the operand.
		if errors.Is(err, strconv.ErrRange) {
			return 0, errors.New("number out of range")
		}
		return 0, errors.New("not a number")
	}
	if neg {
		return -int64(u), nil
	}
	return int64(u), nil
}

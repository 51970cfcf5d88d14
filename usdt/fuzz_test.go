// SPDX-License-Identifier: Apache-2.0

package usdt

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"strings"
	"testing"
)

// maxErrText bounds the length of an error of this package on any input:
// fixed text, numbers and at most a few sanitized tokens.
const maxErrText = 1024

// checkText fails when an error text is too long or holds anything but
// printable ASCII (the file's bytes only appear through token).
func checkText(t *testing.T, what, s string) {
	t.Helper()
	if len(s) > maxErrText {
		t.Fatalf("%s: %d bytes of error text, more than %d", what, len(s), maxErrText)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			t.Fatalf("%s: error text holds byte %#x at %d: %q", what, c, i, s)
		}
	}
}

// noteSection builds a .note.stapsdt section of one probe.
func noteSection(bo binary.AppendByteOrder, addrSize int, provider, name, args string) []byte {
	var desc []byte
	for _, v := range []uint64{0x1130, 0x2000, 0} {
		if addrSize == 4 {
			desc = bo.AppendUint32(desc, uint32(v))
		} else {
			desc = bo.AppendUint64(desc, v)
		}
	}
	desc = append(desc, provider+"\x00"+name+"\x00"+args+"\x00"...)
	b := bo.AppendUint32(nil, uint32(len(noteOwner)+1))
	b = bo.AppendUint32(b, uint32(len(desc)))
	b = bo.AppendUint32(b, noteType)
	b = append(b, noteOwner+"\x00"...)
	b = append(b, make([]byte, align4(uint32(len(noteOwner)+1))-uint64(len(noteOwner)+1))...)
	b = append(b, desc...)
	return append(b, make([]byte, align4(uint32(len(desc)))-uint64(len(desc)))...)
}

// FuzzUSDTNotes feeds arbitrary bytes to the parser of .note.stapsdt
// section contents (as found in a file of either byte order and class, for
// x86-64 or AArch64), and the same bytes to NewFile as a whole ELF file. It
// must never panic, and its output is bounded: at most MaxProbes probes,
// each with bounded strings, an encodable spec, and short printable errors.
func FuzzUSDTNotes(f *testing.F) {
	f.Add(noteSection(binary.LittleEndian, 8, "ketest", "args", "-4@%edi 8@-16(%rbp) 1@$5"), false, false, true)
	f.Add(noteSection(binary.BigEndian, 4, "prov", "name", "-4@[sp, 16] 8@x0"), true, true, false)
	f.Add(noteSection(binary.LittleEndian, 8, "p", "n", ""), false, false, false)
	f.Add([]byte{}, false, false, true)
	f.Add([]byte("\x7fELF\x02\x01\x01"), false, false, true)
	f.Fuzz(func(t *testing.T, data []byte, bigEndian, class32, x86 bool) {
		var bo binary.ByteOrder = binary.LittleEndian
		if bigEndian {
			bo = binary.BigEndian
		}
		addrSize := 8
		if class32 {
			addrSize = 4
		}
		machine := elf.EM_AARCH64
		if x86 {
			machine = elf.EM_X86_64
		}
		resolve := func(s string) (uint64, bool) { return uint64(len(s)) * 8, len(s)%2 == 0 }
		place := func(p *note) error {
			p.Offset = p.PC
			return nil
		}
		ps, err := probes(data, bo, addrSize, machine, place, resolve)
		if err != nil {
			checkText(t, "probes", err.Error())
		}
		checkProbes(t, machine, ps, len(data))

		// The same bytes as a whole file.
		uf, err := NewFile(bytes.NewReader(data))
		if err != nil {
			checkText(t, "NewFile", err.Error())
			return
		}
		checkProbes(t, uf.Machine, uf.Probes, len(data))
		for _, n := range uf.Names() {
			checkText(t, "Names", n)
		}
	})
}

func checkProbes(t *testing.T, machine elf.Machine, ps []Probe, inputLen int) {
	t.Helper()
	if len(ps) > MaxProbes || len(ps) > inputLen/12 {
		t.Fatalf("%d probes from %d bytes", len(ps), inputLen)
	}
	for _, p := range ps {
		if p.Provider == "" || p.Name == "" || len(p.Provider) > maxName || len(p.Name) > maxName {
			t.Fatalf("probe with provider of %d bytes and name of %d bytes", len(p.Provider), len(p.Name))
		}
		if len(p.ArgsText) > MaxArgsText || len(p.Args) > len(p.ArgsText) {
			t.Fatalf("probe %s: %d args from %d bytes of text", p.String(), len(p.Args), len(p.ArgsText))
		}
		checkText(t, "Probe.String", p.String())
		checkArgs(t, machine, p.Args)
	}
}

func checkArgs(t *testing.T, machine elf.Machine, args []Arg) {
	t.Helper()
	for _, a := range args {
		if a.Size != 1 && a.Size != 2 && a.Size != 4 && a.Size != 8 {
			t.Fatalf("argument of size %d", a.Size)
		}
		if (a.Kind == ArgUnsupported) != (a.Err != nil) {
			t.Fatalf("argument kind %v with error %v", a.Kind, a.Err)
		}
		if a.Err != nil {
			checkText(t, "argument", a.Err.Error())
		}
		if a.Index != "" && a.Scale != 1 && a.Scale != 2 && a.Scale != 4 && a.Scale != 8 {
			t.Fatalf("argument with scale %d", a.Scale)
		}
	}
	spec, err := NewSpec(machine, args)
	if err != nil {
		if len(args) <= MaxArgs {
			t.Fatalf("NewSpec of %d args: %v", len(args), err)
		}
		checkText(t, "NewSpec", err.Error())
		return
	}
	b, err := spec.MarshalBinary()
	if err != nil || len(b) != SpecSize {
		t.Fatalf("MarshalBinary: %d bytes, %v", len(b), err)
	}
	for i := 0; i < int(spec.NArgs); i++ {
		sa := spec.Args[i]
		if sa.Kind > uint8(ArgMem) || sa.ScaleShift > 3 {
			t.Fatalf("spec arg %d: kind %d, scale shift %d", i, sa.Kind, sa.ScaleShift)
		}
	}
}

// FuzzUSDTArgs feeds arbitrary argument strings to ParseArgs for both
// machines: never a panic, at most one argument per byte, each with a
// valid size and a short printable error, and an encodable spec.
func FuzzUSDTArgs(f *testing.F) {
	for _, s := range []string{
		"-4@%edi 8@-16(%rbp) 4@$5", "8@24(%rax,%rbx,8)", "8@(,%rcx,4)", "-8@counter(%rip)",
		"4@counter+8(%rip)", "8@table(,%rax,8)", "8@0x601040", "%rdi", "4@%ah", "8@%xmm0",
		"-4@x0 4@w19 8@[sp, 16] -4@[x29, -12] 8@[x0] -4@5 8@#-3", "8@(%rax", "3@%eax",
		"8@-0x8000000000000000(%rbp)", "8@$99999999999999999999", "1@[ 2@] 4@(",
	} {
		f.Add(s, true)
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, text string, x86 bool) {
		machine := elf.EM_AARCH64
		if x86 {
			machine = elf.EM_X86_64
		}
		resolve := func(s string) (uint64, bool) { return 0x4000 + uint64(len(s)), strings.HasPrefix(s, "c") }
		args := ParseArgs(machine, text, 0x1000, resolve)
		if len(args) > len(text) && !(len(text) > MaxArgsText && len(args) == 1) {
			t.Fatalf("%d args from %d bytes", len(args), len(text))
		}
		for _, a := range args {
			if len(a.Text) > MaxArgsText {
				t.Fatalf("argument text of %d bytes", len(a.Text))
			}
		}
		checkArgs(t, machine, args)
		if tok := Token(text); len(tok) > 6*maxToken+8 {
			t.Fatalf("Token: %d bytes", len(tok))
		}
	})
}

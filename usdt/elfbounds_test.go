// SPDX-License-Identifier: Apache-2.0

package usdt

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// testSym is a symbol of a synthetic ELF file.
type testSym struct {
	name        uint32 // offset in the string table
	info, other byte
	shndx       uint16
	value, size uint64
}

// synthELF builds an ELF file of the given class and byte order with a
// .symtab of syms (after the null entry) linked to .strtab strs, and a
// .shstrtab.
func synthELF(class elf.Class, bo binary.ByteOrder, syms []testSym, strs string) []byte {
	is64 := class == elf.ELFCLASS64
	ehsize, shentsize, symsize := 52, 40, elf.Sym32Size
	if is64 {
		ehsize, shentsize, symsize = 64, 64, elf.Sym64Size
	}
	var symtab bytes.Buffer
	symtab.Write(make([]byte, symsize))
	for _, s := range syms {
		e := make([]byte, symsize)
		bo.PutUint32(e, s.name)
		if is64 {
			e[4], e[5] = s.info, s.other
			bo.PutUint16(e[6:], s.shndx)
			bo.PutUint64(e[8:], s.value)
			bo.PutUint64(e[16:], s.size)
		} else {
			bo.PutUint32(e[4:], uint32(s.value))
			bo.PutUint32(e[8:], uint32(s.size))
			e[12], e[13] = s.info, s.other
			bo.PutUint16(e[14:], s.shndx)
		}
		symtab.Write(e)
	}
	shstr := "\x00.symtab\x00.strtab\x00.shstrtab\x00"
	type sec struct {
		name, typ, link uint32
		data            []byte
	}
	secs := []sec{{}, {1, uint32(elf.SHT_SYMTAB), 2, symtab.Bytes()}, {9, uint32(elf.SHT_STRTAB), 0, []byte(strs)}, {17, uint32(elf.SHT_STRTAB), 0, []byte(shstr)}}
	out := make([]byte, ehsize)
	offs := make([]int, len(secs))
	for i, s := range secs {
		offs[i] = len(out)
		out = append(out, s.data...)
	}
	shoff := len(out)
	for i, s := range secs {
		h := make([]byte, shentsize)
		bo.PutUint32(h, s.name)
		bo.PutUint32(h[4:], s.typ)
		if is64 {
			bo.PutUint64(h[24:], uint64(offs[i]))
			bo.PutUint64(h[32:], uint64(len(s.data)))
			bo.PutUint32(h[40:], s.link)
			if s.typ == uint32(elf.SHT_SYMTAB) {
				bo.PutUint64(h[56:], uint64(symsize))
			}
		} else {
			bo.PutUint32(h[16:], uint32(offs[i]))
			bo.PutUint32(h[20:], uint32(len(s.data)))
			bo.PutUint32(h[24:], s.link)
			if s.typ == uint32(elf.SHT_SYMTAB) {
				bo.PutUint32(h[36:], uint32(symsize))
			}
		}
		out = append(out, h...)
	}
	copy(out, elf.ELFMAG)
	out[elf.EI_CLASS] = byte(class)
	out[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	if bo == binary.ByteOrder(binary.BigEndian) {
		out[elf.EI_DATA] = byte(elf.ELFDATA2MSB)
	}
	out[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	bo.PutUint16(out[16:], uint16(elf.ET_EXEC))
	bo.PutUint32(out[20:], uint32(elf.EV_CURRENT))
	if is64 {
		bo.PutUint64(out[40:], uint64(shoff))
		bo.PutUint16(out[52:], uint16(ehsize))
		bo.PutUint16(out[58:], uint16(shentsize))
		bo.PutUint16(out[60:], uint16(len(secs)))
		bo.PutUint16(out[62:], 3)
	} else {
		bo.PutUint32(out[32:], uint32(shoff))
		bo.PutUint16(out[40:], uint16(ehsize))
		bo.PutUint16(out[46:], uint16(shentsize))
		bo.PutUint16(out[48:], uint16(len(secs)))
		bo.PutUint16(out[50:], 3)
	}
	return out
}

// testFiles returns synthetic ELF32 and ELF64 files in both byte orders,
// with names that are duplicated, empty, out of range, unterminated and
// long, and real files of this machine (libc's .dynsym, the go tool's
// .symtab).
func testFiles(t *testing.T) map[string][]byte {
	strs := "\x00main\x00foo\x00foo\x00" + strings.Repeat("x", 300) + "\x00tail"
	syms := []testSym{
		{1, byte(elf.STT_FUNC), 0, 1, 0x1000, 16},
		{6, byte(elf.STT_OBJECT) | byte(elf.STB_GLOBAL)<<4, 0, 2, 0x2000, 8},
		{10, byte(elf.STT_FUNC), 1, 1, 0x3000, 32},
		{7, byte(elf.STT_FUNC), 0, 1, 0x3100, 4}, // "oo": a suffix
		{14, byte(elf.STT_FUNC), 0, 1, 0x4000, 1},
		{uint32(len(strs) - 4), byte(elf.STT_FUNC), 0, 1, 0x5000, 1}, // unterminated: ""
		{uint32(len(strs) + 100), byte(elf.STT_FUNC), 0, 1, 0x6000, 1},
		{0, byte(elf.STT_FUNC), 0, 0, 0, 0},
		{6, byte(elf.STT_FUNC), 0, 0xfff1, 0xffffffff, 0xffffffff},
	}
	files := map[string][]byte{}
	for _, c := range []elf.Class{elf.ELFCLASS32, elf.ELFCLASS64} {
		for _, bo := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
			files["synthetic "+c.String()+" "+bo.String()] = synthELF(c, bo, syms, strs)
		}
	}
	real, _ := filepath.Glob("/lib/*-linux-gnu/libc.so.6")
	real = append(real, filepath.Join(runtime.GOROOT(), "bin", "go"))
	for _, p := range real {
		if b, err := os.ReadFile(p); err == nil {
			files[p] = b
		}
	}
	return files
}

// TestFindSymbolsMatchesDebugELF: FindSymbols reports exactly the symbols
// debug/elf's Symbols and DynamicSymbols give (name, info, other,
// section, value, size, in order), for ELF32 and ELF64 files of both byte
// orders and for libc's .dynsym, with the string table read whole and
// read name by name.
func TestFindSymbolsMatchesDebugELF(t *testing.T) {
	files := testFiles(t)
	defer func() { wholeStringTable = MaxStringTable }()
	for _, whole := range []uint64{MaxStringTable, 0} {
		wholeStringTable = whole
		for path, data := range files {
			f := bytes.NewReader(data)
			ef, err := ReadELF(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, typ := range []elf.SectionType{elf.SHT_SYMTAB, elf.SHT_DYNSYM} {
				var want []elf.Symbol
				if typ == elf.SHT_SYMTAB {
					want, err = ef.Symbols()
				} else {
					want, err = ef.DynamicSymbols()
				}
				if errors.Is(err, elf.ErrNoSymbols) {
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				names := map[string]bool{}
				for _, s := range want {
					names[s.Name] = true
				}
				var got []Symbol
				err := FindSymbols(ef, sizeOf(f), typ, names, nil, func(s *Symbol) { got = append(got, *s) })
				if err != nil {
					t.Fatalf("%s %v: %v", path, typ, err)
				}
				if len(got) != len(want) {
					t.Fatalf("%s %v (whole string table up to %d): %d symbols, want %d", path, typ, whole, len(got), len(want))
				}
				for i, w := range want {
					g := got[i]
					if g.Name != w.Name || g.Info != w.Info || g.Other != w.Other || g.Section != w.Section || g.Value != w.Value || g.Size != w.Size {
						t.Fatalf("%s %v symbol %d: got %+v, want %+v", path, typ, i, g, w)
					}
				}
				if whole != 0 {
					t.Logf("%s %v (%v, %v): %d symbols match", path, typ, ef.Class, ef.ByteOrder, len(got))
				}
			}
		}
	}
}

// TestFindSymbolsLimits: a symbol table of more than MaxSymbols entries
// is refused without reading it, as is one past the end of the file.
func TestFindSymbolsLimits(t *testing.T) {
	data, err := os.ReadFile("/bin/true")
	if err != nil {
		t.Skip(err)
	}
	ef, err := elf.NewFile(bytes.NewReader(data))
	if err != nil || ef.Class != elf.ELFCLASS64 || ef.ByteOrder != binary.LittleEndian {
		t.Skip("/bin/true is not a little-endian ELF64 file")
	}
	idx := -1
	for i, s := range ef.Sections {
		if s.Type == elf.SHT_DYNSYM {
			idx = i
		}
	}
	if idx < 0 {
		t.Skip("/bin/true has no .dynsym")
	}
	shoff := binary.LittleEndian.Uint64(data[40:])
	h := data[shoff+uint64(idx)*64:]
	for _, tc := range []struct {
		size uint64
		want string
	}{
		{24 * (MaxSymbols + 1), "section .dynsym: 16777217 entries, more than the limit of 16777216"},
		{24 * 1000, "section .dynsym: 24000 bytes at offset 4096 are past the end of the file"},
	} {
		binary.LittleEndian.PutUint64(h[24:], 4096)
		binary.LittleEndian.PutUint64(h[32:], tc.size)
		r := bytes.NewReader(data[:min(len(data), 4096+20000)])
		f, err := ReadELF(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		err = FindSymbols(f, r.Size(), elf.SHT_DYNSYM, map[string]bool{"main": true}, nil, func(*Symbol) {})
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("size %d: err = %v, want %q", tc.size, err, tc.want)
		}
	}
}

// TestReadELFHeaderLimits: section and program header tables over the
// limits, and a section name table over MaxStringTable, are refused
// before debug/elf reads them.
func TestReadELFHeaderLimits(t *testing.T) {
	orig, err := os.ReadFile("/bin/true")
	if err != nil {
		t.Skip(err)
	}
	if orig[elf.EI_CLASS] != byte(elf.ELFCLASS64) || orig[elf.EI_DATA] != byte(elf.ELFDATA2LSB) {
		t.Skip("/bin/true is not a little-endian ELF64 file")
	}
	le := binary.LittleEndian
	for _, tc := range []struct {
		name  string
		patch func(b []byte)
		want  string
	}{
		{"program headers", func(b []byte) { le.PutUint16(b[54:], 0xffff); le.PutUint16(b[56:], 0xffff) },
			"ELF program headers: 65535 entries of 65535 bytes, more than the 8 MiB limit"},
		{"extended section count", func(b []byte) {
			shoff := le.Uint64(b[40:])
			le.PutUint16(b[60:], 0)                   // e_shnum 0: count in section 0's sh_size
			le.PutUint64(b[shoff+32:], 1_000_000_000) // sh_size of section 0
		}, "ELF section headers: 1000000000 sections, more than the limit of 131072"},
		{"section name table", func(b []byte) {
			shoff, strndx := le.Uint64(b[40:]), uint64(le.Uint16(b[62:]))
			le.PutUint64(b[shoff+strndx*64+32:], 3_000_000_000)
		}, "ELF section name table: 3000000000 bytes, more than the 16 MiB limit"},
	} {
		b := bytes.Clone(orig)
		tc.patch(b)
		_, err := ReadELF(bytes.NewReader(b))
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
	if _, err := ReadELF(bytes.NewReader(orig)); err != nil {
		t.Errorf("unpatched /bin/true: %v", err)
	}
}

// FuzzFindSymbols feeds arbitrary bytes as an ELF file to ReadELF and
// FindSymbols: neither may panic, errors are short printable text, and
// when debug/elf reads a symbol table whole, FindSymbols reports the same
// symbols.
func FuzzFindSymbols(f *testing.F) {
	strs := "\x00main\x00foo\x00"
	syms := []testSym{{1, byte(elf.STT_FUNC), 0, 1, 0x1000, 16}, {6, byte(elf.STT_OBJECT), 0, 2, 0x2000, 8}, {3, byte(elf.STT_FUNC), 0, 1, 0x10, 1}}
	for _, c := range []elf.Class{elf.ELFCLASS32, elf.ELFCLASS64} {
		for _, bo := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
			f.Add(synthELF(c, bo, syms, strs))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ef, err := ReadELF(bytes.NewReader(data))
		if err != nil {
			checkText(t, "ReadELF", err.Error())
			return
		}
		for _, typ := range []elf.SectionType{elf.SHT_SYMTAB, elf.SHT_DYNSYM} {
			names := map[string]bool{"main": true, "foo": true, "": true}
			var got []Symbol
			err := FindSymbols(ef, int64(len(data)), typ, names, nil, func(s *Symbol) { got = append(got, *s) })
			if err != nil {
				checkText(t, "FindSymbols", err.Error())
				continue
			}
			var want []elf.Symbol
			var werr error
			func() {
				defer func() {
					if recover() != nil {
						werr = errors.New("debug/elf panicked")
					}
				}()
				if typ == elf.SHT_SYMTAB {
					want, werr = ef.Symbols()
				} else {
					want, werr = ef.DynamicSymbols()
				}
			}()
			if werr != nil {
				continue
			}
			var wantNamed []elf.Symbol
			for _, s := range want {
				if names[s.Name] {
					wantNamed = append(wantNamed, s)
				}
			}
			if len(got) != len(wantNamed) {
				t.Fatalf("%v: FindSymbols found %d symbols, debug/elf %d", typ, len(got), len(wantNamed))
			}
			for i, w := range wantNamed {
				g := got[i]
				if g.Name != w.Name || g.Info != w.Info || g.Other != w.Other || g.Section != w.Section || g.Value != w.Value || g.Size != w.Size {
					t.Fatalf("%v symbol %d: got %+v, want %+v", typ, i, g, w)
				}
			}
		}
	})
}

// sameNameELF is an ELF64 file of n sections whose headers all name one
// string of nameLen bytes in the section name table.
func sameNameELF(n, nameLen int) []byte {
	le := binary.LittleEndian
	strOff := 64
	shoff := (strOff + nameLen + 1 + 7) &^ 7
	b := make([]byte, shoff+64*n)
	copy(b, elf.ELFMAG)
	b[elf.EI_CLASS], b[elf.EI_DATA], b[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), 1
	le.PutUint16(b[16:], uint16(elf.ET_EXEC))
	le.PutUint16(b[18:], uint16(elf.EM_X86_64))
	le.PutUint32(b[20:], 1)
	le.PutUint64(b[40:], uint64(shoff))
	le.PutUint16(b[52:], 64) // e_ehsize
	le.PutUint16(b[58:], 64) // e_shentsize
	le.PutUint16(b[60:], uint16(n))
	le.PutUint16(b[62:], 1) // e_shstrndx
	for i := range nameLen {
		b[strOff+i] = 'A'
	}
	for i := 1; i < n; i++ {
		h := b[shoff+64*i:]
		typ := elf.SHT_PROGBITS
		if i == 1 {
			typ = elf.SHT_STRTAB
			le.PutUint64(h[24:], uint64(strOff))
			le.PutUint64(h[32:], uint64(nameLen+1))
		}
		le.PutUint32(h[4:], uint32(typ))
	}
	return b
}

// TestHardening09SectionNames checks that a file whose section headers all
// name one long string is refused before debug/elf copies that string once
// per section (200 sections naming 8 MB took 1.5 GB and 5 s).
func TestHardening09SectionNames(t *testing.T) {
	for _, tc := range []struct {
		n, nameLen int
		want       string
	}{
		{200, 2000, "ELF section 0: a name longer than 1024 bytes"},
		{20000, 1000, "ELF section names: more than 16 MiB in all"},
	} {
		_, err := ReadELF(bytes.NewReader(sameNameELF(tc.n, tc.nameLen)))
		if err == nil || err.Error() != tc.want {
			t.Errorf("%d sections naming %d bytes: err = %v, want %q", tc.n, tc.nameLen, err, tc.want)
		}
	}
	if _, err := ReadELF(bytes.NewReader(sameNameELF(20, 100))); err != nil {
		t.Errorf("20 sections naming 100 bytes: %v", err)
	}
}

// SPDX-License-Identifier: Apache-2.0

package usdt

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/kernel-exporter/kernel_exporter/bounded"
)

// Limits of what is read from the headers and symbol tables of an ELF file
// (a uprobe or USDT target, or a vmlinux given as BTF). A target may be up
// to bounded.MaxTarget bytes, but none of these structures is read whole
// beyond these sizes, whatever the headers claim.
const (
	// MaxSections bounds the number of section headers (a large C++
	// executable has a few hundred; more than 65280 needs the extended
	// numbering, which is allowed).
	MaxSections = 1 << 17 // 131072
	// MaxHeaderTable bounds the size in bytes of the program header table
	// and of the section header table (65535 standard program headers
	// take 3.5 MiB).
	MaxHeaderTable = 8 << 20 // 8 MiB
	// MaxStringTable bounds a string table read whole: the section name
	// table (refused when larger) and the string table of a symbol table
	// (when larger, names are read one by one with bounded reads instead).
	MaxStringTable = 16 << 20 // 16 MiB
	// MaxSectionName bounds one section name, in bytes (real ones are a
	// few dozen; debug/elf copies each, so their total is bounded by
	// MaxStringTable too).
	MaxSectionName = 1024
	// MaxSymbols bounds the number of entries of one symbol table
	// (.symtab or .dynsym, the null entry included) that a lookup scans; a
	// larger table is refused.
	// A large unstripped executable has a few million.
	MaxSymbols = 16 << 20 // 16777216
)

// wholeStringTable is the largest string table FindSymbols reads whole
// (a variable for tests).
var wholeStringTable uint64 = MaxStringTable

// symChunk is the number of symbol entries read at once while scanning.
const symChunk = 4096

// sizeOf returns the size of r when r can tell it (*os.File,
// *bytes.Reader, *io.SectionReader), else -1.
func sizeOf(r io.ReaderAt) int64 {
	switch v := r.(type) {
	case interface{ Stat() (os.FileInfo, error) }:
		if fi, err := v.Stat(); err == nil {
			return fi.Size()
		}
	case interface{ Size() int64 }:
		return v.Size()
	}
	return -1
}

// checkHeaders bounds what debug/elf's NewFile reads before it reads it:
// the program header table, the section header table (the count, with the
// extended numbering of section 0) and the section name string table,
// each read whole by NewFile. Inputs it cannot make sense of are left to
// NewFile, which reports them.
func checkHeaders(r io.ReaderAt, size int64) error {
	var ident [elf.EI_NIDENT]byte
	if _, err := r.ReadAt(ident[:], 0); err != nil || string(ident[:4]) != elf.ELFMAG {
		return nil
	}
	var bo binary.ByteOrder
	switch elf.Data(ident[elf.EI_DATA]) {
	case elf.ELFDATA2LSB:
		bo = binary.LittleEndian
	case elf.ELFDATA2MSB:
		bo = binary.BigEndian
	default:
		return nil
	}
	var (
		phoff, shoff                    uint64
		phentsize, phnum                uint64
		shentsize, shnum, shstrndx      uint64
		class64                         bool
		wantPhentsize, wantShentsize    uint64
		shSizeOff, shLinkOff, shFlagOff int64
	)
	switch elf.Class(ident[elf.EI_CLASS]) {
	case elf.ELFCLASS64:
		var h [64]byte
		if _, err := r.ReadAt(h[:], 0); err != nil {
			return nil
		}
		class64 = true
		phoff, shoff = bo.Uint64(h[32:]), bo.Uint64(h[40:])
		phentsize, phnum = uint64(bo.Uint16(h[54:])), uint64(bo.Uint16(h[56:]))
		shentsize, shnum, shstrndx = uint64(bo.Uint16(h[58:])), uint64(bo.Uint16(h[60:])), uint64(bo.Uint16(h[62:]))
		wantPhentsize, wantShentsize = 56, 64
		shFlagOff, shSizeOff, shLinkOff = 8, 32, 40
	case elf.ELFCLASS32:
		var h [52]byte
		if _, err := r.ReadAt(h[:], 0); err != nil {
			return nil
		}
		phoff, shoff = uint64(bo.Uint32(h[28:])), uint64(bo.Uint32(h[32:]))
		phentsize, phnum = uint64(bo.Uint16(h[42:])), uint64(bo.Uint16(h[44:]))
		shentsize, shnum, shstrndx = uint64(bo.Uint16(h[46:])), uint64(bo.Uint16(h[48:])), uint64(bo.Uint16(h[50:]))
		wantPhentsize, wantShentsize = 32, 40
		shFlagOff, shSizeOff, shLinkOff = 8, 20, 24
	default:
		return nil
	}
	// word reads a field of a section header: 8 bytes in ELF64, 4 in ELF32
	// (sh_link is 4 bytes in both).
	word := func(off int64, n int) (uint64, bool) {
		var b [8]byte
		if _, err := r.ReadAt(b[:n], off); err != nil {
			return 0, false
		}
		if n == 4 {
			return uint64(bo.Uint32(b[:])), true
		}
		return bo.Uint64(b[:]), true
	}
	wordSize := 4
	if class64 {
		wordSize = 8
	}
	if phnum > 0 {
		if phentsize < wantPhentsize {
			return nil // NewFile refuses it
		}
		if n := phnum * phentsize; n > MaxHeaderTable {
			return fmt.Errorf("ELF program headers: %d entries of %d bytes, more than the %s limit", phnum, phentsize, bounded.Size(MaxHeaderTable))
		} else if size >= 0 && (phoff > uint64(size) || n > uint64(size)-phoff) {
			return fmt.Errorf("ELF program headers: %d entries of %d bytes at offset %d are past the end of the file (%d bytes)", phnum, phentsize, phoff, size)
		}
	}
	if shoff == 0 {
		return nil
	}
	if shentsize < wantShentsize || shoff > 1<<62 {
		return nil // NewFile refuses it (or fails reading it)
	}
	if shnum == 0 {
		// Extended numbering: the count is section 0's sh_size, the name
		// table's index its sh_link.
		v, ok := word(int64(shoff)+shSizeOff, wordSize)
		if !ok {
			return nil
		}
		shnum = v
		if shstrndx == uint64(elf.SHN_XINDEX) {
			l, ok := word(int64(shoff)+shLinkOff, 4)
			if !ok {
				return nil
			}
			shstrndx = l
		}
	}
	if shnum > MaxSections {
		return fmt.Errorf("ELF section headers: %d sections, more than the limit of %d", shnum, MaxSections)
	}
	if n := shnum * shentsize; n > MaxHeaderTable {
		return fmt.Errorf("ELF section headers: %d entries of %d bytes, more than the %s limit", shnum, shentsize, bounded.Size(MaxHeaderTable))
	} else if size >= 0 && (shoff > uint64(size) || n > uint64(size)-shoff) {
		return fmt.Errorf("ELF section headers: %d entries of %d bytes at offset %d are past the end of the file (%d bytes)", shnum, shentsize, shoff, size)
	}
	if shstrndx == 0 || shstrndx >= shnum {
		return nil
	}
	hdr := int64(shoff + shstrndx*shentsize)
	typ, ok := word(hdr+4, 4)
	if !ok || elf.SectionType(typ) != elf.SHT_STRTAB {
		return nil
	}
	flags, ok1 := word(hdr+shFlagOff, wordSize)
	strSize, ok2 := word(hdr+shSizeOff, wordSize)
	if !ok1 || !ok2 {
		return nil
	}
	if elf.SectionFlag(flags)&elf.SHF_COMPRESSED != 0 {
		return errors.New("ELF section name table: compressed, not supported")
	}
	if strSize > MaxStringTable {
		return fmt.Errorf("ELF section name table: %d bytes, more than the %s limit", strSize, bounded.Size(MaxStringTable))
	}
	// debug/elf copies every section's name: many headers naming one long
	// string would cost their count times its length. Each name is at most
	// MaxSectionName bytes, and all of them MaxStringTable.
	strOffOff := int64(16)
	if class64 {
		strOffOff = 24
	}
	strOff, ok := word(hdr+strOffOff, wordSize)
	if !ok || size >= 0 && (strOff > uint64(size) || strSize > uint64(size)-strOff) {
		return nil // NewFile fails reading it
	}
	names := make([]byte, strSize)
	if _, err := r.ReadAt(names, int64(strOff)); err != nil {
		return nil
	}
	var total uint64
	for i := uint64(0); i < shnum; i++ {
		off, ok := word(int64(shoff+i*shentsize), 4)
		if !ok || off >= strSize {
			continue
		}
		rest := names[off:min(uint64(len(names)), off+MaxSectionName+1)]
		n := bytes.IndexByte(rest, 0)
		if n < 0 {
			if len(rest) > MaxSectionName {
				return fmt.Errorf("ELF section %d: a name longer than %d bytes", i, MaxSectionName)
			}
			n = len(rest)
		}
		if total += uint64(n); total > MaxStringTable {
			return fmt.Errorf("ELF section names: more than %s in all", bounded.Size(MaxStringTable))
		}
	}
	return nil
}

// Symbol is one entry of an ELF symbol table, as FindSymbols reports it.
type Symbol struct {
	Name    string
	Info    byte // type (elf.ST_TYPE) and binding (elf.ST_BIND)
	Other   byte
	Section elf.SectionIndex
	Value   uint64 // link-time address
	Size    uint64 // bytes
}

// FindSymbols scans the symbol table of type typ (elf.SHT_SYMTAB or
// elf.SHT_DYNSYM: the first section of that type, as debug/elf takes it)
// of f, a file of size bytes (-1: unknown), and calls found with each
// symbol, in table order from index 1, whose name is in names and that
// keep (nil: all) accepts; keep sees the symbol before its name is read,
// with Name empty. Names are those debug/elf gives (the bytes up to the
// first NUL at st_name in the linked string table, "" when the offset is
// out of range or the string unterminated), without GNU versions.
//
// Nothing is read whole: the table is read in chunks of 4096 entries; the
// linked string table is read whole only when at most MaxStringTable
// bytes, otherwise a name is read with a bounded read of the length of the
// longest wanted name. A table of more than MaxSymbols entries is refused,
// as is a compressed or SHT_NOBITS table, a table or string table past the
// end of the file, or a string table link out of range. A file without the
// table, or with an empty one, gives elf.ErrNoSymbols. Errors name the
// section, never quote its content.
func FindSymbols(f *elf.File, size int64, typ elf.SectionType, names map[string]bool, keep func(*Symbol) bool, found func(*Symbol)) error {
	sec := f.SectionByType(typ)
	if sec == nil {
		return elf.ErrNoSymbols
	}
	what := "section " + token(sec.Name)
	entSize := uint64(elf.Sym64Size)
	if f.Class == elf.ELFCLASS32 {
		entSize = elf.Sym32Size
	}
	if sec.Size == 0 {
		return elf.ErrNoSymbols
	}
	if sec.Size%entSize != 0 {
		return fmt.Errorf("%s: size %d is not a multiple of the symbol size %d", what, sec.Size, entSize)
	}
	if n := sec.Size / entSize; n > MaxSymbols {
		return fmt.Errorf("%s: %d entries, more than the limit of %d", what, n, MaxSymbols)
	}
	if err := readable(sec, size); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	count := sec.Size/entSize - 1 // entry 0 is the null symbol
	if sec.Link == 0 || sec.Link >= uint32(len(f.Sections)) {
		return fmt.Errorf("%s: string table link %d is out of range", what, sec.Link)
	}
	strSec := f.Sections[sec.Link]
	if err := readable(strSec, size); err != nil {
		return fmt.Errorf("%s: string table %s: %w", what, token(strSec.Name), err)
	}
	strs, err := newStringTable(strSec, names)
	if err != nil {
		return fmt.Errorf("%s: string table %s: %w", what, token(strSec.Name), err)
	}
	bo := f.ByteOrder
	buf := make([]byte, symChunk*entSize)
	var sym Symbol
	for i := uint64(1); i <= count; {
		n := min(count+1-i, symChunk)
		chunk := buf[:n*entSize]
		if _, err := sec.ReadAt(chunk, int64(i*entSize)); err != nil {
			return fmt.Errorf("%s: read symbols: %w", what, err)
		}
		for e := chunk; len(e) > 0; e = e[entSize:] {
			var nameOff uint32
			if entSize == elf.Sym64Size {
				nameOff = bo.Uint32(e[0:])
				sym = Symbol{Info: e[4], Other: e[5], Section: elf.SectionIndex(bo.Uint16(e[6:])), Value: bo.Uint64(e[8:]), Size: bo.Uint64(e[16:])}
			} else {
				nameOff = bo.Uint32(e[0:])
				sym = Symbol{Value: uint64(bo.Uint32(e[4:])), Size: uint64(bo.Uint32(e[8:])), Info: e[12], Other: e[13], Section: elf.SectionIndex(bo.Uint16(e[14:]))}
			}
			if keep != nil && !keep(&sym) {
				continue
			}
			name, ok, err := strs.name(nameOff)
			if err != nil {
				return fmt.Errorf("%s: string table %s: %w", what, token(strSec.Name), err)
			}
			if ok {
				sym.Name = name
				found(&sym)
			}
		}
		i += n
	}
	return nil
}

// readable refuses a section FindSymbols cannot read in place: stored
// compressed, without data (SHT_NOBITS), or past the end of the file.
func readable(s *elf.Section, size int64) error {
	switch {
	case s.Flags&elf.SHF_COMPRESSED != 0:
		return errors.New("compressed, not supported")
	case s.Type == elf.SHT_NOBITS:
		return errors.New("section has no data (SHT_NOBITS)")
	case size >= 0 && (s.Offset > uint64(size) || s.FileSize > uint64(size)-s.Offset):
		return fmt.Errorf("%d bytes at offset %d are past the end of the file (%d bytes)", s.FileSize, s.Offset, size)
	}
	return nil
}

// stringTable reads names out of an ELF string table for FindSymbols.
type stringTable struct {
	r       io.ReaderAt
	size    uint64
	lastNUL int64 // offset of the table's last NUL byte, -1 when none
	names   map[string]bool
	maxLen  int
	buf     []byte
}

func newStringTable(s *elf.Section, names map[string]bool) (*stringTable, error) {
	st := &stringTable{r: s, size: s.FileSize, names: names, lastNUL: -1}
	for n := range names {
		st.maxLen = max(st.maxLen, len(n))
	}
	st.buf = make([]byte, st.maxLen+1)
	if st.size <= wholeStringTable {
		data := make([]byte, st.size)
		if _, err := s.ReadAt(data, 0); err != nil {
			return nil, fmt.Errorf("read: %w", err)
		}
		st.r = bytes.NewReader(data)
		st.lastNUL = int64(bytes.LastIndexByte(data, 0))
		return st, nil
	}
	// Find the last NUL from the end, a chunk at a time: a name that
	// starts after it is unterminated, and debug/elf makes it "".
	chunk := make([]byte, 64<<10)
	for end := int64(st.size); end > 0 && st.lastNUL < 0; {
		start := max(end-int64(len(chunk)), 0)
		b := chunk[:end-start]
		if _, err := s.ReadAt(b, start); err != nil {
			return nil, fmt.Errorf("read: %w", err)
		}
		if i := bytes.LastIndexByte(b, 0); i >= 0 {
			st.lastNUL = start + int64(i)
		}
		end = start
	}
	return st, nil
}

// name returns the name at off when it is one of the wanted names.
func (st *stringTable) name(off uint32) (string, bool, error) {
	if int64(off) > st.lastNUL { // out of range or unterminated
		return "", st.names[""], nil
	}
	b := st.buf[:min(uint64(len(st.buf)), st.size-uint64(off))]
	if _, err := st.r.ReadAt(b, int64(off)); err != nil && !errors.Is(err, io.EOF) {
		return "", false, fmt.Errorf("read: %w", err)
	}
	i := bytes.IndexByte(b, 0)
	if i < 0 {
		return "", false, nil // longer than every wanted name
	}
	if !st.names[string(b[:i])] {
		return "", false, nil
	}
	return string(b[:i]), true, nil
}

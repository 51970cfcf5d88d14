// SPDX-License-Identifier: Apache-2.0

package symbolize

import (
	"bytes"
	"cmp"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Bounds of ReadTable: what one ELF file may make it read and keep.
const (
	// MaxSymbols bounds the function symbols kept from one file (a large
	// C++ binary has a few hundred thousand).
	MaxSymbols = 2 << 20
	// MaxSectionRead bounds one section read whole (.symtab, .strtab,
	// .gopclntab); a file with a larger one is read without it.
	MaxSectionRead = 64 << 20
	// MaxSymbolName bounds a symbol's name; longer names are cut.
	MaxSymbolName = 1024
	// maxNote bounds a build-id note section.
	maxNote = 4096
	// maxSegments bounds the PT_LOAD segments kept.
	maxSegments = 64
)

// Table is the function symbols of one ELF file, from .symtab and
// .dynsym (or, for a stripped Go binary, .gopclntab), sorted by address,
// and the file's PT_LOAD segments, which map a file offset to the virtual
// address symbols are given in. It is immutable once read.
type Table struct {
	addrs []uint64 // ascending, unique
	sizes []uint32 // 0: unknown (the symbol ends where the next starts)
	pos   []uint32 // names.get(pos[i], lens[i]) is symbol i's name
	lens  []uint16
	names nameStore
	segs  []segment
	// BuildID is the GNU build ID (hex), or else the Go build ID, or "".
	BuildID string
	// Source says where the symbols came from: "symtab", "gopclntab"
	// (a Go binary without .symtab) or neither, then "dynsym", joined by
	// "+" ("symtab+dynsym"), or "none".
	Source string
}

type segment struct{ off, filesz, vaddr uint64 }

// Len returns the number of symbols.
func (t *Table) Len() int { return len(t.addrs) }

// Bytes estimates the memory the table holds.
func (t *Table) Bytes() int {
	return 128 + len(t.addrs)*18 + t.names.bytes() + len(t.segs)*24 + len(t.BuildID)
}

// VAddr turns a file offset into the virtual address symbols use, through
// the PT_LOAD segment that holds it; false when none does.
func (t *Table) VAddr(off uint64) (uint64, bool) {
	for _, s := range t.segs {
		if off >= s.off && off-s.off < s.filesz {
			return off - s.off + s.vaddr, true
		}
	}
	return 0, false
}

// Lookup returns the name of the function that holds virtual address
// vaddr: the closest symbol at or before it, if vaddr is within its size
// (or the symbol has no size). The name is a read-only slice of the table.
func (t *Table) Lookup(vaddr uint64) ([]byte, bool) {
	i, found := slices.BinarySearch(t.addrs, vaddr)
	if !found {
		i--
	}
	if i < 0 {
		return nil, false
	}
	if sz := t.sizes[i]; sz != 0 && vaddr-t.addrs[i] >= uint64(sz) {
		return nil, false
	}
	return t.names.get(t.pos[i], t.lens[i]), true
}

// ErrNotELF is returned by ReadTable for a file that is not ELF.
var ErrNotELF = errors.New("not an ELF file")

// ReadTable reads the symbol table of the ELF file r of size bytes. It
// reads the headers, the build-ID notes, .symtab and .dynsym with their
// string tables, and .gopclntab when neither has a function; each section
// at most MaxSectionRead bytes (a larger one is skipped), at most
// MaxSymbols functions. A file with no symbols gives an empty table (its
// frames show as module+0xoffset). Errors: ErrNotELF, or one naming what
// is malformed.
func ReadTable(r io.ReaderAt, size int64) (*Table, error) {
	f, id, err := openELF(r, size)
	if err != nil {
		return nil, err
	}
	return readTable(f, id)
}

// openELF reads the headers and the build ID of the ELF file r.
func openELF(r io.ReaderAt, size int64) (f *elf.File, id string, err error) {
	var magic [4]byte
	if _, err := r.ReadAt(magic[:], 0); err != nil || string(magic[:]) != elf.ELFMAG {
		return nil, "", ErrNotELF
	}
	defer func() {
		// debug/elf has reported some malformed files by panicking:
		// make that an error.
		if p := recover(); p != nil {
			f, id, err = nil, "", fmt.Errorf("malformed ELF: %v", p)
		}
	}()
	f, err = elf.NewFile(io.NewSectionReader(r, 0, size))
	if err != nil {
		return nil, "", fmt.Errorf("malformed ELF: %w", err)
	}
	return f, buildID(f), nil
}

// readTable reads the segments and symbols of f, whose build ID is id.
func readTable(f *elf.File, id string) (t *Table, err error) {
	defer func() {
		if p := recover(); p != nil {
			t, err = nil, fmt.Errorf("malformed ELF: %v", p)
		}
	}()
	t = &Table{Source: "none", BuildID: id}
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && len(t.segs) < maxSegments {
			t.segs = append(t.segs, segment{off: p.Off, filesz: p.Filesz, vaddr: p.Vaddr})
		}
	}
	set := symbolSet{names: &t.names}
	var sources []string
	if s := f.SectionByType(elf.SHT_SYMTAB); s != nil {
		if err = set.appendSymbols(f, s); err != nil {
			return nil, err
		}
		if len(set.syms) > 0 {
			sources = append(sources, "symtab")
		}
	}
	if len(set.syms) == 0 {
		// A Go binary without .symtab (-ldflags=-s, as go test and
		// many release builds link) still has its functions in
		// .gopclntab.
		if set.goSymbols(f); len(set.syms) > 0 {
			sources = append(sources, "gopclntab")
		}
	}
	if s := f.SectionByType(elf.SHT_DYNSYM); s != nil {
		n := len(set.syms)
		if err = set.appendSymbols(f, s); err != nil {
			return nil, err
		}
		if len(set.syms) > n {
			sources = append(sources, "dynsym")
		}
	}
	if len(sources) > 0 {
		t.Source = strings.Join(sources, "+")
	}
	t.fill(&set)
	return t, nil
}

// symbol is one function while the table is built; its name is in the
// table's nameStore (no pointer: sorting and growing a few hundred
// thousand of them costs no write barrier).
type symbol struct {
	addr uint64
	size uint32 // 0: unknown, or 4 GiB or more
	pos  uint32
	n    uint16
	rank uint16 // lower wins among symbols at one address
}

// Ranks of symbols at one address: a .symtab name before a .dynsym one,
// a global before a local, then fewer leading underscores.
const (
	rankDynsym = 1 << 15
	rankLocal  = 1 << 14
)

// symbolSet is the functions read from a file.
type symbolSet struct {
	names *nameStore
	syms  []symbol
}

// add adds a function; false when the names are full.
func (set *symbolSet) add(addr, size uint64, name []byte, rank uint16) bool {
	pos, ok := set.names.add(name)
	if ok {
		if size > 1<<32-1 {
			size = 0
		}
		set.syms = append(set.syms, symbol{addr: addr, size: uint32(size), pos: pos, n: uint16(len(name)), rank: rank})
	}
	return ok
}

// section reads section s whole, nil if it is too large or unreadable.
func section(s *elf.Section) []byte {
	if s == nil || s.Type == elf.SHT_NOBITS || s.Size > MaxSectionRead {
		return nil
	}
	data := make([]byte, s.Size)
	if _, err := io.ReadFull(s.Open(), data); err != nil {
		return nil
	}
	return data
}

// appendSymbols adds the functions of symbol table s (.symtab or
// .dynsym). The table is read through a window; then the functions' names
// are read in the order of their offsets in the string table (a .dynsym's
// order is its hash's, not the strings'), so that the string table too is
// read through a window, once, and the names are copied out.
func (set *symbolSet) appendSymbols(f *elf.File, s *elf.Section) error {
	if s.Link == 0 || int(s.Link) >= len(f.Sections) || s.ReaderAt == nil || s.Type == elf.SHT_NOBITS {
		return nil
	}
	st := f.Sections[s.Link]
	if st.Type == elf.SHT_NOBITS || st.ReaderAt == nil {
		return nil
	}
	if len(set.syms) == 0 {
		set.names.hint = int(min(st.Size, nameChunk))
	}
	entry := int64(24)
	if f.Class == elf.ELFCLASS32 {
		entry = 16
	}
	first := len(set.syms)
	order := f.ByteOrder
	buf := make([]byte, (windowSize/entry)*entry)
	// Pass 1: the functions, with their name's offset in pos. The first
	// entry is the undefined symbol.
	for off := entry; off+entry <= int64(s.Size); {
		n, _ := s.ReadAt(buf[:min(int64(len(buf)), (int64(s.Size)-off)/entry*entry)], off)
		n = n / int(entry) * int(entry)
		if n == 0 {
			break // a cut table (ReadAt failed): keep what was read
		}
		for i := 0; i < n; i += int(entry) {
			e := buf[i : i+int(entry)]
			var nameOff uint32
			var info byte
			var shndx uint16
			var value, size uint64
			if entry == 24 {
				nameOff, info, shndx = order.Uint32(e), e[4], order.Uint16(e[6:])
				value, size = order.Uint64(e[8:]), order.Uint64(e[16:])
			} else {
				nameOff, value, size = order.Uint32(e), uint64(order.Uint32(e[4:])), uint64(order.Uint32(e[8:]))
				info, shndx = e[12], order.Uint16(e[14:])
			}
			typ := elf.SymType(info & 0xf)
			if typ != elf.STT_FUNC && typ != elf.STT_GNU_IFUNC || value == 0 || elf.SectionIndex(shndx) == elf.SHN_UNDEF || nameOff == 0 {
				continue
			}
			if len(set.syms) == MaxSymbols {
				return fmt.Errorf("more than %d function symbols", MaxSymbols)
			}
			var rank uint16
			if elf.SymBind(info>>4) == elf.STB_LOCAL {
				rank |= rankLocal
			}
			if s.Type == elf.SHT_DYNSYM {
				rank |= rankDynsym // .symtab's name wins
			}
			if size > 1<<32-1 {
				size = 0
			}
			set.syms = append(set.syms, symbol{addr: value, size: uint32(size), pos: nameOff, rank: rank})
		}
		off += int64(n)
	}
	// Pass 2: the names, in string table order.
	added := set.syms[first:]
	slices.SortFunc(added, func(a, b symbol) int { return cmp.Compare(a.pos, b.pos) })
	strtab := &window{r: st.ReaderAt, size: int64(st.Size)}
	var lastOff, lastPos uint32
	var lastN, lastUnder uint16
	keep := added[:0]
	for _, sym := range added {
		// Aliases share a name: read it once.
		if sym.pos != lastOff || lastN == 0 {
			name := strtab.cstring(int64(sym.pos))
			if len(name) == 0 {
				continue
			}
			pos, ok := set.names.add(name)
			if !ok {
				break // names full: keep what was read
			}
			lastOff, lastPos, lastN, lastUnder = sym.pos, pos, uint16(len(name)), 0
			for int(lastUnder) < len(name) && name[lastUnder] == '_' && lastUnder < rankLocal-1 {
				lastUnder++
			}
		}
		sym.pos, sym.n = lastPos, lastN
		sym.rank |= lastUnder
		keep = append(keep, sym)
	}
	set.syms = set.syms[:first+len(keep)]
	return nil
}

// goSymbols adds the functions of a Go binary's .gopclntab (present
// even when the binary is stripped of .symtab).
func (set *symbolSet) goSymbols(f *elf.File) {
	s, text := f.Section(".gopclntab"), f.Section(".text")
	if s == nil || text == nil || s.Type == elf.SHT_NOBITS || s.ReaderAt == nil {
		return
	}
	if err := pclnSymbols(set, s.ReaderAt, int64(s.Size), text.Addr); err != nil {
		set.syms = set.syms[:0]
		return
	}
}

// symbolOrder orders symbols by address, then rank, then where their name
// is (so that the order is the same whoever reads the file).
func symbolOrder(a, b symbol) int {
	return cmp.Or(cmp.Compare(a.addr, b.addr), cmp.Compare(a.rank, b.rank), cmp.Compare(a.pos, b.pos))
}

// sorted returns set's symbols in symbolOrder, sorted in place: a table
// already in order (.gopclntab always is, most symbol tables nearly) is
// left as it is; pdqsort takes a nearly sorted one in about linear time.
func (set *symbolSet) sorted() []symbol {
	if !slices.IsSortedFunc(set.syms, symbolOrder) {
		slices.SortFunc(set.syms, symbolOrder)
	}
	return set.syms
}

// fill builds the table from set: sorted by address, one name per address
// (the best rank, then the first in the file).
func (t *Table) fill(set *symbolSet) {
	syms := slices.CompactFunc(set.sorted(), func(a, b symbol) bool { return a.addr == b.addr })
	t.addrs = make([]uint64, len(syms))
	t.sizes = make([]uint32, len(syms))
	t.pos = make([]uint32, len(syms))
	t.lens = make([]uint16, len(syms))
	for i, s := range syms {
		t.addrs[i], t.sizes[i], t.pos[i], t.lens[i] = s.addr, s.size, s.pos, s.n
	}
	t.names.trim()
}

// Note types of the build IDs.
const (
	ntGNUBuildID = 3 // NT_GNU_BUILD_ID, name "GNU"
	ntGoBuildID  = 4 // the Go linker's note, name "Go"
)

// buildID returns the file's GNU build ID in hex, else its Go build ID,
// else "".
func buildID(f *elf.File) string {
	var goID string
	for _, s := range f.Sections {
		if s.Type != elf.SHT_NOTE || s.Size > maxNote {
			continue
		}
		data := section(s)
		if id, ok := ParseNotes(data, f.ByteOrder, "GNU", ntGNUBuildID); ok {
			return hex.EncodeToString(id)
		}
		if id, ok := ParseNotes(data, f.ByteOrder, "Go", ntGoBuildID); ok && goID == "" {
			goID = string(id)
		}
	}
	return goID
}

// ParseNotes returns the descriptor of the first note in data (the content
// of an ELF note section or PT_NOTE segment) with name and type typ. Each
// note is a 12-byte header (namesz, descsz, type) then the name and the
// descriptor, each padded to 4 bytes.
func ParseNotes(data []byte, order binary.ByteOrder, name string, typ uint32) ([]byte, bool) {
	for len(data) >= 12 {
		namesz, descsz, t := order.Uint32(data), order.Uint32(data[4:]), order.Uint32(data[8:])
		data = data[12:]
		nameLen, descLen := align4(uint64(namesz)), align4(uint64(descsz))
		if nameLen > uint64(len(data)) || descLen > uint64(len(data))-nameLen {
			return nil, false
		}
		n := data[:namesz]
		desc := data[nameLen : nameLen+uint64(descsz)]
		data = data[nameLen+descLen:]
		if t == typ && string(bytes.TrimRight(n, "\x00")) == name && len(desc) > 0 {
			return desc, true
		}
	}
	return nil, false
}

func align4(n uint64) uint64 { return (n + 3) &^ 3 }

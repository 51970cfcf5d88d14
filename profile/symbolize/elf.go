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
	ends  []uint32 // names[ends[i-1]:ends[i]] is symbol i's name
	names []byte
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
	return 128 + len(t.addrs)*16 + cap(t.names) + len(t.segs)*24 + len(t.BuildID)
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
	var start uint32
	if i > 0 {
		start = t.ends[i-1]
	}
	return t.names[start:t.ends[i]:t.ends[i]], true
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
	var set symbolSet
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

// symbol is one function while the table is built: its name is
// tabs[tab][off:off+n] of its symbolSet (no pointer: sorting and growing
// a few hundred thousand of them costs no write barrier).
type symbol struct {
	addr, size uint64
	off, n     uint32
	rank       int32 // lower wins among symbols at one address
	tab        uint8
}

// symbolSet is the functions read from a file and the string tables their
// names are in.
type symbolSet struct {
	tabs [][]byte
	syms []symbol
	// runs are the ends of the runs of syms that came from one table
	// (each sorted by address on its own in most files).
	runs []int
}

func (set *symbolSet) name(s symbol) []byte { return set.tabs[s.tab][s.off : s.off+s.n] }

// addTab adds a string table and returns its index.
func (set *symbolSet) addTab(b []byte) uint8 {
	set.tabs = append(set.tabs, b)
	return uint8(len(set.tabs) - 1)
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
// .dynsym). The table is read a window at a time, its string table whole.
func (set *symbolSet) appendSymbols(f *elf.File, s *elf.Section) error {
	if s.Link == 0 || int(s.Link) >= len(f.Sections) || s.ReaderAt == nil || s.Type == elf.SHT_NOBITS {
		return nil
	}
	strtab := section(f.Sections[s.Link])
	if strtab == nil || len(set.tabs) == 255 {
		return nil
	}
	tab := set.addTab(strtab)
	defer func() { set.runs = append(set.runs, len(set.syms)) }()
	entry := int64(24)
	if f.Class == elf.ELFCLASS32 {
		entry = 16
	}
	if set.syms == nil {
		set.syms = make([]symbol, 0, min(int64(s.Size)/entry, MaxSymbols))
	}
	order := f.ByteOrder
	buf := make([]byte, (pclnWindow/entry)*entry)
	// The first entry is the undefined symbol.
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
			if typ != elf.STT_FUNC && typ != elf.STT_GNU_IFUNC || value == 0 || elf.SectionIndex(shndx) == elf.SHN_UNDEF {
				continue
			}
			nl := cstringLen(strtab, nameOff)
			if nl == 0 {
				continue
			}
			if len(set.syms) == MaxSymbols {
				return fmt.Errorf("more than %d function symbols", MaxSymbols)
			}
			var rank int32
			for int(rank) < nl && strtab[nameOff+uint32(rank)] == '_' {
				rank++
			}
			if elf.SymBind(info>>4) == elf.STB_LOCAL {
				rank += 1 << 16
			}
			if s.Type == elf.SHT_DYNSYM {
				rank += 1 << 20 // .symtab's name wins
			}
			set.syms = append(set.syms, symbol{addr: value, size: size, off: nameOff, n: uint32(nl), rank: rank, tab: tab})
		}
		off += int64(n)
	}
	return nil
}

// cstringLen returns the length of the NUL-terminated string at off in
// tab, at most MaxSymbolName; 0 when off is out of range.
func cstringLen(tab []byte, off uint32) int {
	if int64(off) >= int64(len(tab)) {
		return 0
	}
	s := tab[off:min(len(tab), int(off)+MaxSymbolName)]
	if i := bytes.IndexByte(s, 0); i >= 0 {
		return i
	}
	return len(s)
}

// goSymbols adds the functions of a Go binary's .gopclntab (present
// even when the binary is stripped of .symtab).
func (set *symbolSet) goSymbols(f *elf.File) {
	s, text := f.Section(".gopclntab"), f.Section(".text")
	if s == nil || text == nil || s.Type == elf.SHT_NOBITS || s.ReaderAt == nil || len(set.tabs) == 255 {
		return
	}
	syms, names, err := pclnSymbols(s.ReaderAt, int64(s.Size), text.Addr)
	if err != nil {
		return
	}
	tab := set.addTab(names)
	for i := range syms {
		syms[i].tab = tab
	}
	set.syms = append(set.syms, syms...)
	set.runs = append(set.runs, len(set.syms))
}

// symbolOrder orders symbols by address, then rank, then where their name
// is (so that the order is the same whoever reads the file).
func symbolOrder(a, b symbol) int {
	return cmp.Or(cmp.Compare(a.addr, b.addr), cmp.Compare(a.rank, b.rank), cmp.Compare(a.tab, b.tab), cmp.Compare(a.off, b.off))
}

// sorted returns set's symbols in symbolOrder: each run is sorted unless
// it already is (.gopclntab always is, and most symbol tables nearly), then
// the runs are merged.
func (set *symbolSet) sorted() []symbol {
	var out []symbol
	start := 0
	for _, end := range set.runs {
		run := set.syms[start:end]
		start = end
		if !slices.IsSortedFunc(run, symbolOrder) {
			slices.SortFunc(run, symbolOrder)
		}
		if out == nil {
			out = run
			continue
		}
		merged := make([]symbol, 0, len(out)+len(run))
		i, j := 0, 0
		for i < len(out) && j < len(run) {
			if symbolOrder(out[i], run[j]) <= 0 {
				merged = append(merged, out[i])
				i++
			} else {
				merged = append(merged, run[j])
				j++
			}
		}
		out = append(append(merged, out[i:]...), run[j:]...)
	}
	return out
}

// fill builds the table from set: sorted by address, one name per address
// (the best rank, then the first in the file).
func (t *Table) fill(set *symbolSet) {
	syms := slices.CompactFunc(set.sorted(), func(a, b symbol) bool { return a.addr == b.addr })
	size := 0
	for _, s := range syms {
		size += int(s.n)
	}
	t.addrs = make([]uint64, len(syms))
	t.sizes = make([]uint32, len(syms))
	t.ends = make([]uint32, len(syms))
	t.names = make([]byte, 0, size)
	for i, s := range syms {
		t.addrs[i] = s.addr
		if s.size <= 1<<32-1 {
			t.sizes[i] = uint32(s.size)
		}
		t.names = append(t.names, set.name(s)...)
		t.ends[i] = uint32(len(t.names))
	}
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

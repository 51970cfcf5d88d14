// SPDX-License-Identifier: Apache-2.0

// Package usdt reads the statically defined tracing probes (USDT) of an ELF
// executable or shared library, as emitted by <sys/sdt.h> (SystemTap, also
// used by DTrace-style probes in Python, PostgreSQL, MySQL, Node.js, libc,
// ...), and encodes their argument specs for BPF programs that include
// include/kernel_exporter/usdt.bpf.h.
//
// Each probe site is an ELF note of type 3 (NT_STAPSDT) owned by "stapsdt"
// in section .note.stapsdt. Its descriptor holds, in the file's byte order
// and address size:
//
//	pc         link-time address of the probe's nop instruction
//	base       link-time address of section .stapsdt.base (prelink check)
//	semaphore  link-time address of the probe's u16 semaphore, or 0
//	provider\0 name\0 args\0
//
// args is a space-separated list of "<size>@<operand>" in the assembler
// syntax of the architecture, e.g. on x86-64 "-4@%edi 8@-16(%rbp) 4@$5":
// size is the argument's width in bytes, negative for signed values.
//
// A probe site becomes a uprobe at the site's file offset. A probe with a
// semaphore only fires when the semaphore is non-zero: the kernel increments
// it in every process that maps the file when the uprobe is created with the
// semaphore's file offset as "ref_ctr_offset" (Linux 4.20+).
package usdt

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/kernel-exporter/kernel_exporter/bounded"
)

// noteType is NT_STAPSDT, the ELF note type of a probe site.
const noteType = 3

// noteOwner is the note's name field.
const noteOwner = "stapsdt"

// Probe is one probe site. A probe name used at several places in the code
// has several sites, with the same provider and name.
type Probe struct {
	Provider string
	Name     string
	// PC is the link-time virtual address of the site, adjusted for
	// prelink (the difference between .stapsdt.base's address and the
	// note's base).
	PC uint64
	// Offset is the site's offset in the file: where a uprobe goes.
	Offset uint64
	// Semaphore is the link-time address of the probe's u16 semaphore, 0
	// when the probe has none.
	Semaphore uint64
	// SemaphoreOffset is the semaphore's offset in the file (the uprobe's
	// ref_ctr_offset), 0 when the probe has none.
	SemaphoreOffset uint64
	// ArgsText is the raw argument string of the note.
	ArgsText string
	// Args are the parsed arguments, in order. An argument this package
	// cannot read has Kind ArgUnsupported and Err set.
	Args []Arg
}

// String returns "provider:name@0xoffset", provider and name sanitized
// for error messages (at most 64 bytes each, escaped, quoted when not
// plain identifiers).
func (p *Probe) String() string {
	return fmt.Sprintf("%s:%s@%#x", token(p.Provider), token(p.Name), p.Offset)
}

// File is the probe table of one ELF file.
type File struct {
	// Machine is the ELF machine (elf.EM_X86_64, elf.EM_AARCH64, ...);
	// argument operands are parsed in its assembler syntax.
	Machine elf.Machine
	// Type is the ELF file type: elf.ET_EXEC for an executable at fixed
	// addresses, elf.ET_DYN for a position-independent one or a library.
	Type   elf.Type
	Probes []Probe
}

// Limits of what NewFile takes from a file.
const (
	// MaxNoteSection bounds the size in bytes of a .note.stapsdt section
	// (libc has a few dozen probes, a large database server a few
	// thousand, each about 100 bytes).
	MaxNoteSection = 16 << 20 // 16 MiB
	// MaxProbes bounds the number of probe sites of one file.
	MaxProbes = 100000
	// MaxArgsText bounds the length in bytes of a probe's argument string.
	MaxArgsText = 4096
)

// OpenTarget opens a uprobe or USDT target (an executable or shared
// library) for reading: only a regular file of at most bounded.MaxTarget
// bytes, never blocking on a FIFO (a symlink to a device is refused too).
// what names the file's role in errors ("USDT target", "uprobe target").
// Errors are *bounded.Error (bounded.ErrNotRegular, bounded.ErrTooLarge, or
// the system error such as os.ErrNotExist).
func OpenTarget(path, what string) (*os.File, error) {
	f, _, err := bounded.OpenLimit(path, what, bounded.MaxTarget)
	return f, err
}

// Open reads the probes of the ELF file at path, opened with OpenTarget.
// Errors name the path: a *bounded.Error when the file cannot be opened,
// otherwise why its ELF or probe notes are malformed (never quoting the
// file's bytes).
func Open(path string) (*File, error) {
	f, err := OpenTarget(path, "USDT target")
	if err != nil {
		return nil, fmt.Errorf("usdt: %w", err)
	}
	defer f.Close()
	uf, err := NewFile(f)
	if err != nil {
		return nil, fmt.Errorf("usdt: %s: %w", path, err)
	}
	return uf, nil
}

// elfError rewrites an error of debug/elf without the value it quotes from
// the file (its FormatError prints, e.g., the first four bytes of a file
// with a bad magic number: a config could point at a secret file).
func elfError(err error) error {
	if msg, ok := FormatErrorText(err); ok {
		return fmt.Errorf("not a valid ELF file: %s", msg)
	}
	return fmt.Errorf("not a valid ELF file: %v", err)
}

// FormatErrorText returns the message of a debug/elf *elf.FormatError in
// err without the value it quotes from the file (ok false for other
// errors).
func FormatErrorText(err error) (msg string, ok bool) {
	var fe *elf.FormatError
	if !errors.As(err, &fe) {
		return "", false
	}
	msg, _, _ = strings.Cut(fe.Error(), " '")
	msg, _, _ = strings.Cut(msg, " in record at byte")
	return msg, true
}

// ReadELF parses the ELF headers of r with debug/elf. It is a guard around
// that third-party parser: a panic on malformed input becomes an error, and
// errors never quote the file's bytes (debug/elf's quote, e.g., the first
// four bytes of a file with a bad magic number). What debug/elf reads whole
// is bounded first: at most MaxSections section headers, program and
// section header tables of at most MaxHeaderTable bytes, inside the file
// when r tells its size (*os.File, *bytes.Reader), and a section name table
// of at most MaxStringTable bytes. The symbol tables are not read: look
// symbols up with FindSymbols, never with the File's Symbols or
// DynamicSymbols (which read a table whole).
func ReadELF(r io.ReaderAt) (f *elf.File, err error) {
	defer func() {
		if p := recover(); p != nil {
			f, err = nil, errors.New("malformed ELF file (the ELF parser panicked)")
		}
	}()
	if err := checkHeaders(r, sizeOf(r)); err != nil {
		return nil, err
	}
	f, err = elf.NewFile(r)
	if err != nil {
		return nil, elfError(err)
	}
	if f.ByteOrder == nil {
		return nil, errors.New("not a valid ELF file: unknown byte order")
	}
	return f, nil
}

// NewFile reads the probes of the ELF file in r. A file without
// .note.stapsdt has no probes and is not an error. The note section is
// read whole and must be at most MaxNoteSection bytes; at most MaxProbes
// sites are read.
func NewFile(r io.ReaderAt) (uf *File, err error) {
	// Guard around a third-party parser: debug/elf panics on some
	// malformed inputs (in section and symbol reads too); report them as
	// errors.
	defer func() {
		if p := recover(); p != nil {
			uf, err = nil, errors.New("malformed ELF file (the ELF parser panicked)")
		}
	}()
	f, err := ReadELF(r)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	uf = &File{Machine: f.Machine, Type: f.Type}
	sec := f.Section(".note.stapsdt")
	if sec == nil {
		return uf, nil
	}
	if sec.Type == elf.SHT_NOBITS {
		return nil, errors.New(".note.stapsdt: section has no data (SHT_NOBITS)")
	}
	if sec.Size > MaxNoteSection {
		return nil, fmt.Errorf(".note.stapsdt: section of %d bytes is larger than the %s limit", sec.Size, bounded.Size(MaxNoteSection))
	}
	data, err := sec.Data()
	if err != nil {
		return nil, fmt.Errorf("read .note.stapsdt: %w", elfError(err))
	}
	var baseAddr uint64
	var haveBase bool
	if b := f.Section(".stapsdt.base"); b != nil {
		baseAddr, haveBase = b.Addr, true
	}
	addrSize := 8
	if f.Class == elf.ELFCLASS32 {
		addrSize = 4
	}
	bo := f.ByteOrder
	place := func(p *note) error {
		if haveBase && p.base != 0 {
			// prelink moved the file: shift by as much as .stapsdt.base moved.
			delta := baseAddr - p.base
			p.PC += delta
			if p.Semaphore != 0 {
				p.Semaphore += delta
			}
		}
		off, ok := fileOffset(f, p.PC, true)
		if !ok {
			return fmt.Errorf("probe %s:%s: address %#x is in no executable segment", token(p.Provider), token(p.Name), p.PC)
		}
		p.Offset = off
		if p.Semaphore != 0 {
			off, ok := fileOffset(f, p.Semaphore, false)
			if !ok {
				return fmt.Errorf("probe %s:%s: semaphore address %#x is in no loadable segment", token(p.Provider), token(p.Name), p.Semaphore)
			}
			p.SemaphoreOffset = off
		}
		return nil
	}
	// A first pass collects the symbols that arguments name (most name
	// none); the tables are then scanned once for all of them.
	wanted := map[string]bool{}
	uf.Probes, err = probes(data, bo, addrSize, f.Machine, place, func(name string) (uint64, bool) {
		wanted[name] = true
		return 0, false
	})
	if err != nil || len(wanted) == 0 {
		if err != nil {
			return nil, err
		}
		return uf, nil
	}
	addrs := symbolAddrs(f, sizeOf(r), wanted)
	uf.Probes, err = probes(data, bo, addrSize, f.Machine, place, func(name string) (uint64, bool) {
		v, ok := addrs[name]
		return v, ok
	})
	if err != nil {
		return nil, err
	}
	return uf, nil
}

// probes parses the probe notes of a .note.stapsdt section (data) and
// places each with place (which sets Offset and SemaphoreOffset). resolve
// looks up symbols named by arguments.
func probes(data []byte, bo binary.ByteOrder, addrSize int, machine elf.Machine, place func(*note) error, resolve func(string) (uint64, bool)) ([]Probe, error) {
	descs, err := stapsdtNotes(data, bo)
	if err != nil {
		return nil, err
	}
	out := make([]Probe, 0, len(descs))
	for _, desc := range descs {
		p, err := parseNote(desc, bo, addrSize)
		if err != nil {
			return nil, fmt.Errorf(".note.stapsdt: %w", err)
		}
		if err := place(&p); err != nil {
			return nil, err
		}
		p.Args = ParseArgs(machine, p.ArgsText, p.PC, resolve)
		out = append(out, p.Probe)
	}
	return out, nil
}

// maxName bounds the length in bytes of a probe's provider and name.
const maxName = 256

// maxToken is the longest token from a file that an error quotes.
const maxToken = 64

// token returns s for an error message: at most maxToken bytes, with
// anything but printable ASCII escaped, and quoted when it is not a plain
// identifier.
func token(s string) string {
	plain := s != ""
	var b strings.Builder
	for i := 0; i < len(s); {
		if b.Len() >= maxToken {
			b.WriteString("...")
			plain = false
			break
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-':
			b.WriteByte(c)
		case c == '\\' || c == '"':
			b.WriteByte('\\')
			b.WriteByte(c)
			plain = false
		case c >= 0x20 && c < 0x7f:
			b.WriteByte(c)
			plain = false
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, "\\x%02x", c)
			n, plain = 1, false
		default:
			fmt.Fprintf(&b, "\\u%04x", r)
			plain = false
		}
		i += n
	}
	if plain {
		return b.String()
	}
	return "\"" + b.String() + "\""
}

// stapsdtNotes returns the descriptors of the NT_STAPSDT notes owned by
// "stapsdt" in a note section.
func stapsdtNotes(data []byte, bo binary.ByteOrder) ([][]byte, error) {
	var descs [][]byte
	for len(data) > 0 {
		if len(data) < 12 {
			return nil, errors.New(".note.stapsdt: truncated note header")
		}
		namesz, descsz, typ := bo.Uint32(data), bo.Uint32(data[4:]), bo.Uint32(data[8:])
		data = data[12:]
		// The name and the descriptor are each padded to 4 bytes.
		descStart := align4(namesz)
		if uint64(len(data)) < descStart+uint64(descsz) {
			return nil, errors.New(".note.stapsdt: truncated note")
		}
		name := string(bytes.TrimRight(data[:namesz], "\x00"))
		desc := data[descStart : descStart+uint64(descsz)]
		data = data[min(descStart+align4(descsz), uint64(len(data))):]
		if typ == noteType && name == noteOwner {
			if len(descs) == MaxProbes {
				return nil, fmt.Errorf(".note.stapsdt: more than the limit of %d probe sites", MaxProbes)
			}
			descs = append(descs, desc)
		}
	}
	return descs, nil
}

func align4(n uint32) uint64 { return (uint64(n) + 3) &^ 3 }

type note struct {
	Probe
	base uint64
}

func parseNote(desc []byte, bo binary.ByteOrder, addrSize int) (note, error) {
	var n note
	if len(desc) < 3*addrSize {
		return n, errors.New("descriptor too short")
	}
	addr := func(b []byte) uint64 {
		if addrSize == 4 {
			return uint64(bo.Uint32(b))
		}
		return bo.Uint64(b)
	}
	n.PC = addr(desc)
	n.base = addr(desc[addrSize:])
	n.Semaphore = addr(desc[2*addrSize:])
	strs := strings.SplitN(string(desc[3*addrSize:]), "\x00", 4)
	if len(strs) < 3 {
		return n, fmt.Errorf("probe at %#x: want provider, name and arguments strings", n.PC)
	}
	n.Provider, n.Name, n.ArgsText = strs[0], strs[1], strs[2]
	if n.Provider == "" || n.Name == "" {
		return n, fmt.Errorf("probe at %#x: empty provider or name", n.PC)
	}
	if len(n.Provider) > maxName || len(n.Name) > maxName {
		return n, fmt.Errorf("probe at %#x: provider or name longer than %d bytes", n.PC, maxName)
	}
	if len(n.ArgsText) > MaxArgsText {
		return n, fmt.Errorf("probe %s:%s: argument string of %d bytes, more than the limit of %d", token(n.Provider), token(n.Name), len(n.ArgsText), MaxArgsText)
	}
	return n, nil
}

// fileOffset converts a link-time address to a file offset through the
// PT_LOAD segment that holds it (an executable one when exec is set).
func fileOffset(f *elf.File, addr uint64, exec bool) (uint64, bool) {
	for _, p := range f.Progs {
		if p.Type != elf.PT_LOAD || (exec && p.Flags&elf.PF_X == 0) {
			continue
		}
		if addr >= p.Vaddr && addr < p.Vaddr+p.Filesz {
			return addr - p.Vaddr + p.Off, true
		}
	}
	return 0, false
}

// symbolAddrs returns the address of each of names defined in f's .symtab
// or .dynsym: the first symbol of that name with a non-zero value and a
// section, .symtab first. Tables that cannot be read are skipped (an
// argument naming a symbol not found is reported as unsupported).
func symbolAddrs(f *elf.File, size int64, names map[string]bool) map[string]uint64 {
	addrs := map[string]uint64{}
	for _, typ := range []elf.SectionType{elf.SHT_SYMTAB, elf.SHT_DYNSYM} {
		_ = FindSymbols(f, size, typ, names, func(s *Symbol) bool {
			return s.Value != 0 && s.Section != elf.SHN_UNDEF
		}, func(s *Symbol) {
			if _, ok := addrs[s.Name]; !ok {
				addrs[s.Name] = s.Value
			}
		})
	}
	return addrs
}

// Find returns the sites of probe provider:name.
func (f *File) Find(provider, name string) []Probe {
	var out []Probe
	for _, p := range f.Probes {
		if p.Provider == provider && p.Name == name {
			out = append(out, p)
		}
	}
	return out
}

// Token returns s as it may appear in an error message: at most 64 bytes,
// anything but printable ASCII escaped, quoted when it is not a plain
// identifier ([A-Za-z0-9_.-]+). Probe names and argument strings come from
// the target file and go through it.
func Token(s string) string { return token(s) }

// Names returns the distinct "provider:name" of the file's probes, sorted,
// provider and name sanitized with Token (they are for messages).
func (f *File) Names() []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range f.Probes {
		n := token(p.Provider) + ":" + token(p.Name)
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

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

// String returns "provider:name@0xoffset".
func (p *Probe) String() string {
	return fmt.Sprintf("%s:%s@%#x", p.Provider, p.Name, p.Offset)
}

// File is the probe table of one ELF file.
type File struct {
	// Machine is the ELF machine (elf.EM_X86_64, elf.EM_AARCH64, ...);
	// argument operands are parsed in its assembler syntax.
	Machine elf.Machine
	Probes  []Probe
}

// Open reads the probes of the ELF file at path.
func Open(path string) (*File, error) {
	f, err := os.Open(path)
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

// NewFile reads the probes of the ELF file in r. A file without
// .note.stapsdt has no probes and is not an error.
func NewFile(r io.ReaderAt) (uf *File, err error) {
	// debug/elf panics on some malformed inputs; report them as errors.
	defer func() {
		if p := recover(); p != nil {
			uf, err = nil, fmt.Errorf("malformed ELF file: %v", p)
		}
	}()
	f, err := elf.NewFile(r)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	uf = &File{Machine: f.Machine}
	sec := f.Section(".note.stapsdt")
	if sec == nil {
		return uf, nil
	}
	data, err := sec.Data()
	if err != nil {
		return nil, fmt.Errorf("read .note.stapsdt: %w", err)
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
	syms := &symbols{f: f}
	bo := f.ByteOrder
	descs, err := stapsdtNotes(data, bo)
	if err != nil {
		return nil, err
	}
	for _, desc := range descs {
		p, err := parseNote(desc, bo, addrSize)
		if err != nil {
			return nil, fmt.Errorf(".note.stapsdt: %w", err)
		}
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
			return nil, fmt.Errorf("probe %s:%s: address %#x is in no executable segment", p.Provider, p.Name, p.PC)
		}
		p.Offset = off
		if p.Semaphore != 0 {
			off, ok := fileOffset(f, p.Semaphore, false)
			if !ok {
				return nil, fmt.Errorf("probe %s:%s: semaphore address %#x is in no loadable segment", p.Provider, p.Name, p.Semaphore)
			}
			p.SemaphoreOffset = off
		}
		p.Args = ParseArgs(f.Machine, p.ArgsText, p.PC, syms.lookup)
		uf.Probes = append(uf.Probes, p.Probe)
	}
	return uf, nil
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

// symbols resolves symbol names, loading the tables on first use (most
// probes name no symbol).
type symbols struct {
	f      *elf.File
	loaded bool
	addrs  map[string]uint64
}

func (s *symbols) lookup(name string) (uint64, bool) {
	if !s.loaded {
		s.loaded = true
		s.addrs = map[string]uint64{}
		for _, load := range []func() ([]elf.Symbol, error){s.f.Symbols, s.f.DynamicSymbols} {
			syms, _ := load()
			for _, sym := range syms {
				if sym.Value != 0 && sym.Section != elf.SHN_UNDEF {
					if _, ok := s.addrs[sym.Name]; !ok {
						s.addrs[sym.Name] = sym.Value
					}
				}
			}
		}
	}
	v, ok := s.addrs[name]
	return v, ok
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

// Names returns the distinct "provider:name" of the file's probes, sorted.
func (f *File) Names() []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range f.Probes {
		n := p.Provider + ":" + p.Name
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

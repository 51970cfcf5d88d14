// SPDX-License-Identifier: Apache-2.0

package loader

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/kernel-exporter/kernel_exporter/bounded"
	"github.com/kernel-exporter/kernel_exporter/usdt"
)

// Limits of a --btf.path file.
const (
	// MaxBTF bounds the BTF that cilium/ebpf reads from a --btf.path file:
	// the whole file when it is raw BTF, the .BTF section of an ELF
	// vmlinux. A distribution kernel's vmlinux BTF is about 5-8 MB.
	MaxBTF = 64 << 20 // 64 MiB: eight times a distribution BTF; parsed, a 256 MiB one took 1.2 GB
	// MaxBTFSymbols bounds the symbol table (.symtab) of an ELF vmlinux
	// and its string table, each: cilium/ebpf reads them whole, and makes
	// a Go value of each symbol (about 4 times the table's size in
	// memory). A vmlinux has about 150,000 symbols: 3.6 MB.
	MaxBTFSymbols = 16 << 20 // 16 MiB
)

// btfReadBudget bounds the bytes cilium/ebpf may read from an ELF
// --btf.path file, whatever it changes into after checkBTF: the .BTF
// section, the symbol and string tables, the header tables and the
// section name table, with room to spare.
const btfReadBudget = MaxBTF + 2*MaxBTFSymbols + 2*usdt.MaxHeaderTable + usdt.MaxStringTable + 1<<20

// btfMagic is the magic number of a raw BTF header.
const btfMagic = 0xeB9F

// checkBTF checks, before cilium/ebpf reads it, what a --btf.path file of
// size bytes will make it read. Raw BTF (magic 0xeB9F in either byte
// order): the header's type and string sections inside the file, and the
// file at most MaxBTF bytes (it is read whole). ELF: the headers within
// usdt's limits (usdt.ReadELF), each .BTF section at most MaxBTF bytes
// and inside the file, the symbol table and its string table at most
// MaxBTFSymbols bytes each. raw tells which it is. Anything else is
// refused. Errors never quote the file's bytes.
func checkBTF(r io.ReaderAt, size int64) (raw bool, err error) {
	var hdr [24]byte
	n, _ := r.ReadAt(hdr[:], 0)
	if n >= 4 && string(hdr[:4]) == elf.ELFMAG {
		return false, checkBTFELF(r, size)
	}
	var bo binary.ByteOrder
	switch {
	case n >= 2 && binary.LittleEndian.Uint16(hdr[:]) == btfMagic:
		bo = binary.LittleEndian
	case n >= 2 && binary.BigEndian.Uint16(hdr[:]) == btfMagic:
		bo = binary.BigEndian
	default:
		return false, errors.New("not a BTF file: neither raw BTF (magic 0xeB9F) nor ELF")
	}
	if n < len(hdr) {
		return true, fmt.Errorf("raw BTF: file of %d bytes is shorter than the 24-byte header", size)
	}
	hdrLen := uint64(bo.Uint32(hdr[4:]))
	typeOff, typeLen := uint64(bo.Uint32(hdr[8:])), uint64(bo.Uint32(hdr[12:]))
	strOff, strLen := uint64(bo.Uint32(hdr[16:])), uint64(bo.Uint32(hdr[20:]))
	if hdrLen < uint64(len(hdr)) || hdrLen > uint64(size) {
		return true, fmt.Errorf("raw BTF: header length %d is out of range (24 to the file's %d bytes)", hdrLen, size)
	}
	if hdrLen+typeOff+typeLen > uint64(size) {
		return true, fmt.Errorf("raw BTF: type section (%d bytes at offset %d) is past the end of the file (%d bytes)", typeLen, hdrLen+typeOff, size)
	}
	if hdrLen+strOff+strLen > uint64(size) {
		return true, fmt.Errorf("raw BTF: string section (%d bytes at offset %d) is past the end of the file (%d bytes)", strLen, hdrLen+strOff, size)
	}
	if size > MaxBTF {
		return true, fmt.Errorf("raw BTF of %d bytes, larger than the %s limit", size, bounded.Size(MaxBTF))
	}
	return true, nil
}

func checkBTFELF(r io.ReaderAt, size int64) error {
	ef, err := usdt.ReadELF(r)
	if err != nil {
		return err
	}
	defer ef.Close()
	inFile := func(s *elf.Section) bool {
		return s.Type == elf.SHT_NOBITS || s.Offset <= uint64(size) && s.FileSize <= uint64(size)-s.Offset
	}
	found := false
	for _, s := range ef.Sections {
		if s.Name != ".BTF" {
			continue
		}
		found = true
		if s.Size > MaxBTF {
			return fmt.Errorf("section .BTF: %d bytes, more than the %s limit", s.Size, bounded.Size(MaxBTF))
		}
		if !inFile(s) {
			return fmt.Errorf("section .BTF: %d bytes at offset %d are past the end of the file (%d bytes)", s.FileSize, s.Offset, size)
		}
	}
	if !found {
		return errors.New("ELF file without a .BTF section")
	}
	// cilium/ebpf reads the first symbol table and its string table whole.
	sym := ef.SectionByType(elf.SHT_SYMTAB)
	if sym == nil {
		return nil
	}
	tables := []*elf.Section{sym}
	if sym.Link > 0 && sym.Link < uint32(len(ef.Sections)) {
		tables = append(tables, ef.Sections[sym.Link])
	}
	for _, s := range tables {
		if s.Size > MaxBTFSymbols {
			return fmt.Errorf("section %s: %d bytes, more than the %s limit", usdt.Token(s.Name), s.Size, bounded.Size(MaxBTFSymbols))
		}
		if !inFile(s) {
			return fmt.Errorf("section %s: %d bytes at offset %d are past the end of the file (%d bytes)", usdt.Token(s.Name), s.FileSize, s.Offset, size)
		}
	}
	return nil
}

// budgetReader is an io.ReaderAt that fails once left bytes have been read.
type budgetReader struct {
	r    io.ReaderAt
	mu   sync.Mutex
	left int64
}

func (b *budgetReader) ReadAt(p []byte, off int64) (int, error) {
	b.mu.Lock()
	if int64(len(p)) > b.left {
		b.mu.Unlock()
		return 0, fmt.Errorf("read more than %s from the file", bounded.Size(btfReadBudget))
	}
	b.left -= int64(len(p))
	b.mu.Unlock()
	return b.r.ReadAt(p, off)
}

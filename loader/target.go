// SPDX-License-Identifier: Apache-2.0

package loader

import (
	"debug/elf"
	"errors"
	"fmt"

	"github.com/cilium/ebpf/link"

	"github.com/kernel-exporter/kernel_exporter/bounded"
	"github.com/kernel-exporter/kernel_exporter/usdt"
)

// uprobeTarget is an executable or shared library that uprobes attach to.
//
// cilium/ebpf's link.Executable opens the file by path to resolve symbols,
// with a plain open that blocks forever on a FIFO and parses whatever the
// path points at. So the loader never lets it: the file is opened and
// parsed here, through usdt.OpenTarget (bounded.Open: regular files of at
// most bounded.MaxTarget bytes, never blocking), and every uprobe is
// created with UprobeOptions.Address set, which bypasses cilium's symbol
// lookup. The kernel itself resolves the path again when the probe is
// created, and refuses anything but a regular file.
type uprobeTarget struct {
	path string
	what string
	ex   *link.Executable
	// syms holds the symbols looked up so far (each lookup scans the
	// symbol tables once, never holding them in memory).
	syms map[string]symbolResult
}

type targetSymbol struct {
	off, size uint64
}

type symbolResult struct {
	sym targetSymbol
	ok  bool
	err error
}

// openUprobeTarget checks that path is a regular file within the size
// limit and readies it for attaching. what names its role in errors
// ("uprobe target", "USDT target").
func openUprobeTarget(path, what string) (*uprobeTarget, error) {
	f, err := usdt.OpenTarget(path, what)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ef, err := usdt.ReadELF(f)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	ef.Close()
	if ef.Type != elf.ET_EXEC && ef.Type != elf.ET_DYN {
		return nil, fmt.Errorf("%s %s: not an executable or a shared library (ELF type %v)", what, path, ef.Type)
	}
	ex, err := link.OpenExecutable(path)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	return &uprobeTarget{path: path, what: what, ex: ex, syms: map[string]symbolResult{}}, nil
}

// address returns the file offset where a uprobe on symbol+offset goes,
// as cilium/ebpf would compute it: function symbols of .symtab and
// .dynsym (the last of the name, .dynsym after .symtab), converted through
// the executable PT_LOAD segment that holds them; offset must be inside
// the symbol. The symbol tables are scanned with usdt.FindSymbols: in
// chunks, at most usdt.MaxSymbols entries each, never read whole.
func (t *uprobeTarget) address(symbol string, offset uint64) (uint64, error) {
	r, seen := t.syms[symbol]
	if !seen {
		r.sym, r.ok, r.err = t.lookup(symbol)
		t.syms[symbol] = r
	}
	if r.err != nil {
		return 0, r.err
	}
	sym := r.sym
	if !r.ok {
		return 0, fmt.Errorf("symbol %s: %w", usdt.Token(symbol), link.ErrNoSymbol)
	}
	if sym.off == 0 {
		return 0, fmt.Errorf("cannot resolve %s library call %s: %w (give its file offset instead of a symbol)", t.path, usdt.Token(symbol), link.ErrNotSupported)
	}
	if offset >= sym.size {
		return 0, fmt.Errorf("offset %d is out of range of symbol %s (%d bytes)", offset, usdt.Token(symbol), sym.size)
	}
	return sym.off + offset, nil
}

// lookup finds the function symbol name in the target's symbol tables.
func (t *uprobeTarget) lookup(name string) (sym targetSymbol, found bool, err error) {
	f, size, err := bounded.OpenLimit(t.path, t.what, bounded.MaxTarget)
	if err != nil {
		return sym, false, err
	}
	defer f.Close()
	ef, err := usdt.ReadELF(f) // checked by openUprobeTarget
	if err != nil {
		return sym, false, fmt.Errorf("%s %s: %w", t.what, t.path, err)
	}
	defer ef.Close()
	names := map[string]bool{name: true}
	isFunc := func(s *usdt.Symbol) bool { return elf.ST_TYPE(s.Info) == elf.STT_FUNC }
	var last *usdt.Symbol
	keepLast := func(s *usdt.Symbol) {
		c := *s
		last = &c
	}
	if err := usdt.FindSymbols(ef, size, elf.SHT_SYMTAB, names, isFunc, keepLast); err != nil && !errors.Is(err, elf.ErrNoSymbols) {
		return sym, false, fmt.Errorf("%s %s: read symbols: %w", t.what, t.path, err)
	}
	if err := usdt.FindSymbols(ef, size, elf.SHT_DYNSYM, names, isFunc, keepLast); err != nil && !errors.Is(err, elf.ErrNoSymbols) {
		return sym, false, fmt.Errorf("%s %s: read dynamic symbols: %w", t.what, t.path, err)
	}
	if last == nil {
		return sym, false, nil
	}
	off := last.Value
	for _, p := range ef.Progs {
		if p.Type != elf.PT_LOAD || p.Flags&elf.PF_X == 0 {
			continue
		}
		if p.Vaddr <= last.Value && last.Value-p.Vaddr < p.Memsz {
			off = last.Value - p.Vaddr + p.Off
			break
		}
	}
	return targetSymbol{off: off, size: last.Size}, true, nil
}

package loader

import (
	"debug/elf"
	"errors"
	"fmt"

	"github.com/cilium/ebpf/link"

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
	// syms maps function symbols to file offsets, loaded on first use.
	syms   map[string]targetSymbol
	loaded bool
	err    error
}

type targetSymbol struct {
	off, size uint64
}

// openUprobeTarget checks that path is a regular file within the size
// limit and readies it for attaching. what names its role in errors
// ("uprobe target", "USDT target").
func openUprobeTarget(path, what string) (*uprobeTarget, error) {
	f, err := usdt.OpenTarget(path, what)
	if err != nil {
		return nil, err
	}
	f.Close()
	ex, err := link.OpenExecutable(path)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	return &uprobeTarget{path: path, what: what, ex: ex}, nil
}

// address returns the file offset where a uprobe on symbol+offset goes,
// as cilium/ebpf would compute it: function symbols of .symtab and
// .dynsym, converted through the executable PT_LOAD segment that holds
// them; offset must be inside the symbol.
func (t *uprobeTarget) address(symbol string, offset uint64) (uint64, error) {
	if !t.loaded {
		t.loaded = true
		t.syms, t.err = t.loadSymbols()
	}
	if t.err != nil {
		return 0, t.err
	}
	sym, ok := t.syms[symbol]
	if !ok {
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

func (t *uprobeTarget) loadSymbols() (syms map[string]targetSymbol, err error) {
	f, err := usdt.OpenTarget(t.path, t.what)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// Guard around a third-party parser: debug/elf may panic on a
	// malformed symbol table.
	defer func() {
		if p := recover(); p != nil {
			syms, err = nil, fmt.Errorf("%s %s: malformed ELF file (the ELF parser panicked)", t.what, t.path)
		}
	}()
	ef, err := usdt.ReadELF(f)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", t.what, t.path, err)
	}
	defer ef.Close()
	if ef.Type != elf.ET_EXEC && ef.Type != elf.ET_DYN {
		return nil, fmt.Errorf("%s %s: not an executable or a shared library (ELF type %v)", t.what, t.path, ef.Type)
	}
	all, err := ef.Symbols()
	if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
		return nil, fmt.Errorf("%s %s: read symbols: %w", t.what, t.path, usdtELFError(err))
	}
	dyn, err := ef.DynamicSymbols()
	if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
		return nil, fmt.Errorf("%s %s: read dynamic symbols: %w", t.what, t.path, usdtELFError(err))
	}
	all = append(all, dyn...)
	syms = make(map[string]targetSymbol)
	for _, s := range all {
		if elf.ST_TYPE(s.Info) != elf.STT_FUNC {
			continue
		}
		off := s.Value
		for _, p := range ef.Progs {
			if p.Type != elf.PT_LOAD || p.Flags&elf.PF_X == 0 {
				continue
			}
			if p.Vaddr <= s.Value && s.Value-p.Vaddr < p.Memsz {
				off = s.Value - p.Vaddr + p.Off
				break
			}
		}
		syms[s.Name] = targetSymbol{off: off, size: s.Size}
	}
	return syms, nil
}

// usdtELFError is a debug/elf error without the bytes it may quote.
func usdtELFError(err error) error {
	var fe *elf.FormatError
	if errors.As(err, &fe) {
		return errors.New("malformed ELF file")
	}
	return err
}

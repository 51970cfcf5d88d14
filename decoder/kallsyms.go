// SPDX-License-Identifier: Apache-2.0

package decoder

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/kernel-exporter/kernel_exporter/bounded"
)

// kallsyms is the kernel symbol table of <ProcRoot>/kallsyms, sorted by
// address, with one name per address. It is immutable once loaded, so
// lookups need no lock.
type kallsyms struct {
	addrs []uint64 // ascending, unique
	ends  []uint32 // names[ends[i-1]:ends[i]] is the name at addrs[i]
	names []byte
	// ref: names keep their module ("nf_hook_slow\t[nf_tables]") and an
	// address above the last symbol is the last symbol's, as
	// cloudflare/ebpf_exporter's kallsyms reader has them (Env.Compat).
	ref bool
}

// kallsyms returns the Env's symbol table, reading it on first use. A failed
// read is remembered: the file does not change while the exporter runs,
// except for modules, which a restart (or a new Env) picks up.
//
// The table leaves out the padding before each function and the kCFI
// preambles (see isPadding) unless e.Compat: no instruction pointer or
// function pointer is in them, and on Linux 6.2+ they are half of the
// table's symbols and names (57,851 of 122,166 symbols, 1.56 of 2.97 MB of
// names on Linux 6.18).
func (e *Env) kallsyms() (*kallsyms, error) {
	e.ksymsOnce.Do(func() {
		file := e.procPath("kallsyms")
		data, err := bounded.ReadFile(file, "kernel symbol table", bounded.MaxKallsyms)
		if err != nil {
			e.ksymsErr = err
			return
		}
		skip := isPadding
		if e.Compat {
			skip = nil // the reference lists every symbol
		}
		e.ksyms, e.ksymsErr = parseKallsymsSkip(data, e.Compat, skip)
		if e.ksymsErr != nil {
			e.ksymsErr = fmt.Errorf("%s: %w", file, e.ksymsErr)
		}
	})
	return e.ksyms, e.ksymsErr
}

// isPadding tells the symbols that name no code a frame or a function
// pointer can be in: the padding before each function (__pfx_, Linux 6.2+
// with CONFIG_FUNCTION_PADDING_CFI) and the kCFI preambles (__cfi_, Linux
// 6.1+ with CONFIG_CFI_CLANG). An address in one resolves to the function
// before it.
func isPadding(name []byte) bool {
	return bytes.HasPrefix(name, []byte("__pfx_")) || bytes.HasPrefix(name, []byte("__cfi_"))
}

// Bounds of a kallsyms table (see parseKallsyms).
const (
	maxSymbolName = 1024
	maxSymbols    = 4 << 20
)

// errNoAddresses is returned for a kallsyms file whose addresses are all
// zero, as the kernel shows them to readers without CAP_SYSLOG.
var errNoAddresses = errors.New("all symbol addresses are zero (kernel.kptr_restrict, or not running as root?)")

// parseKallsyms reads lines of the form
//
//	ffffffff821fb620 T schedule
//	ffffffffc0a01000 t nf_hook_slow	[nf_tables]
//
// by hand (the file has ~200k lines). Absolute (a, A) and undefined (U)
// symbols are skipped; so are malformed lines. When several symbols share an
// address, the name kept is the first global one with the fewest leading
// underscores (schedule over __schedule_alias).
//
// Memory is bounded by the input: data must be at most bounded.MaxKallsyms
// bytes, names longer than maxSymbolName bytes are skipped (the kernel's
// KSYM_NAME_LEN is 512), and at most maxSymbols symbols are kept (a real
// table has a few hundred thousand); more is an error. Each symbol costs 16
// bytes while parsing and 12 plus its name in the table.
func parseKallsyms(data []byte) (*kallsyms, error) { return parseKallsymsAs(data, false) }

// parseKallsymsAs is parseKallsyms, with the reference's names and lookup
// when ref is set (see kallsyms.ref): a module symbol's name is then the
// rest of its line, tab and module included.
func parseKallsymsAs(data []byte, ref bool) (*kallsyms, error) {
	return parseKallsymsSkip(data, ref, nil)
}

// parseKallsymsSkip is parseKallsymsAs, leaving out the symbols whose name
// skip returns true for (nil: none).
func parseKallsymsSkip(data []byte, ref bool, skip func(name []byte) bool) (*kallsyms, error) {
	if len(data) > bounded.MaxKallsyms {
		return nil, fmt.Errorf("%d bytes, more than the %s limit", len(data), bounded.Size(bounded.MaxKallsyms))
	}
	type sym struct {
		addr  uint64
		start uint32 // of the name in data
		len   uint16 // of the name
		rank  uint16 // lower is better
	}
	syms := make([]sym, 0, min(bytes.Count(data, []byte{'\n'})+1, maxSymbols))
	zeros := 0
	for off := 0; off < len(data); {
		line := data[off:]
		lineStart := off
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			line = line[:i]
			off += i + 1
		} else {
			off = len(data)
		}
		addr, n := parseHexPrefix(line)
		if n == 0 || n+3 >= len(line) || line[n] != ' ' || line[n+2] != ' ' {
			continue
		}
		typ := line[n+1]
		if typ == 'a' || typ == 'A' || typ == 'U' {
			continue
		}
		if addr == 0 {
			zeros++
			continue
		}
		name := line[n+3:]
		if i := bytes.IndexByte(name, '\t'); i >= 0 && !ref {
			name = name[:i]
		}
		if len(name) == 0 || len(name) > maxSymbolName || (skip != nil && skip(name)) {
			continue
		}
		var rank uint16
		for int(rank) < len(name) && name[rank] == '_' {
			rank++
		}
		if typ >= 'a' && typ <= 'z' {
			rank += 1 << 15 // local symbols lose to global ones
		}
		if len(syms) == maxSymbols {
			return nil, fmt.Errorf("more than %d symbols", maxSymbols)
		}
		syms = append(syms, sym{addr: addr, start: uint32(lineStart + n + 3), len: uint16(len(name)), rank: rank})
	}
	if len(syms) == 0 {
		if zeros > 0 {
			return nil, errNoAddresses
		}
		return nil, errors.New("no symbols")
	}
	// Stable order for equal addresses: by rank, then file order (the
	// slice is in file order, and SortStableFunc keeps it).
	slices.SortStableFunc(syms, func(a, b sym) int {
		if c := cmp.Compare(a.addr, b.addr); c != 0 {
			return c
		}
		return cmp.Compare(a.rank, b.rank)
	})
	k := &kallsyms{
		ref:   ref,
		addrs: make([]uint64, 0, len(syms)),
		ends:  make([]uint32, 0, len(syms)),
	}
	var size int
	for i, s := range syms {
		if i == 0 || s.addr != syms[i-1].addr {
			size += int(s.len)
		}
	}
	k.names = make([]byte, 0, size)
	for i, s := range syms {
		if i > 0 && s.addr == syms[i-1].addr {
			continue
		}
		k.addrs = append(k.addrs, s.addr)
		k.names = append(k.names, data[s.start:s.start+uint32(s.len)]...)
		k.ends = append(k.ends, uint32(len(k.names)))
	}
	return k, nil
}

// lookup returns the name of the symbol that contains addr: the one at addr
// or the closest one before it. Addresses below the first symbol or above
// the last one (unless k.ref) are not found. The result is a read-only
// slice of the table.
func (k *kallsyms) lookup(addr uint64) ([]byte, bool) {
	i := sort.Search(len(k.addrs), func(i int) bool { return k.addrs[i] > addr }) - 1
	if i < 0 || (!k.ref && i == len(k.addrs)-1 && k.addrs[i] != addr) {
		return nil, false
	}
	var start uint32
	if i > 0 {
		start = k.ends[i-1]
	}
	end := k.ends[i]
	return k.names[start:end:end], true
}

// parseHexPrefix parses the hex digits at the start of b (at most 16) and
// returns the value and how many bytes it used; 0 bytes if b does not start
// with a hex digit.
func parseHexPrefix(b []byte) (uint64, int) {
	var v uint64
	n := 0
	for n < len(b) && n < 16 {
		c := b[n]
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return v, n
		}
		v = v<<4 | uint64(c)
		n++
	}
	return v, n
}

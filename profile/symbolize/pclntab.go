// SPDX-License-Identifier: Apache-2.0

package symbolize

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
)

// Magic numbers of the Go runtime's function table (.gopclntab), by the
// Go version that introduced its layout (internal/abi.PCLnTabMagic).
const (
	pclnGo12  = 0xfffffffb
	pclnGo116 = 0xfffffffa
	pclnGo118 = 0xfffffff0
	pclnGo120 = 0xfffffff1
)

var errPcln = errors.New("malformed .gopclntab")

// pclnSymbols adds to set the functions (entry address, end, name) of a
// Go binary's .gopclntab, r of size bytes, whose text starts at textStart.
// It reads the header and the function table, then each function's
// record and name through windows (both tables are in function order), not
// the whole section as debug/gosym does (which also builds every
// function's record, file and line tables: 10 times the memory). Go 1.2 to
// 1.15 tables keep names anywhere in the section, which is then read whole
// (at most MaxSectionRead bytes).
func pclnSymbols(set *symbolSet, r io.ReaderAt, size int64, textStart uint64) error {
	var hdr [8 + 8*8]byte
	n, _ := r.ReadAt(hdr[:], 0)
	if n < 16 || hdr[4] != 0 || hdr[5] != 0 || (hdr[7] != 4 && hdr[7] != 8) {
		return errPcln
	}
	var order binary.ByteOrder = binary.LittleEndian
	magic := order.Uint32(hdr[:])
	switch {
	case magic == pclnGo12 || magic == pclnGo116 || magic == pclnGo118 || magic == pclnGo120:
	default:
		order = binary.BigEndian
		magic = order.Uint32(hdr[:])
		if magic != pclnGo12 && magic != pclnGo116 && magic != pclnGo118 && magic != pclnGo120 {
			return errPcln
		}
	}
	ptr := int64(hdr[7])
	word := func(i int64) uint64 {
		off := 8 + i*ptr
		if off+ptr > int64(n) {
			return ^uint64(0)
		}
		if ptr == 4 {
			return uint64(order.Uint32(hdr[off:]))
		}
		return order.Uint64(hdr[off:])
	}
	pr := &window{r: r, size: size}
	var nfunc, names, namesEnd, funcdata uint64
	field := ptr // functab entries: pc and record offset
	switch magic {
	case pclnGo118, pclnGo120:
		nfunc, names, namesEnd, funcdata, field = word(0), word(3), word(4), word(7), 4
	case pclnGo116:
		nfunc, names, namesEnd, funcdata = word(0), word(2), word(3), word(6)
	case pclnGo12:
		// Names are anywhere: the whole section is the name table.
		nfunc, names, namesEnd, funcdata = word(0), 0, uint64(size), uint64(8+ptr)
		if size > MaxSectionRead {
			return fmt.Errorf("%w: %d bytes", errPcln, size)
		}
	}
	if nfunc == 0 || nfunc > MaxSymbols || names > namesEnd || namesEnd > uint64(size) || namesEnd-names > MaxSectionRead || funcdata >= uint64(size) {
		return errPcln
	}
	tabLen := (2*int64(nfunc) + 1) * field
	tab := make([]byte, tabLen)
	if _, err := r.ReadAt(tab, int64(funcdata)); err != nil {
		return errPcln
	}
	nameTab := &window{r: io.NewSectionReader(r, int64(names), int64(namesEnd-names)), size: int64(namesEnd - names)}
	set.names.hint = int(min(namesEnd-names, nameChunk))
	get := func(b []byte) uint64 {
		if field == 4 {
			return uint64(order.Uint32(b))
		}
		return order.Uint64(b)
	}
	set.syms = slices.Grow(set.syms, int(nfunc))
	for i := int64(0); i < int64(nfunc); i++ {
		entry := get(tab[2*i*field:])
		off := get(tab[(2*i+1)*field:])
		end := get(tab[(2*i+2)*field:])
		if field == 4 { // Go 1.18+: offsets from the start of the text
			entry += textStart
			end += textStart
		}
		// The record starts with the entry (4 bytes, or a pointer before
		// 1.18), then the name's offset in the name table.
		rec := pr.at(int64(funcdata)+int64(off)+field, 4)
		if rec == nil || end < entry {
			continue
		}
		name := nameTab.cstring(int64(order.Uint32(rec)))
		if len(name) == 0 {
			continue
		}
		if !set.add(entry, end-entry, name, 0) {
			break // names full: keep what was read
		}
	}
	return nil
}

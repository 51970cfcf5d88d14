package symbolize

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Magic numbers of the Go runtime's function table (.gopclntab), by the
// Go version that introduced its layout (internal/abi.PCLnTabMagic).
const (
	pclnGo12  = 0xfffffffb
	pclnGo116 = 0xfffffffa
	pclnGo118 = 0xfffffff0
	pclnGo120 = 0xfffffff1
)

// pclnWindow is how much of the table a read brings in; the function
// records are read in order, a window at a time.
const pclnWindow = 64 << 10

var errPcln = errors.New("malformed .gopclntab")

// pclnSymbols reads the functions (entry address, end, name: an offset in
// the name table it returns) of a Go binary's .gopclntab, r of size bytes, whose text starts at textStart.
// It reads the header, the function table, the function name table and
// the 8 bytes of each function record it needs, a window at a time,
// rather than the whole section with debug/gosym (which builds every
// function's record, file and line tables: 10 times the memory). Go 1.2 to
// 1.15 tables keep names anywhere in the section, which is then read whole
// (at most MaxSectionRead bytes).
func pclnSymbols(r io.ReaderAt, size int64, textStart uint64) ([]symbol, []byte, error) {
	var hdr [8 + 8*8]byte
	n, _ := r.ReadAt(hdr[:], 0)
	if n < 16 || hdr[4] != 0 || hdr[5] != 0 || (hdr[7] != 4 && hdr[7] != 8) {
		return nil, nil, errPcln
	}
	var order binary.ByteOrder = binary.LittleEndian
	magic := order.Uint32(hdr[:])
	switch {
	case magic == pclnGo12 || magic == pclnGo116 || magic == pclnGo118 || magic == pclnGo120:
	default:
		order = binary.BigEndian
		magic = order.Uint32(hdr[:])
		if magic != pclnGo12 && magic != pclnGo116 && magic != pclnGo118 && magic != pclnGo120 {
			return nil, nil, errPcln
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
	pr := &pclnReader{r: r, size: size}
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
			return nil, nil, fmt.Errorf("%w: %d bytes", errPcln, size)
		}
	}
	if nfunc == 0 || nfunc > MaxSymbols || names > namesEnd || namesEnd > uint64(size) || namesEnd-names > MaxSectionRead || funcdata >= uint64(size) {
		return nil, nil, errPcln
	}
	tabLen := (2*int64(nfunc) + 1) * field
	tab := make([]byte, tabLen)
	if _, err := r.ReadAt(tab, int64(funcdata)); err != nil {
		return nil, nil, errPcln
	}
	nameTab := make([]byte, namesEnd-names)
	if _, err := r.ReadAt(nameTab, int64(names)); err != nil && !(errors.Is(err, io.EOF) && len(nameTab) == 0) {
		return nil, nil, errPcln
	}
	get := func(b []byte) uint64 {
		if field == 4 {
			return uint64(order.Uint32(b))
		}
		return order.Uint64(b)
	}
	syms := make([]symbol, 0, nfunc)
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
		nameOff := order.Uint32(rec)
		if uint64(nameOff) >= uint64(len(nameTab)) {
			continue
		}
		n := cstringLen(nameTab, nameOff)
		if n == 0 {
			continue
		}
		syms = append(syms, symbol{addr: entry, size: end - entry, off: nameOff, n: uint32(n)})
	}
	return syms, nameTab, nil
}

// pclnReader reads small pieces of a section through a window.
type pclnReader struct {
	r     io.ReaderAt
	size  int64
	start int64
	buf   []byte
}

// at returns n bytes at off, nil when they are outside the section.
func (p *pclnReader) at(off, n int64) []byte {
	if off < 0 || n > pclnWindow || off+n > p.size {
		return nil
	}
	if off < p.start || off+n > p.start+int64(len(p.buf)) {
		if p.buf == nil {
			p.buf = make([]byte, pclnWindow)
		}
		p.buf = p.buf[:min(pclnWindow, p.size-off)]
		m, err := p.r.ReadAt(p.buf, off)
		if m < len(p.buf) && err != nil {
			p.buf = p.buf[:m]
		}
		p.start = off
		if int64(m) < n {
			return nil
		}
	}
	return p.buf[off-p.start : off-p.start+n]
}

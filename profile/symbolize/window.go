// SPDX-License-Identifier: Apache-2.0

package symbolize

import (
	"bytes"
	"io"
)

// windowSize is how much of a section one read brings in.
const windowSize = 64 << 10

// window reads small pieces of a section (symbol names, function records)
// through a buffer of windowSize bytes, so that a table read in order costs
// one read per window and no copy of the whole section. Reads out of
// order cost a read each: after more than twice the reads an ordered pass
// would take (plus 64), the whole section is read once instead (at most
// MaxSectionRead bytes; beyond that, windows go on).
type window struct {
	r     io.ReaderAt
	size  int64
	start int64
	buf   []byte
	reads int
	whole bool
}

// at returns n bytes (at most windowSize) at off, nil when they are
// outside the section or cannot be read. The bytes are valid until the
// next call.
func (w *window) at(off, n int64) []byte {
	if off < 0 || n > windowSize || off+n > w.size {
		return nil
	}
	if off >= w.start && off+n <= w.start+int64(len(w.buf)) {
		return w.buf[off-w.start : off-w.start+n]
	}
	w.reads++
	if !w.whole && w.reads > 2*int(w.size/windowSize)+64 && w.size <= MaxSectionRead {
		buf := make([]byte, w.size)
		if m, _ := w.r.ReadAt(buf, 0); int64(m) == w.size {
			w.buf, w.start, w.whole = buf, 0, true
			return w.buf[off : off+n]
		}
	}
	if w.whole || cap(w.buf) < windowSize {
		w.buf, w.whole = make([]byte, windowSize), false
	}
	w.buf = w.buf[:min(windowSize, w.size-off)]
	m, _ := w.r.ReadAt(w.buf, off)
	w.buf, w.start = w.buf[:m], off
	if int64(m) < n {
		return nil
	}
	return w.buf[:n]
}

// cstring returns the NUL-terminated string at off, cut to MaxSymbolName
// bytes; nil when off is outside the section. Valid until the next call.
func (w *window) cstring(off int64) []byte {
	if off < 0 || off >= w.size {
		return nil
	}
	b := w.at(off, min(MaxSymbolName+1, w.size-off))
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return b[:i]
	}
	return b[:min(len(b), MaxSymbolName)]
}

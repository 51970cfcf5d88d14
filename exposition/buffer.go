// SPDX-License-Identifier: Apache-2.0

package exposition

import (
	"io"
	"sync"
	"unicode/utf8"
)

const (
	// flushAt is the buffered size at which a writer hands its bytes to
	// the destination: writers check it after each series.
	flushAt = 32 << 10
	// bufCap is the capacity a pooled buffer starts with; keepCap the
	// largest one put back in the pool (a series with huge label values
	// may grow a buffer beyond it once).
	bufCap  = 64 << 10
	keepCap = 1 << 20
)

// buffer appends bytes to be written to w in chunks of about flushAt. The
// first error of w sticks: later flushes write nothing and report it.
// It implements the io.Writer, io.StringWriter, io.ByteWriter and WriteRune
// methods that expfmt's encoders use directly, so gathered families go
// through the same buffer.
type buffer struct {
	w   io.Writer
	buf []byte
	err error

	// Scratch space reused across families: the label values and the
	// escaped label pairs of the current series, and the formatted
	// `le="…"` pairs of a histogram's bounds (leEnd[k] is the end of
	// bound k's pair in le).
	values []string
	labels []byte
	le     []byte
	leEnd  []int
}

var bufferPool = sync.Pool{New: func() any {
	return &buffer{buf: make([]byte, 0, bufCap)}
}}

func getBuffer(w io.Writer) *buffer {
	b := bufferPool.Get().(*buffer)
	b.w, b.err = w, nil
	b.buf = b.buf[:0]
	return b
}

func putBuffer(b *buffer) {
	b.w = nil
	clear(b.values[:cap(b.values)]) // they point into a snapshot: let it go
	if cap(b.buf) > keepCap || cap(b.labels) > keepCap {
		return
	}
	bufferPool.Put(b)
}

// flush writes the buffered bytes to w and empties the buffer; it returns
// the first error w returned, now or before.
func (b *buffer) flush() error {
	if b.err == nil && len(b.buf) > 0 {
		_, b.err = b.w.Write(b.buf)
	}
	b.buf = b.buf[:0]
	return b.err
}

// check flushes when the buffer holds flushAt bytes or more, and returns
// the writer's error.
func (b *buffer) check() error {
	if len(b.buf) >= flushAt {
		return b.flush()
	}
	return b.err
}

func (b *buffer) Write(p []byte) (int, error) {
	b.buf = append(b.buf, p...)
	return len(p), b.check()
}

func (b *buffer) WriteString(s string) (int, error) {
	b.buf = append(b.buf, s...)
	return len(s), b.check()
}

func (b *buffer) WriteByte(c byte) error {
	b.buf = append(b.buf, c)
	return b.check()
}

func (b *buffer) WriteRune(r rune) (int, error) {
	n := len(b.buf)
	b.buf = utf8.AppendRune(b.buf, r)
	return len(b.buf) - n, b.check()
}

// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"encoding/binary"
	"unsafe"
)

// A label set is stored as one record of bytes: its length (uvarint), then
// each label value as its length (uvarint) and its bytes. Two label sets
// are equal when their records are, whatever bytes the values hold, so the
// record is also the key that finds a label set's series.
//
// Records live in a labelArena: chunks of bytes that are only ever
// appended to, never overwritten, so that the snapshots of past reads can
// keep pointing into them (label values are strings over the chunks'
// bytes, not copies) while later reads append. A label set is found by a
// labelRef: the chunk's index in the high 32 bits, the record's offset in
// the chunk in the low 32 bits. The arena holds no pointers but the
// chunks', so the Go GC does not scan the label sets of a million series;
// a snapshot keeps alive only its own list of chunks.

type labelRef uint64

// Chunk sizes: the first chunk of a metric is small (a metric of a few
// series takes a few hundred bytes), each next one twice the last, up to
// maxChunk. A record longer than a chunk gets one of its own.
const (
	minChunk = 256
	maxChunk = 256 << 10
)

// labelArena is the label sets of one metric.
type labelArena struct {
	chunks [][]byte
	// live is the bytes of the records still in use, used those of all
	// records appended: compact rebuilds the arena when most are garbage.
	live, used int
}

// appendRecord appends the record of values to b.
func appendRecord(b []byte, values []string) []byte {
	n := 0
	for _, v := range values {
		n += uvarintLen(len(v)) + len(v)
	}
	b = binary.AppendUvarint(b, uint64(n))
	for _, v := range values {
		b = binary.AppendUvarint(b, uint64(len(v)))
		b = append(b, v...)
	}
	return b
}

func uvarintLen(n int) int {
	l := 1
	for ; n >= 0x80; n >>= 7 {
		l++
	}
	return l
}

// put appends a record (as appendRecord builds it) and returns its ref.
func (a *labelArena) put(rec []byte) labelRef {
	last := len(a.chunks) - 1
	if last < 0 || len(a.chunks[last])+len(rec) > cap(a.chunks[last]) {
		size := minChunk
		if last >= 0 {
			size = min(2*cap(a.chunks[last]), maxChunk)
		}
		a.chunks = append(a.chunks, make([]byte, 0, max(size, len(rec))))
		last++
	}
	c := a.chunks[last]
	ref := labelRef(uint64(last)<<32 | uint64(len(c)))
	a.chunks[last] = append(c, rec...)
	a.live += len(rec)
	a.used += len(rec)
	return ref
}

// release marks the record at ref as garbage.
func (a *labelArena) release(ref labelRef) {
	a.live -= len(record(a.chunks, ref))
}

// view returns the chunks of the arena as they are now, for a snapshot:
// later puts may append to the last chunk's array beyond the view's
// length, never inside it.
func (a *labelArena) view() [][]byte {
	return append([][]byte(nil), a.chunks...)
}

// record returns the whole record (with its length) at ref in chunks.
func record(chunks [][]byte, ref labelRef) []byte {
	c := chunks[ref>>32][uint32(ref):]
	n, k := binary.Uvarint(c)
	return c[:k+int(n)]
}

// appendValues appends the label values of the record at ref to dst: n
// values, strings over the chunk's bytes (never copied, never changed).
func appendValues(dst []string, chunks [][]byte, ref labelRef, n int) []string {
	c := chunks[ref>>32][uint32(ref):]
	_, k := binary.Uvarint(c)
	c = c[k:]
	for range n {
		l, k := binary.Uvarint(c)
		c = c[k:]
		if l == 0 {
			dst = append(dst, "")
			continue
		}
		dst = append(dst, unsafe.String(&c[0], int(l)))
		c = c[l:]
	}
	return dst
}

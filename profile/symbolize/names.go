// SPDX-License-Identifier: Apache-2.0

package symbolize

// nameChunk is the size of the chunks a nameStore keeps names in.
const nameChunk = 64 << 10

// maxNameBytes bounds the names of one file's table: a library with more
// (libLLVM's .dynsym holds tens of MB of C++ names) keeps the functions
// read until then; the others' frames show as module+0xoffset (symbols
// have sizes: an address is never given the name of another function).
const maxNameBytes = 8 << 20

// nameStore keeps the names of a table one after the other in chunks of
// nameChunk bytes, allocated as they fill: no chunk is ever copied to
// grow (a single growing slice allocates twice its final size on the way),
// and a name is found by its position: chunk<<16 | offset.
type nameStore struct {
	chunks [][]byte
	size   int
	hint   int // capacity of the first chunk (a small table's whole size)
}

// add stores name (at most MaxSymbolName bytes) and returns its position;
// false when the store holds maxNameBytes already.
func (s *nameStore) add(name []byte) (uint32, bool) {
	if s.size+len(name) > maxNameBytes {
		return 0, false
	}
	n := len(s.chunks)
	if n == 0 || len(s.chunks[n-1])+len(name) > cap(s.chunks[n-1]) {
		c := nameChunk
		if n == 0 && s.hint > 0 && s.hint < nameChunk {
			c = max(s.hint, len(name))
		}
		s.chunks = append(s.chunks, make([]byte, 0, c))
		n++
	}
	last := s.chunks[n-1]
	pos := uint32(n-1)<<16 | uint32(len(last))
	s.chunks[n-1] = append(last, name...)
	s.size += len(name)
	return pos, true
}

// get returns the name of n bytes at pos (read-only).
func (s *nameStore) get(pos uint32, n uint16) []byte {
	c := s.chunks[pos>>16]
	off := pos & 0xffff
	return c[off : off+uint32(n) : off+uint32(n)]
}

// trim gives back the unused end of the last chunk.
func (s *nameStore) trim() {
	if n := len(s.chunks); n > 0 && cap(s.chunks[n-1])-len(s.chunks[n-1]) > 4096 {
		s.chunks[n-1] = append([]byte(nil), s.chunks[n-1]...)
	}
}

// bytes is the memory the store holds.
func (s *nameStore) bytes() int {
	n := 24 * len(s.chunks)
	for _, c := range s.chunks {
		n += cap(c)
	}
	return n
}

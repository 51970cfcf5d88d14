// SPDX-License-Identifier: Apache-2.0

package collector

import "math/bits"

// idTable is an open-addressing hash index of ids (int32 ≥ 0) whose keys
// the caller keeps (map keys in readState's entries, label sets in its
// arena): a slot holds 32 bits of the key's hash and the id, 8 bytes,
// and the table itself holds no pointers. The slot of a hash is chosen by
// 32 bits of it, mixed, and probed linearly; the same 32 bits skip most
// unequal keys without reading them. It grows at 3/4 full, and a
// removal shifts the following slots back (no tombstones), so that a
// table whose keys come and go never fills up with dead slots.
//
// A Go map[string]int32 costs a string (header and bytes) per key on top
// of the slot; this one only the slot.
type idTable struct {
	slots []uint64 // hash low 32 bits << 32 | id+1; 0: empty
	n     int
	shift uint     // 64 - log2(len(slots))
	h     *offHeap // where large slot arrays live (nil: the Go heap)
}

func (t *idTable) len() int { return t.n }

// find returns the id whose key has hash h and for which eq is true, or -1.
func (t *idTable) find(h uint64, eq func(id int32) bool) int32 {
	if t.n == 0 {
		return -1
	}
	mask := len(t.slots) - 1
	tag := uint64(uint32(h)) << 32
	for i := t.homeOf(tag); ; i = (i + 1) & mask {
		s := t.slots[i]
		if s == 0 {
			return -1
		}
		if s&^(1<<32-1) == tag {
			if id := int32(uint32(s)) - 1; eq(id) {
				return id
			}
		}
	}
}

// insert adds id under hash h; the key must not be in the table.
func (t *idTable) insert(h uint64, id int32) {
	if (t.n+1)*4 > len(t.slots)*3 {
		t.grow()
	}
	t.place(uint64(uint32(h))<<32 | uint64(id+1))
	t.n++
}

// place puts a slot's value in the first empty slot from its home.
func (t *idTable) place(s uint64) {
	mask := len(t.slots) - 1
	i := t.homeOf(s)
	for t.slots[i] != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = s
}

// homeOf returns the first slot probed for a slot's value (or a hash's
// tag, its low 32 bits shifted up): the high bits of the tag multiplied
// by a large odd constant (Fibonacci hashing), so that the home depends on
// every bit the table keeps.
func (t *idTable) homeOf(s uint64) int { return int((s >> 32) * 0x9e3779b97f4a7c15 >> t.shift) }

// grow doubles the table (or makes its first one).
func (t *idTable) grow() {
	old := t.slots
	size := max(2*len(old), 8)
	t.slots = makeOff[uint64](t.h, size)
	t.shift = uint(64 - bits.TrailingZeros(uint(size)))
	for _, s := range old {
		if s != 0 {
			t.place(s)
		}
	}
	releaseOff(t.h, old)
}

// remove deletes id, whose key has hash h, from the table.
func (t *idTable) remove(h uint64, id int32) {
	if t.n == 0 {
		return
	}
	mask := len(t.slots) - 1
	want := uint64(uint32(h))<<32 | uint64(id+1)
	i := t.homeOf(want)
	for t.slots[i] != want {
		if t.slots[i] == 0 {
			return
		}
		i = (i + 1) & mask
	}
	// Shift back the slots after i whose home is at or before i (in
	// probe order), so that every key stays reachable from its home.
	for j := (i + 1) & mask; t.slots[j] != 0; j = (j + 1) & mask {
		if home := t.homeOf(t.slots[j]); (j-home)&mask >= (j-i)&mask {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i] = 0
	t.n--
}

// reserve empties the table and sizes it for n ids.
func (t *idTable) reserve(n int) {
	size := 8
	for size*3 < (n+1)*4 {
		size *= 2
	}
	releaseOff(t.h, t.slots)
	t.slots = makeOff[uint64](t.h, size)
	t.shift = uint(64 - bits.TrailingZeros(uint(size)))
	t.n = 0
}

// regionSort returns v, values whose high 32 bits are a hash as the table
// keeps it (see insert), ordered by the region of 512 slots (4 KiB) of the
// table their home lies in: inserting them in that order touches the table
// one region after the other instead of at random, so that a table larger
// than the CPU's caches fills at the speed of memory. Both passes over v
// read it in order, and the writes go to one cursor per region.
func (t *idTable) regionSort(v []uint64) []uint64 {
	log := 64 - int(t.shift)
	rb := max(log-9, 0) // bits of the region number
	count := make([]int, 1<<rb+1)
	for _, x := range v {
		count[t.homeOf(x)>>(log-rb)+1]++
	}
	for i := 1; i < len(count); i++ {
		count[i] += count[i-1]
	}
	out := make([]uint64, len(v))
	for _, x := range v {
		r := t.homeOf(x) >> (log - rb)
		out[count[r]] = x
		count[r]++
	}
	return out
}

// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"slices"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The slabs of a metric's read state (keys, series, their tables) hold no
// pointers and are touched only by the metric's reads: none of their
// memory is ever handed to a snapshot. Once a slab is larger than
// offHeapMin, it lives in memory mapped outside the Go heap:
//
//   - it grows with mremap, which moves pages instead of copying them, so a
//     first read that fills a million keys neither copies its slabs as
//     they double nor leaves the old copies behind as garbage;
//   - the Go GC does not count it: its heap goal (twice the live heap) is
//     set by what the heap really holds (label arenas, snapshots), and the
//     process does not grow to twice the size of its decode cache, with or
//     without GOMEMLIMIT.
//
// An offHeap records the mappings of one read state, and unmaps them all
// when its metric is collected (a runtime cleanup, see New): never while a
// read may run. Smaller slabs stay on the Go heap, so that a metric of a
// few series does not take a page per slab.

// offHeapMin is the size from which a slab is mapped outside the heap.
const offHeapMin = 64 << 10

// offHeap is the set of mappings of one read state, by base address.
type offHeap struct {
	maps map[uintptr][]byte
}

func newOffHeap() *offHeap { return &offHeap{maps: map[uintptr][]byte{}} }

// growOff returns s with room for n more elements, doubling its capacity
// when it is full: on the Go heap while it is small, then in a mapping of
// h. T must hold no pointers.
func growOff[T any](h *offHeap, s []T, n int) []T {
	return growMap(h, s, n, 0)
}

// growMap is growOff with extra mmap flags for a new mapping.
func growMap[T any](h *offHeap, s []T, n, flags int) []T {
	if len(s)+n <= cap(s) {
		return s
	}
	var zero T
	size := int(unsafe.Sizeof(zero))
	want := max(len(s)+n, 2*cap(s))
	if want*size < offHeapMin || h == nil {
		return slices.Grow(s, want-len(s))
	}
	bytes := (want*size + unix.Getpagesize() - 1) &^ (unix.Getpagesize() - 1)
	var mem []byte
	var err error
	if old, mapped := mappingOf(h, s); mapped {
		mem, err = unix.Mremap(old, bytes, unix.MREMAP_MAYMOVE)
		if err == nil {
			delete(h.maps, uintptr(unsafe.Pointer(&old[0])))
		}
	} else {
		mem, err = unix.Mmap(-1, 0, bytes, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE|flags)
		if err == nil && len(s) > 0 {
			copy(mem, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*size))
		}
	}
	if err != nil {
		// Out of address space or mappings: the Go heap will do.
		return slices.Grow(s, want-len(s))
	}
	h.maps[uintptr(unsafe.Pointer(&mem[0]))] = mem
	return unsafe.Slice((*T)(unsafe.Pointer(&mem[0])), len(mem)/size)[:len(s)]
}

// makeOff returns a slab of n zero elements (see growOff), to be filled
// at once: a mapping's pages are allocated with it (MAP_POPULATE, one
// system call instead of a page fault per page).
func makeOff[T any](h *offHeap, n int) []T {
	s := growMap[T](h, nil, n, unix.MAP_POPULATE)
	return s[:n]
}

// mappingOf returns the bytes of the mapping of h whose start is s's
// array, if any.
func mappingOf[T any](h *offHeap, s []T) ([]byte, bool) {
	if h == nil || cap(s) == 0 {
		return nil, false
	}
	mem, ok := h.maps[uintptr(unsafe.Pointer(unsafe.SliceData(s)))]
	return mem, ok
}

// releaseOff unmaps the mapping of h that s is, if any. s must not be used
// after.
func releaseOff[T any](h *offHeap, s []T) {
	if mem, ok := mappingOf(h, s); ok {
		delete(h.maps, uintptr(unsafe.Pointer(&mem[0])))
		_ = unix.Munmap(mem)
	}
}

// free unmaps every mapping of h. Only a runtime cleanup calls it, once
// nothing can reach the read state that used them.
func (h *offHeap) free() {
	for _, mem := range h.maps {
		_ = unix.Munmap(mem)
	}
	clear(h.maps)
}

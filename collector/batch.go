// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// batch reads a map's entries with BPF_MAP_LOOKUP_BATCH (Linux 5.6+), a
// few syscalls for the whole map, into buffers kept between reads. The map
// reader and the entry counter of map health share it. Not safe for
// concurrent use.
type batch struct {
	m       *ebpf.Map
	keySize int // bytes per key
	stride  int // bytes per value (per-CPU: the value rounded to 8, times CPUs)
	size    int // entries per call; grows when one hash bucket holds more

	keys, vals        []byte
	inBatch, outBatch []byte // the kernel's cursor
}

// bpfBatchAttr is the batch part of union bpf_attr (Linux 5.6+).
type bpfBatchAttr struct {
	InBatch   unsafe.Pointer
	OutBatch  unsafe.Pointer
	Keys      unsafe.Pointer
	Values    unsafe.Pointer
	Count     uint32
	MapFD     uint32
	ElemFlags uint64
	Flags     uint64
}

const bpfMapLookupBatch = 24 // BPF_MAP_LOOKUP_BATCH

// errNoBatch: the kernel or the map type has no batch lookup.
var errNoBatch = errors.New("batch lookup not supported")

func newBatch(m *ebpf.Map, keySize, stride, size int) batch {
	return batch{m: m, keySize: max(keySize, 1), stride: max(stride, 1), size: max(size, 1)}
}

// alloc sizes the key and value buffers for b.size entries.
func (b *batch) alloc() {
	b.keys = make([]byte, b.size*b.keySize)
	b.vals = make([]byte, b.size*b.stride)
}

// run reads the map from its first entry, at most limit entries (0: all),
// and calls fn (when not nil) after each syscall with the number of
// entries it put in b.keys and b.vals. It returns the entries read, and
// errNoBatch, having read nothing, when batch lookup is not supported.
func (b *batch) run(limit int, fn func(n int)) (int, error) {
	if len(b.keys) != b.size*b.keySize {
		b.alloc()
		cursor := max(b.keySize, 4)
		b.inBatch = make([]byte, cursor)
		b.outBatch = make([]byte, cursor)
	}
	maxEntries := int(b.m.MaxEntries())
	total := 0
	first := true
	for limit <= 0 || total < limit {
		attr := bpfBatchAttr{
			OutBatch: unsafe.Pointer(&b.outBatch[0]),
			Keys:     unsafe.Pointer(&b.keys[0]),
			Values:   unsafe.Pointer(&b.vals[0]),
			Count:    uint32(b.size),
			MapFD:    uint32(b.m.FD()),
		}
		if !first {
			attr.InBatch = unsafe.Pointer(&b.inBatch[0])
		}
		_, _, errno := unix.Syscall(unix.SYS_BPF, bpfMapLookupBatch, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
		switch errno {
		case 0, unix.ENOENT:
		case unix.ENOSPC:
			// The next hash bucket holds more entries than a call may
			// return (the kernel then returns none): grow, and ask again
			// from the same place.
			if b.size < maxEntries {
				b.size = min(b.size*2, maxEntries)
				b.alloc()
				continue
			}
			return total, fmt.Errorf("batch lookup %s: %w", b.m, errno)
		case unix.EINVAL, unix.EOPNOTSUPP, unix.Errno(524): // 524: ENOTSUPP (kernel-internal)
			if first {
				return 0, errNoBatch
			}
			return total, fmt.Errorf("batch lookup %s: %w", b.m, errno)
		default:
			return total, fmt.Errorf("batch lookup %s: %w", b.m, errno)
		}
		n := int(attr.Count)
		if fn != nil {
			fn(n)
		}
		total += n
		if errno == unix.ENOENT {
			return total, nil
		}
		first = false
		copy(b.inBatch, b.outBatch)
	}
	return total, nil
}

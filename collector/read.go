// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
)

// mapReader reads every entry of one map, reusing its buffers across
// scrapes. It uses BPF_MAP_LOOKUP_BATCH (Linux 5.6+, see batch), a few
// syscalls for the whole map, and falls back to key-by-key iteration where
// the kernel or map type lacks batch support. It is not safe for concurrent
// use.
type mapReader struct {
	batch
	ncpu    int // 1 unless per-CPU
	perCPU  bool
	cpuSize int // bytes per CPU in a value: the value size, rounded up to 8 for per-CPU maps
	noBatch bool
	// Iterated counts reads done by the fallback path (for tests).
	iterated int
}

// newMapReader reads a map's values: for a per-CPU map, one value per
// possible CPU, each padded to 8 bytes as the kernel copies them out
// (kernel/bpf/hashtab.c, bpf_percpu_hash_copy: round_up(value_size, 8)).
func newMapReader(m *ebpf.Map, perCPU bool) (*mapReader, error) {
	r := &mapReader{ncpu: 1, perCPU: perCPU, cpuSize: max(int(m.ValueSize()), 1)}
	if perCPU {
		n, err := ebpf.PossibleCPU()
		if err != nil {
			return nil, err
		}
		r.ncpu = n
		r.cpuSize = (r.cpuSize + 7) / 8 * 8
	}
	r.batch = newBatch(m, int(m.KeySize()), r.cpuSize*r.ncpu, min(int(m.MaxEntries()), 4096))
	return r, nil
}

// each calls fn for every entry of a map of u64 values with the key bytes
// (valid only during the call) and the value, summed over CPUs for
// per-CPU maps. It returns the number of entries read.
func (r *mapReader) each(fn func(key []byte, value uint64)) (int, error) {
	return r.eachRaw(func(key, val []byte) { fn(key, sumValues(val)) })
}

// eachRaw calls fn for every entry with the key bytes and the value bytes
// (both valid only during the call): ncpu values of cpuSize bytes each
// for a per-CPU map, else one of the value size. It returns the number of
// entries read.
func (r *mapReader) eachRaw(fn func(key, val []byte)) (int, error) {
	if !r.noBatch {
		n, err := r.run(0, func(n int) {
			for i := 0; i < n; i++ {
				fn(r.keys[i*r.keySize:(i+1)*r.keySize], r.vals[i*r.stride:(i+1)*r.stride])
			}
		})
		if !errors.Is(err, errNoBatch) {
			return n, err
		}
		r.noBatch = true
	}
	return r.eachIterate(fn)
}

func sumValues(b []byte) uint64 {
	var v uint64
	for len(b) >= 8 {
		v += nativeEndian.Uint64(b)
		b = b[8:]
	}
	return v
}

// eachIterate is the fallback: one syscall per key for the next key and one
// for its value (lookupRaw).
func (r *mapReader) eachIterate(fn func(key, val []byte)) (int, error) {
	key := make([]byte, r.keySize)
	next := make([]byte, r.keySize)
	val := make([]byte, r.stride)
	n := 0
	var prev any // nil: the first key
	for {
		if err := r.m.NextKey(prev, next); err != nil {
			if errors.Is(err, ebpf.ErrKeyNotExist) {
				break
			}
			r.iterated += n
			return n, fmt.Errorf("iterate %s: %w", r.m, err)
		}
		copy(key, next)
		prev = key
		if err := lookupRaw(r.m, bpfMapLookupElem, key, val); err != nil {
			if errors.Is(err, ebpf.ErrKeyNotExist) {
				continue // deleted since NextKey
			}
			r.iterated += n
			return n, fmt.Errorf("iterate %s: %w", r.m, err)
		}
		fn(key, val)
		n++
	}
	r.iterated += n
	return n, nil
}

var nativeEndian = binary.NativeEndian

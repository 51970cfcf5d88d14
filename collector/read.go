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
	noBatch bool
	// Iterated counts reads done by the fallback path (for tests).
	iterated int
}

// newMapReader reads a map of u64 values (one per CPU for per-CPU maps).
func newMapReader(m *ebpf.Map, perCPU bool) (*mapReader, error) {
	r := &mapReader{ncpu: 1, perCPU: perCPU}
	if perCPU {
		n, err := ebpf.PossibleCPU()
		if err != nil {
			return nil, err
		}
		r.ncpu = n
	}
	r.batch = newBatch(m, int(m.KeySize()), 8*r.ncpu, min(int(m.MaxEntries()), 4096))
	return r, nil
}

// each calls fn for every entry with the key bytes (valid only during the
// call) and the value, summed over CPUs for per-CPU maps. It returns the
// number of entries read.
func (r *mapReader) each(fn func(key []byte, value uint64)) (int, error) {
	if !r.noBatch {
		n, err := r.run(0, func(n int) {
			for i := 0; i < n; i++ {
				fn(r.keys[i*r.keySize:(i+1)*r.keySize], sumValues(r.vals[i*r.stride:(i+1)*r.stride]))
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
// for its value.
func (r *mapReader) eachIterate(fn func(key []byte, value uint64)) (int, error) {
	key := make([]byte, r.keySize)
	n := 0
	it := r.m.Iterate()
	if r.perCPU {
		var vals []uint64
		for it.Next(key, &vals) {
			var v uint64
			for _, x := range vals {
				v += x
			}
			fn(key, v)
			n++
		}
	} else {
		var v uint64
		for it.Next(key, &v) {
			fn(key, v)
			n++
		}
	}
	r.iterated += n
	if err := it.Err(); err != nil {
		return n, fmt.Errorf("iterate %s: %w", r.m, err)
	}
	return n, nil
}

var nativeEndian = binary.NativeEndian

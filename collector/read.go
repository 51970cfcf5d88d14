package collector

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// mapReader reads every entry of one map, reusing its buffers across
// scrapes. It uses BPF_MAP_LOOKUP_BATCH (Linux 5.6+), a few syscalls for the
// whole map, and falls back to key-by-key iteration where the kernel or map
// type lacks batch support. It is not safe for concurrent use.
type mapReader struct {
	m       *ebpf.Map
	keySize int
	stride  int // bytes per value: 8, or ncpu*8 for per-CPU maps
	ncpu    int // 1 unless per-CPU
	perCPU  bool

	batch    int
	keys     []byte
	vals     []byte
	inBatch  []byte
	outBatch []byte
	noBatch  bool
	// Iterated counts reads done by the fallback path (for tests).
	iterated int
}

func newMapReader(m *ebpf.Map, perCPU bool) (*mapReader, error) {
	r := &mapReader{m: m, keySize: int(m.KeySize()), ncpu: 1, perCPU: perCPU}
	if perCPU {
		n, err := ebpf.PossibleCPU()
		if err != nil {
			return nil, err
		}
		r.ncpu = n
	}
	r.stride = 8 * r.ncpu
	r.batch = min(int(m.MaxEntries()), 4096)
	if r.batch < 1 {
		r.batch = 1
	}
	return r, nil
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

// each calls fn for every entry with the key bytes (valid only during the
// call) and the value, summed over CPUs for per-CPU maps. It returns the
// number of entries read.
func (r *mapReader) each(fn func(key []byte, value uint64)) (int, error) {
	if !r.noBatch {
		n, err := r.eachBatch(fn)
		if !errors.Is(err, errNoBatch) {
			return n, err
		}
		r.noBatch = true
	}
	return r.eachIterate(fn)
}

var errNoBatch = errors.New("batch lookup not supported")

func (r *mapReader) grow() {
	r.keys = make([]byte, r.batch*r.keySize)
	r.vals = make([]byte, r.batch*r.stride)
	cursor := max(r.keySize, 4)
	r.inBatch = make([]byte, cursor)
	r.outBatch = make([]byte, cursor)
}

func (r *mapReader) eachBatch(fn func(key []byte, value uint64)) (int, error) {
	if len(r.keys) != r.batch*r.keySize {
		r.grow()
	}
	total := 0
	first := true
	for {
		attr := bpfBatchAttr{
			OutBatch: unsafe.Pointer(&r.outBatch[0]),
			Keys:     unsafe.Pointer(&r.keys[0]),
			Values:   unsafe.Pointer(&r.vals[0]),
			Count:    uint32(r.batch),
			MapFD:    uint32(r.m.FD()),
		}
		if !first {
			attr.InBatch = unsafe.Pointer(&r.inBatch[0])
		}
		_, _, errno := unix.Syscall(unix.SYS_BPF, bpfMapLookupBatch, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
		switch errno {
		case 0, unix.ENOENT:
		case unix.ENOSPC:
			// A hash bucket holds more entries than the batch: grow.
			if first && total == 0 && r.batch < int(r.m.MaxEntries()) {
				r.batch *= 2
				r.grow()
				continue
			}
			return total, fmt.Errorf("batch lookup %s: %w", r.m, errno)
		case unix.EINVAL, unix.EOPNOTSUPP, unix.Errno(524): // 524: ENOTSUPP (kernel-internal)
			if first {
				return 0, errNoBatch
			}
			return total, fmt.Errorf("batch lookup %s: %w", r.m, errno)
		default:
			return total, fmt.Errorf("batch lookup %s: %w", r.m, errno)
		}
		n := int(attr.Count)
		for i := 0; i < n; i++ {
			fn(r.keys[i*r.keySize:(i+1)*r.keySize], sumValues(r.vals[i*r.stride:(i+1)*r.stride]))
		}
		total += n
		if errno == unix.ENOENT {
			return total, nil
		}
		first = false
		copy(r.inBatch, r.outBatch)
	}
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

// SPDX-License-Identifier: Apache-2.0

package budget

import (
	"cmp"
	"fmt"
	"math"
	"math/bits"
	"os"
	"slices"
	"strings"

	"github.com/cilium/ebpf"
)

// The memory estimate models what Linux 6.x reports as a map's memory
// usage: the map type's map_mem_usage callback (kernel/bpf/*.c, since 6.4),
// shown as the "memlock:" line of the map's /proc/<pid>/fdinfo/<fd> and as
// bpf_map_info.memlock. It is computed from the map's spec alone, before
// the kernel allocates anything: type, key and value size, max_entries,
// flags (BPF_F_NO_PREALLOC, BPF_F_MMAPABLE) and, for per-CPU maps, the
// number of possible CPUs. Maps that allocate on demand (BPF_F_NO_PREALLOC
// hashes, LPM tries) are estimated full, the worst case.
//
// The fixed sizes below are the kernel structures' sizes on x86-64,
// measured on Linux 6.18 (TestEstimateMatchesKernel checks them against
// the kernel it runs on). They change little between kernels and matter
// only for small maps: a map's size is dominated by its entries.
const (
	htabHeader   = 832 // sizeof(struct bpf_htab), without its per-CPU lock counters
	htabLocksCPU = 32  // sizeof(int) * HASHTAB_MAP_LOCK_COUNT per possible CPU (6.x before 6.15; kept: an overestimate after)
	htabBucket   = 16  // sizeof(struct bucket)
	htabElem     = 48  // sizeof(struct htab_elem), before the key
	llistNode    = 8   // sizeof(struct llist_node), bpf_mem_alloc's header of an element allocated on demand
	ptrSize      = 8

	arrayHeader    = 312 // sizeof(struct bpf_array)
	stackHeader    = 320 // sizeof(struct bpf_stack_map)
	stackBucket    = 16  // sizeof(struct stack_map_bucket), before the frames
	queueHeader    = 312 // sizeof(struct bpf_queue_stack)
	bloomHeader    = 312 // sizeof(struct bpf_bloom_filter)
	ringbufHeader  = 304 // sizeof(struct bpf_ringbuf_map)
	ringbufMeta    = 3   // RINGBUF_NR_META_PAGES: the header page and the two position pages
	storageHeader  = 448 // sizeof(struct bpf_local_storage_map)
	storageBucket  = 16  // sizeof(struct bpf_local_storage_map_bucket)
	lpmNode        = 24  // sizeof(struct lpm_trie_node), before the prefix bytes
	fallbackHeader = 1024
	fallbackEntry  = 64
)

// bpfFNoPrealloc and bpfFMmapable are map_flags bits (include/uapi/linux/bpf.h).
const (
	bpfFNoPrealloc = 1 << 0
	bpfFMmapable   = 1 << 10
)

// MapEstimate is the estimated kernel memory of one map of an object.
type MapEstimate struct {
	Name  string // the map's name in the object
	Type  ebpf.MapType
	Bytes uint64
}

// Estimate is the estimated kernel memory of an object's maps.
type Estimate struct {
	// Maps has one entry per map, largest first (then by name).
	Maps []MapEstimate
	// Total is the sum of Maps, in bytes (saturating at math.MaxUint64).
	Total uint64
}

// EstimateSpec estimates the kernel memory, in bytes, that the maps of
// spec will hold once loaded, with EstimateMap and this machine's number of
// possible CPUs (/sys/devices/system/cpu/possible). It allocates nothing in
// the kernel. The error is that of reading the number of CPUs.
func EstimateSpec(spec *ebpf.CollectionSpec) (Estimate, error) {
	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		return Estimate{}, fmt.Errorf("estimate map memory: %w", err)
	}
	return estimateSpec(spec, cpus), nil
}

func estimateSpec(spec *ebpf.CollectionSpec, cpus int) Estimate {
	var est Estimate
	for name, ms := range spec.Maps {
		if ms == nil {
			continue
		}
		b := EstimateMap(ms, cpus)
		est.Maps = append(est.Maps, MapEstimate{Name: name, Type: ms.Type, Bytes: b})
		est.Total = add(est.Total, b)
	}
	slices.SortFunc(est.Maps, func(a, b MapEstimate) int {
		return cmp.Or(cmp.Compare(b.Bytes, a.Bytes), strings.Compare(a.Name, b.Name))
	})
	return est
}

// EstimateMap estimates the kernel memory, in bytes, of a map created from
// ms on a machine with cpus possible CPUs: what Linux 6.x reports as its
// memlock once it is full. See the functions of each map type for the
// formula. A type it does not know gets a generous fallback (fallbackBytes).
func EstimateMap(ms *ebpf.MapSpec, cpus int) uint64 {
	c := uint64(max(cpus, 1))
	switch ms.Type {
	case ebpf.Hash, ebpf.LRUHash, ebpf.PerCPUHash, ebpf.LRUCPUHash, ebpf.HashOfMaps:
		return hashBytes(ms, c)
	case ebpf.Array, ebpf.PerCPUArray, ebpf.PerfEventArray, ebpf.ProgramArray, ebpf.CGroupArray, ebpf.ArrayOfMaps:
		return arrayBytes(ms, c)
	case ebpf.StackTrace:
		return stackTraceBytes(ms)
	case ebpf.RingBuf, ebpf.UserRingbuf:
		return ringbufBytes(ms)
	case ebpf.TaskStorage, ebpf.InodeStorage, ebpf.SkStorage, ebpf.CgroupStorage:
		return storageBytes(c)
	case ebpf.Queue, ebpf.Stack:
		return queueBytes(ms)
	case ebpf.BloomFilter:
		return bloomBytes(ms)
	case ebpf.LPMTrie:
		return lpmBytes(ms)
	case ebpf.Arena:
		return mul(uint64(ms.MaxEntries), pageSize())
	}
	return fallbackBytes(ms, c)
}

// hashBytes is htab_map_mem_usage (kernel/bpf/hashtab.c) for BPF_MAP_TYPE_
// HASH, LRU_HASH, PERCPU_HASH, LRU_PERCPU_HASH and HASH_OF_MAPS, with
// n = max_entries, C = possible CPUs, V = round_up(value_size, 8) and an
// element of elem = 48 + round_up(key_size, 8) + (per-CPU ? 8 : V) bytes:
//
//	header  832 + 32·C                                (struct bpf_htab, lock counters)
//	buckets 16 · roundup_pow_of_two(n)
//	prealloc (the default; LRU maps always):
//	  elem · (n + C)     plain hash: C extra elements for updates
//	  elem · n           LRU, per-CPU and hash of maps
//	  + V · C · n        per-CPU values
//	  + 8 · C            not LRU, not per-CPU: per-CPU extra-element pointers
//	BPF_F_NO_PREALLOC, all n entries present (the worst case):
//	  (elem + 8) · n     the element and its bpf_mem_alloc header
//	  + (16 + V·C) · n   per-CPU: the value's allocation header and values
func hashBytes(ms *ebpf.MapSpec, c uint64) uint64 {
	n := uint64(ms.MaxEntries)
	percpu := ms.Type == ebpf.PerCPUHash || ms.Type == ebpf.LRUCPUHash
	lru := ms.Type == ebpf.LRUHash || ms.Type == ebpf.LRUCPUHash
	fd := ms.Type == ebpf.HashOfMaps
	v := round8(uint64(ms.ValueSize))
	if fd {
		v = ptrSize
	}
	elem := htabElem + round8(uint64(ms.KeySize))
	if percpu {
		elem += ptrSize
	} else {
		elem += v
	}
	usage := add(htabHeader+htabLocksCPU*c, mul(htabBucket, pow2(n)))
	values := mul(mul(v, c), n)
	if lru || ms.Flags&bpfFNoPrealloc == 0 {
		elems := n
		if !percpu && !lru && !fd {
			elems = add(elems, c)
		}
		usage = add(usage, mul(elem, elems))
		switch {
		case percpu:
			usage = add(usage, values)
		case !lru:
			usage = add(usage, ptrSize*c)
		}
		return usage
	}
	usage = add(usage, mul(elem+llistNode, n))
	if percpu {
		usage = add(usage, add(mul(llistNode+ptrSize, n), values))
	}
	return usage
}

// arrayBytes is array_map_mem_usage (kernel/bpf/arraymap.c) for BPF_MAP_
// TYPE_ARRAY, PERCPU_ARRAY and the arrays of file descriptors (PERF_EVENT_
// ARRAY, PROG_ARRAY, CGROUP_ARRAY, ARRAY_OF_MAPS), with n = max_entries,
// C = possible CPUs and E = round_up(value_size, 8) (8 for the fd arrays):
//
//	array          312 + E · n
//	mmapable array page_align(312) + page_align(E · n)  (BPF_F_MMAPABLE; the
//	               loader sets it on .data, .rodata and .bss)
//	per-CPU array  312 + 8 · n + E · C · n
//
// A perf event array with max_entries 0 (or more than C) gets C entries, as
// the loader creates it. Its perf ring buffers are not the map's: they are
// allocated when a reader opens them.
func arrayBytes(ms *ebpf.MapSpec, c uint64) uint64 {
	n := uint64(ms.MaxEntries)
	e := round8(uint64(ms.ValueSize))
	switch ms.Type {
	case ebpf.PerfEventArray:
		if n == 0 || n > c {
			n = c
		}
		e = ptrSize
	case ebpf.ProgramArray, ebpf.CGroupArray, ebpf.ArrayOfMaps:
		e = ptrSize
	}
	switch {
	case ms.Type == ebpf.PerCPUArray:
		return add(arrayHeader+ptrSize*n, mul(mul(e, c), n))
	case ms.Flags&bpfFMmapable != 0 || dataSection(ms.Name):
		return add(pageAlign(arrayHeader), pageAlign(mul(e, n)))
	}
	return add(arrayHeader, mul(e, n))
}

// stackTraceBytes is stack_map_mem_usage (kernel/bpf/stackmap.c) for
// BPF_MAP_TYPE_STACK_TRACE, with n = max_entries and value_size the frames
// of one stack (8 bytes each):
//
//	320 + 8 · roundup_pow_of_two(n) + (16 + value_size) · n
//
// The per-CPU callchain buffers the kernel shares between all stack maps
// are not counted.
func stackTraceBytes(ms *ebpf.MapSpec) uint64 {
	n := uint64(ms.MaxEntries)
	return add(add(stackHeader, mul(ptrSize, pow2(n))), mul(stackBucket+uint64(ms.ValueSize), n))
}

// ringbufBytes is ringbuf_map_mem_usage (kernel/bpf/ringbuf.c) for
// BPF_MAP_TYPE_RINGBUF and USER_RINGBUF, with P = max_entries / page size
// data pages:
//
//	304 + (3 + P) · page size + (3 + 2·P) · 8
//
// (three metadata pages; the data pages are mapped twice, so their page
// pointers count twice).
func ringbufBytes(ms *ebpf.MapSpec) uint64 {
	page := pageSize()
	p := uint64(ms.MaxEntries) / page
	return add(add(ringbufHeader, mul(ringbufMeta+p, page)), mul(ringbufMeta+2*p, ptrSize))
}

// storageBytes is bpf_local_storage_map_mem_usage (kernel/bpf/
// bpf_local_storage.c) for BPF_MAP_TYPE_TASK_STORAGE, INODE_STORAGE,
// SK_STORAGE and CGRP_STORAGE, with C = possible CPUs:
//
//	448 + 16 · max(2, roundup_pow_of_two(C))
//
// As in the kernel's figure, the values are not counted: each is allocated
// with the task, inode, socket or cgroup it belongs to, so the map's spec
// does not bound them.
func storageBytes(c uint64) uint64 {
	return storageHeader + storageBucket*max(2, pow2(c))
}

// queueBytes is queue_stack_map_mem_usage (kernel/bpf/queue_stack_maps.c)
// for BPF_MAP_TYPE_QUEUE and STACK: 312 + (max_entries + 1) · value_size.
func queueBytes(ms *ebpf.MapSpec) uint64 {
	return add(queueHeader, mul(uint64(ms.MaxEntries)+1, uint64(ms.ValueSize)))
}

// bloomBytes is bloom_map_mem_usage (kernel/bpf/bloom_filter.c) for
// BPF_MAP_TYPE_BLOOM_FILTER, with H = map_extra & 0xf hash functions
// (5 when 0): 312 + the bit array, max_entries · H / 5 · 7 bits rounded up
// to a power of two (at least 64; 2^32 bits when larger than 2^31), in
// bytes.
func bloomBytes(ms *ebpf.MapSpec) uint64 {
	h := ms.MapExtra & 0xf
	if h == 0 {
		h = 5
	}
	nbits := uint64(ms.MaxEntries) * h / 5 * 7
	var nbytes uint64
	switch {
	case nbits > 1<<31:
		nbytes = 1 << 29
	case nbits <= 64:
		nbytes = 8
	default:
		nbytes = pow2(nbits) / 8
	}
	return bloomHeader + nbytes
}

// lpmBytes is trie_mem_usage (kernel/bpf/lpm_trie.c) for BPF_MAP_TYPE_
// LPM_TRIE with all max_entries present (it is allocated on demand):
//
//	(24 + key_size - 4 + value_size) · max_entries
//
// The kernel counts the entries only, not the intermediate nodes it adds
// between prefixes (at most one per entry).
func lpmBytes(ms *ebpf.MapSpec) uint64 {
	data := uint64(ms.KeySize)
	if data >= 4 {
		data -= 4
	}
	return mul(lpmNode+data+uint64(ms.ValueSize), uint64(ms.MaxEntries))
}

// fallbackBytes is the estimate of a map type not modelled above (device,
// CPU and socket maps, cgroup storage of cgroup-attached programs, struct
// ops): 1024 + (round_up(key_size, 8) + round_up(value_size, 8) · C' + 64)
// · max(max_entries, 1), with C' = possible CPUs for PERCPU_CGROUP_STORAGE
// and 1 otherwise. It is above what Linux 6.x reports for each of them.
func fallbackBytes(ms *ebpf.MapSpec, c uint64) uint64 {
	v := round8(uint64(ms.ValueSize))
	if ms.Type == ebpf.PerCPUCGroupStorage {
		v = mul(v, c)
	}
	entry := add(add(round8(uint64(ms.KeySize)), v), fallbackEntry)
	return add(fallbackHeader, mul(entry, max(uint64(ms.MaxEntries), 1)))
}

// dataSection reports whether name is a global data section, which the
// loader creates mmapable (as cilium/ebpf does on kernels with
// BPF_F_MMAPABLE).
func dataSection(name string) bool {
	return name == ".bss" || strings.HasPrefix(name, ".data") || strings.HasPrefix(name, ".rodata")
}

func pageSize() uint64 { return uint64(os.Getpagesize()) }

func pageAlign(n uint64) uint64 {
	p := pageSize()
	return mul(add(n, p-1)/p, p)
}

func round8(n uint64) uint64 { return (n + 7) &^ 7 }

// pow2 is roundup_pow_of_two, and 1 for 0.
func pow2(n uint64) uint64 {
	if n <= 1 {
		return 1
	}
	if n > 1<<63 {
		return math.MaxUint64
	}
	return 1 << bits.Len64(n-1)
}

// add and mul saturate at math.MaxUint64: a spec's sizes come from outside.
func add(a, b uint64) uint64 {
	s, carry := bits.Add64(a, b, 0)
	if carry != 0 {
		return math.MaxUint64
	}
	return s
}

func mul(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi != 0 {
		return math.MaxUint64
	}
	return lo
}

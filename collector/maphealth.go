// SPDX-License-Identifier: Apache-2.0

package collector

// Map health: how full each map of a config is, what kernel memory it
// holds, and how many inserts into it failed because it was full.
//
// Every map of the config's ebpf.Collection is covered, named as in the
// object, except the internal maps of global data (.rodata, .data, .bss,
// .kconfig and their suffixed forms: every name starting with "."):
//
//	kernel_exporter_map_info{config,map,type}     1; type as in BPF_MAP_TYPE_*, lower case
//	kernel_exporter_map_entries{config,map}       entries at the last read (hash-like maps)
//	kernel_exporter_map_max_entries{config,map}   the map's max_entries
//	kernel_exporter_map_memory_bytes{config,map}  'memlock:' of the map's fdinfo
//	                                              (read at load, and at each read for
//	                                              maps without preallocation)
//	kernel_exporter_map_update_errors_total{config,map}
//
// Entries cost no extra pass over a map that a metric reads: the metric's
// read counts them (the first metric reading a map, when several do). An
// array gets no entries series: every one of its max_entries entries
// exists from creation, and it never refuses or evicts a key, so entries
// against max_entries would say nothing about it. A hash-like map
// that no metric reads (start times, say) is counted at each read of the
// config with batch lookups (BPF_MAP_LOOKUP_BATCH, 5.6+; else one
// BPF_MAP_GET_NEXT_KEY per key), stopping at max_entries. Map types that
// user space cannot iterate (task, inode, socket and cgroup storage, ring
// buffers, queues, stacks, bloom filters...) get no entries series; for a
// ring buffer max_entries is its size in bytes, as the kernel has it.
//
// A hash-like map at 90% of max_entries or more is logged once at WARN
// (per config and map) and listed by Config.FullMaps for the landing page.
// What fullness means depends on the type, which the info series gives:
// a full hash, per-CPU hash, LPM trie, stack trace map... refuses new keys
// (E2BIG, ENOSPC: the events are lost), a full LRU hash evicts its least
// recently used entries to make room (the kernel counts no evictions; with
// per-CPU free lists they can start a little below max_entries). The
// shipped rules (deploy/prometheus) alert on the two separately.
//
// Update errors come from the per-CPU hash ke_map_update_errors that
// include/kernel_exporter/maps.bpf.h adds to every object including it:
// its key is the kernel's id of the map an insert failed on (E2BIG or
// ENOMEM: the map is full), its value the count per CPU. Configs whose
// object has no such map get no update error series.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"
)

// UpdateErrorsMap is the name of the per-CPU hash, keyed by map id, in
// which the helpers of include/kernel_exporter/maps.bpf.h count inserts that
// failed because the map was full.
const UpdateErrorsMap = "ke_map_update_errors"

// FullPercent is the fill level, in percent of max_entries, from which a
// hash-like map is logged and marked on the landing page.
const FullPercent = 90

var (
	mapInfoDesc = prometheus.NewDesc(selfNamespace+"_map_info",
		"A BPF map of the config, always 1; type is the map's BPF_MAP_TYPE_* in lower case without the prefix (hash, lru_hash, array...). The internal .rodata/.data/.bss/.kconfig maps are left out.", []string{"config", "map", "type"}, nil)
	mapEntriesDesc = prometheus.NewDesc(selfNamespace+"_map_entries",
		"Entries in a hash-like BPF map of the config at its last read (hash, LRU hash, LPM trie, stack trace...). Maps are named as in the object; arrays, whose entries all exist from creation, are left out, as are the internal .rodata/.data/.bss/.kconfig maps and map types user space cannot iterate (local storage, ring buffers, queues...).", []string{"config", "map"}, nil)
	mapMaxEntriesDesc = prometheus.NewDesc(selfNamespace+"_map_max_entries",
		"max_entries of a BPF map of the config (ring buffers: size in bytes). The internal .rodata/.data/.bss/.kconfig maps are left out.", []string{"config", "map"}, nil)
	mapMemoryDesc = prometheus.NewDesc(selfNamespace+"_map_memory_bytes",
		"Kernel memory of a BPF map of the config, as the kernel reports it (memlock in the map's fdinfo). The internal .rodata/.data/.bss/.kconfig maps are left out.", []string{"config", "map"}, nil)
	mapUpdateErrorsDesc = prometheus.NewDesc(selfNamespace+"_map_update_errors_total",
		"Inserts into a BPF map of the config that failed because it was full (E2BIG or ENOMEM), counted by the programs through include/kernel_exporter/maps.bpf.h, summed over CPUs.", []string{"config", "map"}, nil)
)

// mapHealthDescs are the descriptors of the map health metrics.
var mapHealthDescs = []*prometheus.Desc{mapInfoDesc, mapEntriesDesc, mapMaxEntriesDesc, mapMemoryDesc, mapUpdateErrorsDesc}

// mapKind is how the entries of a map type are known.
type mapKind int

const (
	kindOpaque mapKind = iota // not iterable from user space: no entries
	kindArray                 // always max_entries entries: no entries series
	kindHash                  // counted; can fill up
)

func kindOf(t ebpf.MapType) mapKind {
	switch t {
	case ebpf.Array, ebpf.PerCPUArray, ebpf.ProgramArray, ebpf.PerfEventArray,
		ebpf.ArrayOfMaps, ebpf.CGroupArray, ebpf.DevMap, ebpf.CPUMap, ebpf.XSKMap, ebpf.SockMap:
		return kindArray
	case ebpf.Hash, ebpf.PerCPUHash, ebpf.LRUHash, ebpf.LRUCPUHash, ebpf.LPMTrie,
		ebpf.HashOfMaps, ebpf.StackTrace, ebpf.DevMapHash, ebpf.SockHash:
		return kindHash
	}
	return kindOpaque
}

// mapKernelNames are the kernel's names of the map types (enum
// bpf_map_type without BPF_MAP_TYPE_, lower case, as bpftool prints them).
var mapKernelNames = map[ebpf.MapType]string{
	ebpf.Hash: "hash", ebpf.Array: "array", ebpf.ProgramArray: "prog_array",
	ebpf.PerfEventArray: "perf_event_array", ebpf.PerCPUHash: "percpu_hash",
	ebpf.PerCPUArray: "percpu_array", ebpf.StackTrace: "stack_trace",
	ebpf.CGroupArray: "cgroup_array", ebpf.LRUHash: "lru_hash",
	ebpf.LRUCPUHash: "lru_percpu_hash", ebpf.LPMTrie: "lpm_trie",
	ebpf.ArrayOfMaps: "array_of_maps", ebpf.HashOfMaps: "hash_of_maps",
	ebpf.DevMap: "devmap", ebpf.SockMap: "sockmap", ebpf.CPUMap: "cpumap",
	ebpf.XSKMap: "xskmap", ebpf.SockHash: "sockhash",
	ebpf.CGroupStorage: "cgroup_storage", ebpf.ReusePortSockArray: "reuseport_sockarray",
	ebpf.PerCPUCGroupStorage: "percpu_cgroup_storage", ebpf.Queue: "queue",
	ebpf.Stack: "stack", ebpf.SkStorage: "sk_storage", ebpf.DevMapHash: "devmap_hash",
	ebpf.StructOpsMap: "struct_ops", ebpf.RingBuf: "ringbuf",
	ebpf.InodeStorage: "inode_storage", ebpf.TaskStorage: "task_storage",
	ebpf.BloomFilter: "bloom_filter", ebpf.UserRingbuf: "user_ringbuf",
	ebpf.CgroupStorage: "cgrp_storage",
}

// mapKernelName is the kernel's name of map type t; a type this table
// does not know is named by its number ("type_42").
func mapKernelName(t ebpf.MapType) string {
	if n, ok := mapKernelNames[t]; ok {
		return n
	}
	return "type_" + strconv.FormatUint(uint64(t), 10)
}

// mapHealth is the health state of one map of a config.
type mapHealth struct {
	name   string
	m      *ebpf.Map
	kind   mapKind
	typ    string // BPF_MAP_TYPE_* in lower case, without the prefix
	max    uint32
	id     ebpf.MapID // 0: unknown
	readBy int        // index of the first metric that reads the map, -1: none
	// dynamic: the map allocates entries as they come (BPF_F_NO_PREALLOC,
	// LPM trie), so its memory is read again at each read; the memory of
	// the others is fixed at creation and read once.
	dynamic bool

	entries atomic.Int64 // -1: not known yet
	memory  atomic.Uint64
	errors  atomic.Uint64
	full    atomic.Bool // at or over FullPercent at the last read
	warned  bool        // the WARN was logged; touched by reads only
	counter *entryCounter
	// countedAt is when counter last counted (clock() - base); 0: never.
	countedAt time.Duration
}

// UnreadCountEvery bounds how often a map that no metric reads is counted
// (one batch pass over it): reads come every second while a /ui/ page is
// open or a ttl metric expires keys, and a pass over a 16k-entry start-time
// map costs about 80 µs. Its entries gauge is at most this old.
const UnreadCountEvery = 10 * time.Second

// newMapHealth returns the health state of every map of coll that is not
// internal, sorted by name, with metrics (the config's metrics in read
// order) marking the maps they read, and the update errors map (nil when the
// object has none).
func newMapHealth(coll *ebpf.Collection, metrics []*metric) ([]*mapHealth, *mapReader, error) {
	names := make([]string, 0, len(coll.Maps))
	for name := range coll.Maps {
		if !strings.HasPrefix(name, ".") && coll.Maps[name] != nil {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	hs := make([]*mapHealth, 0, len(names))
	for _, name := range names {
		m := coll.Maps[name]
		h := &mapHealth{name: LabelValue(name), m: m, kind: kindOf(m.Type()), typ: mapKernelName(m.Type()), max: m.MaxEntries(), readBy: -1}
		h.dynamic = m.Flags()&unix.BPF_F_NO_PREALLOC != 0 || m.Type() == ebpf.LPMTrie
		if info, err := m.Info(); err == nil {
			h.id, _ = info.ID()
		}
		for i, met := range metrics {
			if met.MapName == name {
				h.readBy = i
				break
			}
		}
		h.entries.Store(-1)
		if mem, err := MapMemlock(m); err == nil {
			h.memory.Store(mem)
		}
		hs = append(hs, h)
	}
	var errs *mapReader
	if m := coll.Maps[UpdateErrorsMap]; m != nil {
		if m.Type() != ebpf.PerCPUHash || m.KeySize() != 4 || m.ValueSize() != 8 {
			return nil, nil, fmt.Errorf("map %s has type %s, %d-byte keys and %d-byte values; want PerCPUHash, 4 and 8", UpdateErrorsMap, m.Type(), m.KeySize(), m.ValueSize())
		}
		r, err := newMapReader(m, true)
		if err != nil {
			return nil, nil, err
		}
		errs = r
	}
	return hs, errs, nil
}

// readMapHealth updates the map health state after the config's metrics
// were read at now (clock() - base); counted[i] is the number of entries
// metric i read, or -1 when its read failed. Maps no metric reads are
// counted at most every UnreadCountEvery.
func (c *Config) readMapHealth(counted []int, now time.Duration) {
	if c.fdinfo == nil {
		c.fdinfo = make([]byte, fdinfoLimit)
	}
	for _, h := range c.maps {
		if h.dynamic {
			if mem, err := mapMemlock(h.m, c.fdinfo); err == nil {
				h.memory.Store(mem)
			}
		}
		if h.kind != kindHash {
			continue
		}
		n := -1
		if h.readBy >= 0 {
			n = counted[h.readBy]
		} else if h.countedAt == 0 || now-h.countedAt >= UnreadCountEvery {
			if h.counter == nil {
				h.counter = newEntryCounter(h.m)
			}
			if k, err := h.counter.count(); err == nil {
				n = k
			}
			h.countedAt = max(now, 1)
		}
		if n < 0 {
			continue
		}
		n = min(n, int(h.max))
		h.entries.Store(int64(n))
		full := h.max > 0 && uint64(n)*100 >= uint64(h.max)*FullPercent
		h.full.Store(full)
		if full && !h.warned {
			h.warned = true
			fullLog(c.name, h.name, n, int(h.max))
		}
	}
	if c.updateErrs != nil {
		c.readUpdateErrors()
	}
}

// readUpdateErrors reads the per-CPU update error counts, keyed by map id,
// into the maps of the config with that id. Ids of other maps (inner maps,
// maps of another object) are ignored.
func (c *Config) readUpdateErrors() {
	byID := c.mapsByID
	_, err := c.updateErrs.each(func(key []byte, v uint64) {
		if h := byID[nativeEndian.Uint32(key)]; h != nil {
			h.errors.Store(v)
		}
	})
	if err != nil {
		slog.Debug("reading map update errors", "config", c.name, "err", err)
	}
}

// collectMapHealth sends the map health metrics of the config.
func (c *Config) collectMapHealth(ch chan<- prometheus.Metric) {
	for _, h := range c.maps {
		ch <- prometheus.MustNewConstMetric(mapInfoDesc, prometheus.GaugeValue, 1, c.name, h.name, h.typ)
		if n := h.entries.Load(); n >= 0 && h.kind == kindHash {
			ch <- prometheus.MustNewConstMetric(mapEntriesDesc, prometheus.GaugeValue, float64(n), c.name, h.name)
		}
		ch <- prometheus.MustNewConstMetric(mapMaxEntriesDesc, prometheus.GaugeValue, float64(h.max), c.name, h.name)
		ch <- prometheus.MustNewConstMetric(mapMemoryDesc, prometheus.GaugeValue, float64(h.memory.Load()), c.name, h.name)
		if c.updateErrs != nil && h.kind == kindHash && h.name != UpdateErrorsMap {
			ch <- prometheus.MustNewConstMetric(mapUpdateErrorsDesc, prometheus.CounterValue, float64(h.errors.Load()), c.name, h.name)
		}
	}
}

// FullMaps returns the hash-like maps of the config that were at least
// FullPercent full at the last read, each as "<map> (<entries>/<max_entries>)".
func (c *Config) FullMaps() []string {
	var out []string
	for _, h := range c.maps {
		if h.full.Load() {
			out = append(out, fmt.Sprintf("%s (%d/%d)", h.name, h.entries.Load(), h.max))
		}
	}
	return out
}

// fullLog logs, once per config and map, that a map is nearly full. A
// variable for tests.
var fullLog = func(config, name string, entries, max int) {
	slog.Warn("BPF map nearly full: inserts into it fail (hash) or evict (LRU) once it is full",
		"config", config, "map", name, "entries", entries, "max_entries", max, "threshold_percent", FullPercent)
}

// fdinfoLimit bounds the bytes read from a map's fdinfo (about 250 bytes
// on 6.x kernels).
const fdinfoLimit = 4096

// MapMemlock returns the kernel memory of map m in bytes: the 'memlock:'
// line of /proc/self/fdinfo/<fd> (Linux 4.10+; since 6.4 the map's actual
// usage, before that an estimate from its sizes). At most 4 KiB are read.
// Errors: the fdinfo cannot be read, or has no parseable memlock line.
func MapMemlock(m *ebpf.Map) (uint64, error) {
	return mapMemlock(m, make([]byte, fdinfoLimit))
}

// mapMemlock is MapMemlock reading into buf (fdinfoLimit bytes).
func mapMemlock(m *ebpf.Map, buf []byte) (uint64, error) {
	f, err := os.Open("/proc/self/fdinfo/" + strconv.Itoa(m.FD()))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n, err := io.ReadFull(f, buf)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return 0, err
	}
	return parseMemlock(buf[:n])
}

var errNoMemlock = errors.New("fdinfo has no memlock line")

// parseMemlock finds "memlock:\t<decimal>" in fdinfo text.
func parseMemlock(b []byte) (uint64, error) {
	for line := range bytes.Lines(b) {
		rest, ok := bytes.CutPrefix(line, []byte("memlock:"))
		if !ok {
			continue
		}
		v, err := strconv.ParseUint(string(bytes.TrimSpace(rest)), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("fdinfo memlock: %w", err)
		}
		return v, nil
	}
	return 0, errNoMemlock
}

// entryCounter counts the entries of a map no metric reads, with batch
// lookups into buffers kept between reads (at most about counterBuf bytes,
// or one entry), else key by key. Not safe for concurrent use.
type entryCounter struct {
	batch
	noBatch bool
}

// counterBuf bounds the buffers of an entryCounter, in bytes.
const counterBuf = 64 << 10

func newEntryCounter(m *ebpf.Map) *entryCounter {
	keySize, stride := max(int(m.KeySize()), 1), max(int(m.ValueSize()), 1)
	if isPerCPU(m.Type()) {
		ncpu, err := ebpf.PossibleCPU()
		if err != nil {
			ncpu = 1
		}
		stride = (int(m.ValueSize()) + 7) / 8 * 8 * ncpu
	}
	size := max(1, min(int(m.MaxEntries()), counterBuf/(keySize+stride)))
	return &entryCounter{batch: newBatch(m, keySize, stride, size)}
}

// count returns the number of entries, at most max_entries.
func (c *entryCounter) count() (int, error) {
	limit := int(c.m.MaxEntries())
	if !c.noBatch {
		n, err := c.run(limit, nil)
		if !errors.Is(err, errNoBatch) {
			return min(n, limit), err
		}
		c.noBatch = true
	}
	return c.countKeys()
}

// countKeys walks the keys with BPF_MAP_GET_NEXT_KEY, at most max_entries
// of them (a walk restarts at the first key when its current key is
// deleted, so an unbounded walk might not end).
func (c *entryCounter) countKeys() (int, error) {
	key := make([]byte, c.keySize)
	next := make([]byte, c.keySize)
	limit := int(c.m.MaxEntries())
	n := 0
	var prev any // nil: the first key
	for n < limit {
		if err := c.m.NextKey(prev, next); err != nil {
			if errors.Is(err, ebpf.ErrKeyNotExist) {
				break
			}
			return n, fmt.Errorf("next key %s: %w", c.m, err)
		}
		n++
		copy(key, next)
		prev = key
	}
	return n, nil
}

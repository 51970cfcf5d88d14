// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"bytes"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/cilium/ebpf"
)

// Series lifetime (a metric's ttl).
//
// A metric with a ttl tracks every key of its map, for histograms every
// bucket key apart: the value the last read saw and since when (the time of
// the read that first saw that value). At the end of a complete read, the
// keys idle for at least ttl are deleted from the BPF map, but only when
// every key of their series is idle: deleting some keys of a series that
// still moves would lower its counter (or its cumulative buckets), which
// Prometheus takes for a reset. Keys that no series exports (a decoder
// skipped or failed on them) are deleted on their own. A series leaves
// /metrics at the next read after its keys were deleted, and counts once in
// kernel_exporter_series_expired_total{config,metric}.
//
// This state is apart from the decode cache (readState.entries): that one
// has one entry per label set of the key (a histogram's bucket keys share
// it) and holds at most Limits.CacheSize keys, while expiry must know every
// key of the map. It holds only keys that the last read saw, so it is
// bounded by the map's max_entries (plus carried keys, below).
//
// # Deleting without losing increments
//
// A key is deleted with BPF_MAP_LOOKUP_AND_DELETE_ELEM, which the hash,
// LRU hash and their per-CPU kinds support since Linux 5.14
// (kernel/bpf/hashtab.c, htab_map_lookup_and_delete_elem): it returns the
// value the element held when it was unlinked, in one step. When that value differs from the one
// the last read saw, a program added to the key between the read and the
// deletion: the key is not idle after all. Its whole value is then kept in
// the exporter as a carry, added to the key at every read (whether or not
// the program created the key again, counting from 0), so the exported
// total neither drops nor loses the increment; the carried key expires like
// any other once it stays idle for ttl.
//
// What remains is the race inside the kernel: a program that looked up the
// element (bpf_map_lookup_elem, as ke_add in include/kernel_exporter/
// maps.bpf.h does) just before the deletion and adds through that pointer
// just after it adds to an unlinked element, and that increment is lost
// (in a preallocated map the element may even be reused at once for a new
// key, which then gets the increment). The bound: at most one increment
// per CPU running the program at the instant of the deletion, a window of
// a few instructions, and only for a key that had been idle for ttl until
// that instant.
//
// On kernels without lookup-and-delete for the map type (before 5.14),
// the key is looked up then deleted (two syscalls): increments made
// between the two are lost. The bound: the increments a key idle for ttl
// receives in the microseconds between two syscalls.

// # Gauges
//
// A gauge's key is idle when its value has not changed for ttl, and is
// then deleted with nothing carried: a gauge's value is a level (a queue
// depth, a timestamp), not a total that must never go down. A value that
// changed between the read and the deletion is lost until the program
// writes the key again; the series leaves /metrics meanwhile.

// MinExpiryInterval is the shortest time between two background reads of a
// config with ttl metrics (see Config.StartExpiry).
const MinExpiryInterval = time.Second

// expiry is the lifetime state of a metric with a ttl. Like readState, it
// is touched only by the read in flight.
type expiry struct {
	ttl    time.Duration
	m      *ebpf.Map
	ncpu   int
	perCPU bool
	index  keyIndex // full key → ents index
	ents   []idleKey
	free   []int32
	// The ents in the order of this read and of the last one: as in
	// readState, keys mostly come back in the same order, so a key is
	// usually found by comparing it with the one at the same place last
	// time rather than by a hash lookup.
	order, lastOrder []int32
	cursor           int
	carried          []int32 // ents whose carry is not 0, each once
	seen             int     // ents seen by the read in flight
	now              time.Duration
	noLookupDelete   bool // the kernel lacks lookup-and-delete for the map
	warned           bool // a deletion error was logged
	// sum reads the metric's value from a value's bytes (summed over
	// CPUs), into val; noCarry (gauges) deletes without carrying: a
	// gauge's value is a level, not a running total (see below).
	sum     func(val []byte) uint64
	val     []byte
	noCarry bool

	// beforeDelete, when set (tests), runs before each deletion.
	beforeDelete func(key []byte)
}

// idleKey is one key of the map (or carried).
type idleKey struct {
	key   []byte // nil: a free slot
	last  uint64 // the key's value in the last read (map value + carry)
	carry uint64 // value of deleted elements still counted
	since time.Duration
	seen  uint64 // readState.gen of the last read that saw the key
	pos   int32  // index in the order of that read
	s     int32  // its series in that read; noSeries when none is exported
}

func newExpiry(ttl time.Duration, r *mapReader, sum func([]byte) uint64, noCarry bool) *expiry {
	return &expiry{ttl: ttl, m: r.m, ncpu: r.ncpu, perCPU: r.perCPU, index: newKeyIndex(r.keySize, 0),
		sum: sum, val: make([]byte, r.stride), noCarry: noCarry}
}

// begin starts a read at now (time since the Config's base).
func (x *expiry) begin(now time.Duration) {
	x.now = now
	x.lastOrder, x.order = x.order, x.lastOrder[:0]
	x.cursor, x.seen = 0, 0
}

// see records that the read in flight found key with value v in the map,
// and returns the key's state and its value with its carry.
func (x *expiry) see(key []byte, v uint64, gen uint64) (*idleKey, uint64) {
	i := x.find(key)
	if i < 0 {
		i = x.add(key)
	}
	e := &x.ents[i]
	if e.seen == gen {
		return e, v // listed twice by one read: the carry is in already
	}
	v += e.carry
	if e.seen == 0 || v != e.last {
		e.last, e.since = v, x.now
	}
	e.seen = gen
	e.pos = int32(len(x.order))
	x.order = append(x.order, i)
	x.seen++
	return e, v
}

func (x *expiry) find(key []byte) int32 {
	if j := x.cursor; j < len(x.lastOrder) {
		if i := x.lastOrder[j]; int(i) < len(x.ents) && bytes.Equal(x.ents[i].key, key) {
			x.cursor = j + 1
			return i
		}
	}
	i, ok := x.index.get(key)
	if !ok {
		return -1
	}
	x.cursor = int(x.ents[i].pos) + 1
	return i
}

func (x *expiry) add(key []byte) int32 {
	e := idleKey{key: bytes.Clone(key), s: noSeries}
	var i int32
	if n := len(x.free); n > 0 {
		i = x.free[n-1]
		x.free = x.free[:n-1]
		x.ents[i] = e
	} else {
		x.ents = append(x.ents, e)
		i = int32(len(x.ents) - 1)
	}
	x.index.put(key, i)
	return i
}

// release forgets ents[i]; the caller removes it from the index.
func (x *expiry) release(i int32) {
	if x.ents[i].carry != 0 {
		x.carried = slices.DeleteFunc(x.carried, func(j int32) bool { return j == i })
	}
	x.ents[i] = idleKey{s: noSeries}
	x.free = append(x.free, i)
}

// eachCarried calls add for the carried keys that the read in flight did
// not find in the map, with value 0: see then adds their carry.
func (x *expiry) eachCarried(gen uint64, add func(key []byte, v uint64)) {
	for _, i := range x.carried {
		if e := &x.ents[i]; e.key != nil && e.seen != gen {
			add(e.key, 0)
		}
	}
}

// expire ends a complete read: it forgets the keys that are gone, and
// deletes the idle keys of idle series from the map. It returns the number
// of series that expired (exported series whose keys were all deleted).
func (m *metric) expire() int {
	x, gen, rs := m.exp, m.rs.gen, &m.rs
	busy := func(s int32) bool { return s >= 0 && rs.busy[s] == uint32(gen) }
	defer x.compact()
	if x.index.len() > x.seen {
		x.index.sweep(func(i int32) bool {
			if x.ents[i].seen == gen {
				return false
			}
			x.release(i)
			return true
		})
	}
	// A series with a key that moved within ttl is busy.
	idle := 0
	for i := range x.ents {
		e := &x.ents[i]
		if e.key == nil {
			continue
		}
		if x.now-e.since < x.ttl {
			if e.s >= 0 {
				rs.busy[e.s] = uint32(gen)
			}
			continue
		}
		idle++
	}
	if idle == 0 {
		return 0
	}
	var dels []int32
	for i := range x.ents {
		e := &x.ents[i]
		if e.key == nil || x.now-e.since < x.ttl || busy(e.s) {
			continue
		}
		if x.delete(m, int32(i)) == delDone {
			dels = append(dels, int32(i))
		} else if e.s >= 0 {
			rs.busy[e.s] = uint32(gen) // carried or kept: the series stays
		}
	}
	if len(dels) == 0 {
		return 0
	}
	n := 0
	counted := map[int32]bool{}
	for _, i := range dels {
		e := &x.ents[i]
		if busy(e.s) && !x.noCarry {
			// Another key of the series stays (it moved at the last
			// moment): keep this one's value too, or the series would
			// go down.
			x.carry(i, e.last)
			continue
		}
		if e.s >= 0 && rs.sflag[e.s]&sDropped == 0 && !counted[e.s] {
			counted[e.s] = true
			n++
		}
		x.forget(i)
	}
	return n
}

// compact rebuilds the state after the map shrank a lot (to under a
// quarter of the slots, which are more than 4096): Go maps and slices do
// not give memory back as keys are deleted.
func (x *expiry) compact() {
	if len(x.ents) <= 4096 || x.index.len() >= len(x.ents)/4 {
		return
	}
	remap := make([]int32, len(x.ents))
	ents := make([]idleKey, 0, x.index.len())
	x.index = x.index.rebuilt(func(i int32) int32 {
		ents = append(ents, x.ents[i])
		remap[i] = int32(len(ents) - 1)
		return remap[i]
	})
	for j, i := range x.carried {
		x.carried[j] = remap[i]
	}
	x.ents, x.free = ents, nil
	x.order, x.lastOrder = nil, nil // the next read finds keys by the index
}

// forget releases ents[i] and removes it from the index.
func (x *expiry) forget(i int32) {
	x.index.del(x.ents[i].key)
	x.release(i)
}

// carry sets the carry of ents[i], whose element was deleted from the map.
func (x *expiry) carry(i int32, v uint64) {
	if x.ents[i].carry == 0 {
		x.carried = append(x.carried, i)
	}
	x.ents[i].carry = v
}

type deleteResult uint8

const (
	delKept    deleteResult = iota // not deleted (an error)
	delDone                        // gone, with nothing added since the read
	delCarried                     // deleted, but it had moved: its value is carried
)

// delete removes the key of ents[i] from the map. See the comment at the
// top of this file for what it guarantees.
func (x *expiry) delete(m *metric, i int32) deleteResult {
	e := &x.ents[i]
	if x.beforeDelete != nil {
		x.beforeDelete(e.key)
	}
	v, err := x.lookupAndDelete(e.key)
	switch {
	case errors.Is(err, ebpf.ErrKeyNotExist):
		// Deleted already (by the program, or evicted from an LRU map):
		// nothing is left but the carry.
		v = 0
	case err != nil:
		if !x.warned {
			x.warned = true
			slog.Warn("cannot delete an idle map key (ttl): keeping it", "config", m.rs.config, "metric", m.Name, "err", err)
		}
		return delKept
	}
	if x.noCarry {
		return delDone
	}
	if total := v + e.carry; total != e.last && err == nil {
		x.carry(i, total)
		return delCarried
	}
	return delDone
}

// lookupAndDelete deletes key from the map and returns the value it held
// (the metric's field, summed over CPUs), with
// BPF_MAP_LOOKUP_AND_DELETE_ELEM, or with a lookup and a delete where the
// kernel lacks it (before Linux 5.14).
func (x *expiry) lookupAndDelete(key []byte) (uint64, error) {
	clear(x.val)
	if !x.noLookupDelete {
		err := lookupRaw(x.m, bpfMapLookupAndDeleteElem, key, x.val)
		if !isNoLookupDelete(err) {
			return x.sum(x.val), err
		}
		x.noLookupDelete = true
	}
	if err := lookupRaw(x.m, bpfMapLookupElem, key, x.val); err != nil {
		return 0, err
	}
	if err := x.m.Delete(key); err != nil {
		return 0, err
	}
	return x.sum(x.val), nil
}

// ExpiryInterval returns how often the config must be read for its ttls:
// half the shortest ttl of its metrics, at least MinExpiryInterval; 0 when
// no metric has a ttl.
func (c *Config) ExpiryInterval() time.Duration {
	var d time.Duration
	for _, m := range c.metrics {
		if m.TTL > 0 && (d == 0 || m.TTL < d) {
			d = m.TTL
		}
	}
	if d == 0 {
		return 0
	}
	return max(d/2, MinExpiryInterval)
}

// StartExpiry reads the config in the background so that idle keys expire
// without scrapes: a read whenever ExpiryInterval has passed since the last
// read began (a scrape's read counts, and Read shares a read in flight).
// It returns a function that stops the background reads and waits for the
// one in flight; call it before closing the config's maps. With no ttl
// metric it starts nothing.
func (c *Config) StartExpiry() (stop func()) {
	every := c.ExpiryInterval()
	if every == 0 {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTimer(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			wait := every - time.Since(time.Unix(0, c.lastStart.Load()))
			if wait <= 0 {
				c.Read()
				wait = every
			}
			t.Reset(wait)
		}
	})
	var once sync.Once
	return func() {
		once.Do(func() { close(done) })
		wg.Wait()
	}
}

// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/maphash"
	"slices"

	"github.com/kernel-exporter/kernel_exporter/decoder"
)

// The per-entry work of a read is finding the key's cached series and
// adding the value to it in place. The key's bytes (without the bucket
// field) are compared with the key at the same place in the last read,
// which usually matches (see readState.lastIdx); otherwise one hash lookup
// finds it. Keys that decode to the same label set share one series, so
// summing them needs no second lookup. A series' label set is built once,
// into the metric's label arena (labels.go), and the Family a read returns
// copies only its reference: a steady-state read allocates nothing per
// entry, only a few slabs per metric.
//
// Keys and series are not Go objects but rows of slabs (struct of arrays)
// indexed by int32, found through idTables: a million keys cost a few
// tens of megabytes of memory that the Go GC does not scan, instead of a
// million small objects with pointers. An entry of the key cache is its
// key's bytes, its series, and the read that last saw it and where; a
// series is its label set's reference, its totals for the read in flight,
// the read that last touched them and its flags.
//
// Everything here is touched only by the read in flight; reads of one
// config never overlap (see Config.Collect), so there are no locks.

// What series returns, and what a cache entry holds, for a key no series
// exports: -1 (noSeries) drops the entry; a cache entry holds skipSeries
// for a key a decoder skipped (ErrSkip) and failedSeries(i) for one the
// decoder decErrs[i] failed on. They are never aggregated or changed.
const (
	noSeries   int32 = -1
	skipSeries int32 = -2
)

func failedSeries(i int) int32 { return -3 - int32(i) }

// Flags of a series.
const (
	sLive    uint8 = 1 << iota // in use (else on the free list)
	sCached                    // has a cached key: kept across reads while a read touches it
	sDropped                   // over max_series in the read that last touched it
	sIndexed                   // in readState.sets
)

// readState is a metric's decoding and aggregation state. The cache holds
// only what the last complete read saw: a key gone from the BPF map is
// dropped at the end of the next read, so the cache follows the map (pids and
// cgroups that come and go do not accumulate), and it never holds more than
// limit keys. Keys that do not fit are decoded at every read.
type readState struct {
	limit int
	seed  maphash.Seed
	off   *offHeap // where the slabs below live once large (offheap.go)

	// The key cache. Entry e is the key keys[e*kl:(e+1)*kl] (the key
	// without its bucket field), its series esid[e] (noSeries: a free
	// entry, listed in efree), the read that last saw it and where in
	// that read.
	kl    int
	keys  []byte
	esid  []int32
	eseen []uint32
	epos  []int32
	efree []int32
	index idTable // key → entry
	peak  int     // largest index.len() since the slabs were last rebuilt
	// A read that starts with an empty cache (the first one) knows that
	// every key is new: it neither looks keys up nor indexes them while
	// it runs (deferred; pending counts its new entries), and settle
	// indexes them all at its end, region by region of the table rather
	// than at random, which is most of what a first read costs beyond a
	// later one. Not for histograms, whose bucket keys share their key
	// without the bucket, nor with a ttl (expiry keeps series numbers).
	deferred bool
	pending  int

	// The series. Series s has the label set ref[s] in arena, its totals
	// for the read sgen[s] (value: a counter's total, a histogram's
	// observations including those above the last bucket; sum: a
	// histogram's raw sum in bucket units; bk[s*nb:(s+1)*nb]: its
	// buckets) and flags sflag[s]. busy (ttl only, see expire.go) is the
	// read in which a key of the series moved within the ttl.
	arena    labelArena
	ref      []labelRef
	sgen     []uint32
	sflag    []uint8
	value    []uint64
	sum      []uint64
	bk       []uint64
	busy     []uint32
	sfree    []int32
	sets     idTable // label set → series (sIndexed), see injective
	cached   int     // series with sCached
	uncached []int32 // series made by this read for uncached keys
	over     int32   // the overflow series; noSeries until first used
	ttl      bool    // keep busy
	// injective: the labels cover the key (without its bucket field) and
	// every chain gives distinct bytes distinct values (uint, hex): two
	// keys have the same label set only if they are the same key. The
	// series of a cached key then needs no lookup in sets (the key cache
	// finds it) and is not indexed there; that saves a random access per
	// new key, most of the first read's extra cost.
	injective bool

	active  []int32 // series exported by this read, in first-seen order
	gen     uint64
	seen    int // cached keys seen by this read
	touched int // cached series touched by this read
	dropped int // entries added to the overflow series in this read
	// keySeries is the series of the key last given to series, even when
	// that returned the overflow series; noSeries for keys that no series
	// exports (skipped or failed).
	keySeries int32
	buf, rec  []byte

	// Batch reads return a hash map's keys in bucket order, which changes
	// little between reads. The entries of the last read's keys, in
	// order, let most keys be matched by comparing bytes with the key at
	// the same place last time, sequentially, instead of a random-access
	// hash lookup. A key inserted or deleted since costs one lookup, which
	// also resynchronises the cursor. Entry -1: key not cached.
	lastIdx, curIdx []int32
	cursor          int

	names []string  // label names, in key order
	nb    int       // histogram buckets
	keep  []int     // histogram buckets emitted (equal bounds: only the last)
	upper []float64 // their bounds; shared read-only by the emitted metrics

	config  string           // for decoder error logs
	metric  string           // same
	decErrs []*decoderErrors // per decoder name of the label chains; fixed
}

// newReadState builds the read state of a metric of config (the config's
// name, for decoder error logs and metrics).
func newReadState(mp *MetricPlan, limit int, config string) readState {
	rs := readState{
		config:    config,
		metric:    mp.Name,
		limit:     max(limit, 1),
		seed:      maphash.MakeSeed(),
		names:     make([]string, len(mp.Labels)),
		nb:        len(mp.Buckets.Upper),
		over:      noSeries,
		keySeries: noSeries,
		kl:        mp.KeySize,
		off:       newOffHeap(),
	}
	rs.index.h, rs.sets.h = rs.off, rs.off
	if mp.Histogram {
		rs.kl = mp.BucketOff
	}
	covered := make([]bool, rs.kl)
	rs.injective = true
	for _, l := range mp.Labels {
		rs.injective = rs.injective && l.Chain.Injective()
		for b := l.Off; b < l.Off+l.Size && b < rs.kl; b++ {
			covered[b] = true
		}
	}
	for _, c := range covered {
		rs.injective = rs.injective && c
	}
	for i, l := range mp.Labels {
		rs.names[i] = l.Name
		for _, name := range l.Chain.Names() {
			if rs.decoderIndex(name) < 0 {
				rs.decErrs = append(rs.decErrs, &decoderErrors{decoder: name})
			}
		}
	}
	up := mp.Buckets.Upper
	for i := range up {
		// Equal bounds (bucket_keys [1, 1, 5]) make one bucket, with the
		// count of the last one, as a map of bound → count would.
		if i+1 < len(up) && up[i+1] == up[i] {
			continue
		}
		rs.keep = append(rs.keep, i)
		rs.upper = append(rs.upper, up[i])
	}
	return rs
}

// begin starts a read.
func (m *metric) begin() {
	rs := &m.rs
	rs.gen++
	rs.active = rs.active[:0]
	rs.seen, rs.touched, rs.dropped = 0, 0, 0
	rs.curIdx, rs.cursor = rs.curIdx[:0], 0
	rs.deferred = rs.index.len() == 0 && !rs.ttl && !m.Histogram
}

// settle ends the deferred indexing of a read (see readState.deferred):
// it indexes the entries the read added, and folds into the first one
// any second entry of a key. A batch read lists a key once, but the
// per-key iteration starts again from the first key when the key it
// stands on is deleted. Call it after the read's last entry, before its
// series are emitted.
func (rs *readState) settle() {
	if !rs.deferred {
		return
	}
	rs.deferred = false
	n := rs.pending
	rs.pending = 0
	if n == 0 {
		return
	}
	rs.index.reserve(n)
	// 32 bits of each key's hash << 32 | its entry, in entry order, then
	// in the order of the table's regions: both passes read and write
	// memory in order, and so do the inserts.
	v := make([]uint64, 0, n)
	for e, s := range rs.esid {
		if s != noSeries {
			h := maphash.Bytes(rs.seed, rs.keys[e*rs.kl:(e+1)*rs.kl])
			v = append(v, uint64(uint32(h))<<32|uint64(e))
		}
	}
	for _, x := range rs.index.regionSort(v) {
		e, h := int32(uint32(x)), x>>32
		if d := rs.index.find(h, func(d int32) bool { return rs.keyIs(d, rs.keys[int(e)*rs.kl:int(e+1)*rs.kl]) }); d >= 0 {
			rs.mergeDup(d, e)
			continue
		}
		rs.index.insert(h, e)
	}
}

// mergeDup folds entry e, a second entry of the key of entry d made by
// the same deferred read, into d: an injective metric made a series for
// each, whose totals go to d's (or to the overflow series, where d's
// went). Other metrics found d's series for both.
func (rs *readState) mergeDup(d, e int32) {
	s0, s1 := rs.esid[d], rs.esid[e]
	if s1 >= 0 && s1 != s0 {
		if rs.sflag[s1]&sDropped == 0 {
			if to := s0; to >= 0 {
				if rs.sflag[to]&sDropped != 0 {
					to = rs.overflowSeries()
				}
				rs.value[to] += rs.value[s1]
				if rs.nb > 0 {
					rs.sum[to] += rs.sum[s1]
					for i, b := range rs.bk[int(s1)*rs.nb : int(s1+1)*rs.nb] {
						rs.bk[int(to)*rs.nb+i] += b
					}
				}
			}
			if i := slices.Index(rs.active, s1); i >= 0 {
				rs.active = slices.Delete(rs.active, i, i+1)
			}
		}
		if rs.sflag[s1]&sCached != 0 {
			rs.touched--
		}
		rs.freeSeries(s1)
	}
	rs.esid[e] = noSeries
	rs.efree = append(rs.efree, e)
	rs.seen--
}

// endCache finishes a read of the decode cache. After a complete read (ok),
// keys and series that it did not see are forgotten.
func (m *metric) endCache(ok bool) {
	rs := &m.rs
	m.noteOverflow(rs.dropped)
	for _, s := range rs.uncached {
		if rs.sflag[s]&sCached == 0 {
			rs.freeSeries(s)
		}
	}
	rs.uncached = rs.uncached[:0]
	rs.lastIdx, rs.curIdx = rs.curIdx, rs.lastIdx
	if !ok {
		return
	}
	gen := uint32(rs.gen)
	if rs.index.len() > rs.seen {
		for e, s := range rs.esid {
			if s != noSeries && rs.eseen[e] != gen {
				rs.freeEntry(int32(e))
			}
		}
	}
	if rs.cached > rs.touched {
		for s, f := range rs.sflag {
			if f&sCached != 0 && rs.sgen[s] != gen {
				rs.freeSeries(int32(s))
			}
		}
	}
	rs.peak = max(rs.peak, rs.index.len())
}

// compactIfSparse rebuilds the slabs, the tables and the label arena when
// they hold mostly dead rows: after the BPF map shrank a lot, or after
// many series came and went (the arena only grows between rebuilds). It
// renumbers the series: call it at the very end of a read.
func (rs *readState) compactIfSparse() {
	sparse := func(live, all int) bool { return all > 4096 && live < all/4 }
	if sparse(rs.index.len(), rs.peak) || sparse(len(rs.ref)-len(rs.sfree), len(rs.ref)) || sparse(rs.arena.live, rs.arena.used) {
		rs.compact()
	}
}

// compact rebuilds every slab and table of the read state with only its
// live rows, in their order.
func (rs *readState) compact() {
	// Series first: the entries refer to them.
	remap := make([]int32, len(rs.ref))
	old := *rs
	n := len(rs.ref) - len(rs.sfree)
	rs.arena = labelArena{}
	rs.ref, rs.sgen, rs.sflag = makeOff[labelRef](rs.off, n)[:0], makeOff[uint32](rs.off, n)[:0], makeOff[uint8](rs.off, n)[:0]
	rs.value, rs.sum, rs.bk, rs.busy, rs.sfree = makeOff[uint64](rs.off, n)[:0], nil, nil, nil, nil
	rs.sets = idTable{h: rs.off}
	rs.cached = 0
	for s, f := range old.sflag {
		remap[s] = noSeries
		if f&sLive == 0 {
			continue
		}
		rec := record(old.arena.chunks, old.ref[s])
		ns := rs.newSeries(rec, f)
		if f&sIndexed != 0 {
			rs.sets.insert(maphash.Bytes(rs.seed, rec), ns)
		}
		remap[s] = ns
		rs.sgen[ns], rs.value[ns] = old.sgen[s], old.value[s]
		if rs.nb > 0 {
			rs.sum[ns] = old.sum[s]
			copy(rs.bk[int(ns)*rs.nb:], old.bk[s*rs.nb:(s+1)*rs.nb])
		}
		if rs.ttl {
			rs.busy[ns] = old.busy[s]
		}
	}
	if rs.over >= 0 {
		rs.over = remap[rs.over]
	}
	// Then the key cache.
	n = rs.index.len()
	rs.keys, rs.esid = makeOff[byte](rs.off, n*rs.kl)[:0], makeOff[int32](rs.off, n)[:0]
	rs.eseen, rs.epos = makeOff[uint32](rs.off, n)[:0], makeOff[int32](rs.off, n)[:0]
	rs.efree, rs.index = nil, idTable{h: rs.off}
	for e, s := range old.esid {
		if s == noSeries {
			continue
		}
		if s >= 0 {
			s = remap[s]
		}
		k := old.keys[e*rs.kl : (e+1)*rs.kl]
		rs.newEntry(k, s, old.epos[e])
		rs.eseen[len(rs.eseen)-1] = old.eseen[e]
	}
	rs.peak = rs.index.len()
	rs.lastIdx, rs.curIdx = nil, nil // the next read finds keys by the index
	for _, t := range []*idTable{&old.index, &old.sets} {
		releaseOff(rs.off, t.slots)
	}
	releaseOff(rs.off, old.keys)
	releaseOff(rs.off, old.esid)
	releaseOff(rs.off, old.eseen)
	releaseOff(rs.off, old.epos)
	releaseOff(rs.off, old.ref)
	releaseOff(rs.off, old.sgen)
	releaseOff(rs.off, old.sflag)
	releaseOff(rs.off, old.value)
	releaseOff(rs.off, old.sum)
	releaseOff(rs.off, old.bk)
	releaseOff(rs.off, old.busy)
	releaseOff(rs.off, old.lastIdx)
	releaseOff(rs.off, old.curIdx)
}

// series returns the series that the entry with this key adds to in the
// read in flight, or noSeries when the entry is dropped: a decoder skipped
// or failed on it (counted in decoder errors). A key whose series is over
// max_series adds to the metric's overflow series.
func (m *metric) series(key []byte) int32 {
	rs := &m.rs
	lk := key
	if m.Histogram {
		lk = key[:m.BucketOff]
	}
	gen := uint32(rs.gen)
	idx := int32(-1)
	if rs.deferred {
		// The first read: every key is new (see settle).
	} else if j := rs.cursor; j < len(rs.lastIdx) {
		if e := rs.lastIdx[j]; e >= 0 && rs.esid[e] != noSeries && rs.keyIs(e, lk) {
			idx = e
			rs.cursor = j + 1
		}
	}
	if idx < 0 && len(lk) == rs.kl && !rs.deferred {
		if e := rs.findKey(lk); e >= 0 {
			idx = e
			rs.cursor = int(rs.epos[e]) + 1
		}
	}
	pos := int32(len(rs.curIdx))
	var s int32
	if idx >= 0 {
		if rs.eseen[idx] != gen {
			rs.eseen[idx] = gen
			rs.seen++
		}
		rs.epos[idx] = pos
		s = rs.esid[idx]
	} else {
		var cache bool
		s, cache = m.decode(lk, rs.index.len()+rs.pending < rs.limit && len(lk) == rs.kl)
		if cache {
			idx = rs.newEntry(lk, s, pos)
			rs.seen++
		}
	}
	rs.curIdx = append(growOff(rs.off, rs.curIdx, 1), idx)
	rs.keySeries = noSeries
	if s == skipSeries {
		return noSeries
	}
	if s < skipSeries {
		rs.decErrs[-3-s].n.Add(1)
		return noSeries
	}
	if rs.sgen[s] != gen {
		rs.sgen[s] = gen
		if rs.sflag[s]&sCached != 0 {
			rs.touched++
		}
		if len(rs.active) >= m.maxSeries {
			rs.sflag[s] |= sDropped
		} else {
			rs.sflag[s] &^= sDropped
			rs.activate(s)
		}
	}
	rs.keySeries = s
	if rs.sflag[s]&sDropped != 0 {
		rs.dropped++
		return rs.overflowSeries()
	}
	return s
}

// keyIs says whether entry e holds key k.
func (rs *readState) keyIs(e int32, k []byte) bool {
	return len(k) == rs.kl && bytes.Equal(rs.keys[int(e)*rs.kl:int(e+1)*rs.kl], k)
}

// findKey returns the entry of key k, or -1.
func (rs *readState) findKey(k []byte) int32 {
	return rs.index.find(maphash.Bytes(rs.seed, k), func(e int32) bool { return rs.keyIs(e, k) })
}

// newEntry caches key k (of rs.kl bytes) as seen at pos by this read, with
// series s, and returns its entry (indexed now, or by settle).
func (rs *readState) newEntry(k []byte, s int32, pos int32) int32 {
	gen := uint32(rs.gen)
	var e int32
	if n := len(rs.efree); n > 0 {
		e = rs.efree[n-1]
		rs.efree = rs.efree[:n-1]
		copy(rs.keys[int(e)*rs.kl:], k)
		rs.esid[e], rs.eseen[e], rs.epos[e] = s, gen, pos
	} else {
		e = int32(len(rs.esid))
		rs.keys = append(growOff(rs.off, rs.keys, len(k)), k...)
		rs.esid = append(growOff(rs.off, rs.esid, 1), s)
		rs.eseen = append(growOff(rs.off, rs.eseen, 1), gen)
		rs.epos = append(growOff(rs.off, rs.epos, 1), pos)
	}
	if rs.deferred {
		rs.pending++
	} else {
		rs.index.insert(maphash.Bytes(rs.seed, k), e)
	}
	return e
}

// freeEntry forgets entry e.
func (rs *readState) freeEntry(e int32) {
	rs.index.remove(maphash.Bytes(rs.seed, rs.keys[int(e)*rs.kl:int(e+1)*rs.kl]), e)
	rs.esid[e] = noSeries
	rs.efree = append(rs.efree, e)
}

// newSeries adds a series with label set rec (a record, see labels.go)
// and flags f, with no totals yet; the caller indexes it in sets.
func (rs *readState) newSeries(rec []byte, f uint8) int32 {
	ref := rs.arena.put(rec)
	var s int32
	if n := len(rs.sfree); n > 0 {
		s = rs.sfree[n-1]
		rs.sfree = rs.sfree[:n-1]
		rs.ref[s], rs.sgen[s], rs.sflag[s] = ref, 0, f
		if rs.ttl {
			rs.busy[s] = 0
		}
	} else {
		s = int32(len(rs.ref))
		rs.ref = append(growOff(rs.off, rs.ref, 1), ref)
		rs.sgen = append(growOff(rs.off, rs.sgen, 1), 0)
		rs.sflag = append(growOff(rs.off, rs.sflag, 1), f)
		rs.value = append(growOff(rs.off, rs.value, 1), 0)
		if rs.nb > 0 {
			rs.sum = append(growOff(rs.off, rs.sum, 1), 0)
			rs.bk = append(growOff(rs.off, rs.bk, rs.nb), make([]uint64, rs.nb)...)
		}
		if rs.ttl {
			rs.busy = append(growOff(rs.off, rs.busy, 1), 0)
		}
	}
	if f&sCached != 0 {
		rs.cached++
	}
	return s
}

// freeSeries forgets series s. Its sDropped flag stays until the series
// is reused, for expiry at the end of the read (see expire.go).
func (rs *readState) freeSeries(s int32) {
	if rs.sflag[s]&sIndexed != 0 {
		rs.sets.remove(maphash.Bytes(rs.seed, record(rs.arena.chunks, rs.ref[s])), s)
	}
	rs.arena.release(rs.ref[s])
	if rs.sflag[s]&sCached != 0 {
		rs.cached--
	}
	rs.sflag[s] &= sDropped
	rs.sfree = append(rs.sfree, s)
}

// OverflowValue is the value of every label of a metric's overflow series,
// which sums the map entries whose series would have gone over max_series
// (as the OpenTelemetry SDK's cardinality limit does), so that the sum over
// a metric's series always equals the sum over its map.
const OverflowValue = "__overflow__"

// overflowSeries returns the metric's overflow series, started for the
// read in flight.
func (rs *readState) overflowSeries() int32 {
	if rs.over < 0 {
		values := make([]string, len(rs.names))
		for i := range values {
			values[i] = OverflowValue
		}
		rs.over = rs.newSeries(appendRecord(nil, values), sLive)
	}
	if o := rs.over; rs.sgen[o] != uint32(rs.gen) {
		rs.sgen[o] = uint32(rs.gen)
		rs.activate(o)
	}
	return rs.over
}

// activate zeroes a series' totals and adds it to the read's active series.
func (rs *readState) activate(s int32) {
	rs.value[s] = 0
	if rs.nb > 0 {
		rs.sum[s] = 0
		clear(rs.bk[int(s)*rs.nb : int(s+1)*rs.nb])
	}
	rs.active = append(growOff(rs.off, rs.active, 1), s)
}

// decoderIndex returns the index in decErrs of a decoder name, or -1.
func (rs *readState) decoderIndex(name string) int {
	for i, d := range rs.decErrs {
		if d.decoder == name {
			return i
		}
	}
	return -1
}

// failure logs a decoder error (rate-limited, see decodeLogger) and returns
// the sentinel that counts it under the failing decoder's name.
func (rs *readState) failure(err error) int32 {
	name := "unknown"
	var de *decoder.DecodeError
	if errors.As(err, &de) {
		name = de.Decoder
	}
	decodeLog.log(rs.config, rs.metric, name, err)
	// decErrs holds every decoder of the metric's chains (newReadState),
	// and DecodeBytes names the one that failed: the fallback is not
	// reached.
	return failedSeries(max(rs.decoderIndex(name), 0))
}

// decode decodes the labels of a key and returns the series of its label
// set, creating it if needed. cached says whether the key may be cached,
// and the result whether it is: not when a label's value is not settled
// (decoder.Chain.DecodeSettled), so that the key is decoded again at the
// next read. Series of cached keys are kept across reads; those of
// uncached keys only for the read in flight.
func (m *metric) decode(lk []byte, cached bool) (int32, bool) {
	rs := &m.rs
	rs.buf = rs.buf[:0]
	for _, l := range m.Labels {
		// The value's length goes before it: one byte, unless it is
		// 128 bytes or more.
		at := len(rs.buf)
		rs.buf = append(rs.buf, 0)
		var settled bool
		var err error
		rs.buf, settled, err = l.Chain.AppendSettled(rs.buf, lk[l.Off:l.Off+l.Size])
		if err != nil {
			if errors.Is(err, decoder.ErrSkip) {
				return skipSeries, cached
			}
			return rs.failure(err), cached
		}
		cached = cached && settled
		if n := len(rs.buf) - at - 1; n < 0x80 {
			rs.buf[at] = byte(n)
		} else {
			var lb [binary.MaxVarintLen64]byte
			k := binary.PutUvarint(lb[:], uint64(n))
			rs.buf = append(rs.buf, lb[:k-1]...)
			copy(rs.buf[at+k:], rs.buf[at+1:at+1+n])
			copy(rs.buf[at:], lb[:k])
		}
	}
	rs.rec = binary.AppendUvarint(rs.rec[:0], uint64(len(rs.buf)))
	rs.rec = append(rs.rec, rs.buf...)
	rec := rs.rec
	if cached && rs.injective {
		return rs.newSeries(rec, sLive|sCached), true
	}
	h := maphash.Bytes(rs.seed, rec)
	s := rs.sets.find(h, func(s int32) bool { return bytes.Equal(record(rs.arena.chunks, rs.ref[s]), rec) })
	if s >= 0 {
		if cached && rs.sflag[s]&sCached == 0 {
			// The series now has a cached key: keep it across reads.
			rs.sflag[s] |= sCached
			rs.cached++
			if rs.sgen[s] == uint32(rs.gen) {
				rs.touched++
			}
		}
		return s, cached
	}
	f := sLive | sIndexed
	if cached {
		f |= sCached
	}
	s = rs.newSeries(rec, f)
	rs.sets.insert(h, s)
	if !cached {
		rs.uncached = append(rs.uncached, s)
	}
	return s, cached
}

// emitCounters hands the read's active series to f, with their totals:
// two allocations for all of them.
func (m *metric) emitCounters(f *Family) {
	rs := &m.rs
	f.chunks = rs.arena.view()
	f.refs = make([]labelRef, len(rs.active))
	f.values = make([]float64, len(rs.active))
	for i, s := range rs.active {
		f.refs[i] = rs.ref[s]
		f.values[i] = m.number(rs.value[s])
	}
}

// emitHistograms hands the read's active series to f, with their
// cumulative buckets, counts and sums: four allocations for all of them.
func (m *metric) emitHistograms(f *Family) {
	rs := &m.rs
	nk := len(rs.keep)
	f.chunks = rs.arena.view()
	f.refs = make([]labelRef, len(rs.active))
	f.cum = make([]uint64, len(rs.active)*nk)
	f.counts = make([]uint64, len(rs.active))
	f.sums = make([]float64, len(rs.active))
	for i, s := range rs.active {
		f.refs[i] = rs.ref[s]
		c := f.cum[i*nk : (i+1)*nk]
		var run uint64
		j := 0
		for b, n := range rs.bk[int(s)*rs.nb : int(s+1)*rs.nb] {
			run += n
			if j < nk && rs.keep[j] == b {
				c[j] = run
				j++
			}
		}
		f.counts[i] = rs.value[s]
		f.sums[i] = float64(rs.sum[s]) * m.Buckets.Multiplier
	}
}

// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"bytes"
	"errors"

	"github.com/kernel-exporter/kernel_exporter/decoder"
)

// The per-entry work of a read is finding the key's cached *series and
// adding the value to it in place. The key's bytes (without the bucket
// field) are compared with the key at the same place in the last read,
// which usually matches (see readState.lastKeys); otherwise one hash lookup
// finds it. Keys that decode to the same label set share one series, so
// summing them needs no second lookup. A series carries its label pairs,
// built once, and the metrics a read emits point at them: a steady-state
// read allocates nothing per entry, only a few slabs per metric.
//
// A read hands its active series to the Family it returns (see emit*):
// their label values are immutable, and the totals the Family serves are
// copied into its slabs, so a later read never changes a Snapshot.
//
// Everything here is touched only by the read in flight; reads of one
// config never overlap (see Config.Collect), so there are no locks.

// series is one decoded label set of a metric (without the bucket label),
// and its running totals for the read in flight.
type series struct {
	// Set when the series is built, then read-only: the snapshots a read
	// returns point here, and scrapes may still write them out while a
	// later read updates the totals below.
	values []string // label values, in key order: substrings of one string

	gen       uint64 // the read that last touched the fields below
	dropped   bool   // over max_series in read gen: its entries go to the overflow series
	inGroups  bool   // held by readState.groups
	value     uint64 // counter total
	count     uint64 // histogram: observations, including those above the last bucket
	sum       uint64 // histogram: raw sum, in bucket units
	perBucket []uint64

	failed int // sentinels of failed keys: 1 + index in readState.decErrs

	// busy is the read in which a key of the series moved within its
	// metric's ttl, or stayed in the exporter (see expire.go).
	busy uint64
}

// skipSeries stands for keys that a decoder skipped (ErrSkip), and
// readState.bad for keys that a decoder failed on (one per decoder name).
// They are never aggregated or changed.
var skipSeries = &series{}

// keyEntry is a cached key: its series, the last read that saw the key, and
// where in that read.
type keyEntry struct {
	s    *series
	seen uint64
	pos  int32
}

// readState is a metric's decoding and aggregation state. The cache holds
// only what the last complete read saw: a key gone from the BPF map is
// dropped at the end of the next read, so the cache follows the map (pids and
// cgroups that come and go do not accumulate), and it never holds more than
// limit keys. Keys that do not fit are decoded at every read.
type readState struct {
	limit      int
	index      keyIndex   // map key bytes (labels part) → entries index
	entries    []keyEntry // unused slots are listed in free
	free       []int32
	groups     map[string]*series // label values joined by 0xff → series of cached keys
	overflow   map[string]*series // same, for series of uncached keys; this read only
	peak       int                // largest len(index) since the maps were last rebuilt
	active     []*series          // series exported by this read, in first-seen order
	lastActive int                // len(active) at the end of the last read
	gen        uint64
	seen       int     // cached keys seen by this read
	touched    int     // series of groups touched by this read
	dropped    int     // entries added to the overflow series in this read
	over       *series // the overflow series; built at first use
	// keySeries is the series of the key last given to series, even when
	// that returned the overflow series; nil for keys that no series
	// exports (skipped or failed).
	keySeries *series
	buf       []byte
	ends      []int

	// Batch reads return a hash map's keys in bucket order, which changes
	// little between reads. The keys of the last read, in order, and their
	// entries let most entries be matched by comparing bytes with the key
	// at the same place last time, sequentially, instead of a random
	// access hash lookup. A key inserted or deleted since costs one lookup,
	// which also resynchronises the cursor. Entry -1: key not cached.
	lastKeys, curKeys []byte
	lastIdx, curIdx   []int32
	cursor            int

	names []string  // label names, in key order
	nb    int       // histogram buckets
	keep  []int     // histogram buckets emitted (equal bounds: only the last)
	upper []float64 // their bounds; shared read-only by the emitted metrics

	config  string           // for decoder error logs
	metric  string           // same
	decErrs []*decoderErrors // per decoder name of the label chains; fixed
	bad     []*series        // bad[i] stands for keys decErrs[i] failed on
}

// newReadState builds the read state of a metric of config (the config's
// name, for decoder error logs and metrics).
func newReadState(mp *MetricPlan, limit int, config string) readState {
	rs := readState{
		config:   config,
		metric:   mp.Name,
		limit:    max(limit, 1),
		groups:   map[string]*series{},
		overflow: map[string]*series{},
		names:    make([]string, len(mp.Labels)),
		nb:       len(mp.Buckets.Upper),
	}
	keyLen := mp.KeySize
	if mp.Histogram {
		keyLen = mp.BucketOff
	}
	rs.index = newKeyIndex(keyLen, 0)
	for i, l := range mp.Labels {
		rs.names[i] = l.Name
		for _, name := range l.Chain.Names() {
			if rs.decoderIndex(name) < 0 {
				rs.decErrs = append(rs.decErrs, &decoderErrors{decoder: name})
				rs.bad = append(rs.bad, &series{failed: len(rs.decErrs)})
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
	rs.active = make([]*series, 0, rs.lastActive)
	rs.seen, rs.touched, rs.dropped = 0, 0, 0
	rs.curKeys, rs.curIdx, rs.cursor = rs.curKeys[:0], rs.curIdx[:0], 0
}

// endCache finishes a read of the decode cache. After a complete read (ok),
// keys and series that it did not see are forgotten.
func (m *metric) endCache(ok bool) {
	rs := &m.rs
	m.noteOverflow(rs.dropped)
	clear(rs.overflow)
	rs.lastActive = len(rs.active)
	rs.active = nil // handed to the read's Family, or dropped on error
	rs.lastKeys, rs.curKeys = rs.curKeys, rs.lastKeys
	rs.lastIdx, rs.curIdx = rs.curIdx, rs.lastIdx
	if !ok {
		return
	}
	if rs.index.len() > rs.seen {
		rs.index.sweep(func(i int32) bool {
			if rs.entries[i].seen == rs.gen {
				return false
			}
			rs.entries[i] = keyEntry{}
			rs.free = append(rs.free, i)
			return true
		})
	}
	if len(rs.groups) > rs.touched {
		for k, s := range rs.groups {
			if s.gen != rs.gen {
				s.inGroups = false
				delete(rs.groups, k)
			}
		}
	}
	rs.peak = max(rs.peak, rs.index.len())
	if rs.peak > 4096 && rs.index.len() < rs.peak/4 {
		rs.compact()
	}
}

// compact rebuilds the cache maps after the BPF map shrank a lot: Go maps
// do not give memory back as keys are deleted.
func (rs *readState) compact() {
	entries := make([]keyEntry, 0, rs.index.len())
	index := rs.index.rebuilt(func(i int32) int32 {
		entries = append(entries, rs.entries[i])
		return int32(len(entries) - 1)
	})
	groups := make(map[string]*series, len(rs.groups))
	for k, s := range rs.groups {
		groups[k] = s
	}
	rs.index, rs.entries, rs.free, rs.groups = index, entries, nil, groups
	rs.overflow = map[string]*series{}
	rs.peak = index.len()
	rs.lastKeys, rs.curKeys, rs.lastIdx, rs.curIdx = nil, nil, nil, nil
}

// series returns the series that the entry with this key adds to in the
// read in flight, or nil when the entry is dropped: a decoder skipped or
// failed on it (counted in decoder errors), or its series is over
// max_series, in which case it adds to the metric's overflow series.
func (m *metric) series(key []byte) *series {
	rs := &m.rs
	lk := key
	if m.Histogram {
		lk = key[:m.BucketOff]
	}
	kl, j := len(lk), rs.cursor
	idx := int32(-1)
	if j < len(rs.lastIdx) && (j+1)*kl <= len(rs.lastKeys) && rs.lastIdx[j] >= 0 &&
		bytes.Equal(rs.lastKeys[j*kl:(j+1)*kl], lk) {
		idx = rs.lastIdx[j]
		rs.cursor = j + 1
	} else if i, ok := rs.index.get(lk); ok {
		idx = i
		rs.cursor = int(rs.entries[i].pos) + 1
	}
	pos := int32(len(rs.curIdx))
	var s *series
	if idx >= 0 {
		e := &rs.entries[idx]
		if e.seen != rs.gen {
			e.seen = rs.gen
			rs.seen++
		}
		e.pos = pos
		s = e.s
	} else {
		var cache bool
		s, cache = m.decode(lk, rs.index.len() < rs.limit)
		if cache {
			idx = rs.newEntry(keyEntry{s: s, seen: rs.gen, pos: pos})
			rs.index.put(lk, idx)
			rs.seen++
		}
	}
	rs.curKeys = append(rs.curKeys, lk...)
	rs.curIdx = append(rs.curIdx, idx)
	rs.keySeries = nil
	if s == skipSeries {
		return nil
	}
	if s.failed != 0 {
		rs.decErrs[s.failed-1].n.Add(1)
		return nil
	}
	if s.gen != rs.gen {
		s.gen = rs.gen
		if s.inGroups {
			rs.touched++
		}
		s.dropped = len(rs.active) >= m.maxSeries
		if !s.dropped {
			rs.activate(s)
		}
	}
	rs.keySeries = s
	if s.dropped {
		rs.dropped++
		return rs.overflowSeries()
	}
	return s
}

// OverflowValue is the value of every label of a metric's overflow series,
// which sums the map entries whose series would have gone over max_series
// (as the OpenTelemetry SDK's cardinality limit does), so that the sum over
// a metric's series always equals the sum over its map.
const OverflowValue = "__overflow__"

// overflowSeries returns the metric's overflow series, started for the
// read in flight.
func (rs *readState) overflowSeries() *series {
	o := rs.over
	if o == nil {
		values := make([]string, len(rs.names))
		for i := range values {
			values[i] = OverflowValue
		}
		o = &series{values: values}
		rs.over = o
	}
	if o.gen != rs.gen {
		o.gen = rs.gen
		rs.activate(o)
	}
	return o
}

// activate zeroes a series' totals and adds it to the read's active series.
func (rs *readState) activate(s *series) {
	s.value, s.count, s.sum = 0, 0, 0
	if rs.nb > 0 {
		if s.perBucket == nil {
			s.perBucket = make([]uint64, rs.nb)
		} else {
			clear(s.perBucket)
		}
	}
	rs.active = append(rs.active, s)
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
// the sentinel series that counts it under the failing decoder's name.
func (rs *readState) failure(err error) *series {
	name := "unknown"
	var de *decoder.DecodeError
	if errors.As(err, &de) {
		name = de.Decoder
	}
	decodeLog.log(rs.config, rs.metric, name, err)
	if i := rs.decoderIndex(name); i >= 0 {
		return rs.bad[i]
	}
	// Not reached: decErrs holds every decoder of the metric's chains
	// (newReadState), and DecodeBytes names the one that failed.
	return rs.bad[0]
}

func (rs *readState) newEntry(e keyEntry) int32 {
	if n := len(rs.free); n > 0 {
		i := rs.free[n-1]
		rs.free = rs.free[:n-1]
		rs.entries[i] = e
		return i
	}
	rs.entries = append(rs.entries, e)
	return int32(len(rs.entries) - 1)
}

// decode decodes the labels of a key and returns the series of its label
// set, creating it if needed. cached says whether the key may be cached,
// and the result whether it is: not when a label's value is not settled
// (decoder.Chain.DecodeSettled), so that the key is decoded again at the
// next read. The series of cached keys are kept in groups across reads.
func (m *metric) decode(lk []byte, cached bool) (*series, bool) {
	rs := &m.rs
	rs.buf, rs.ends = rs.buf[:0], rs.ends[:0]
	for _, l := range m.Labels {
		// Valid UTF-8, so without 0xff, the separator below.
		out, settled, err := l.Chain.DecodeSettled(lk[l.Off : l.Off+l.Size])
		if err != nil {
			if errors.Is(err, decoder.ErrSkip) {
				return skipSeries, cached
			}
			return rs.failure(err), cached
		}
		cached = cached && settled
		rs.buf = append(rs.buf, out...)
		rs.ends = append(rs.ends, len(rs.buf))
		rs.buf = append(rs.buf, 0xff) // separator: 0xff never occurs in UTF-8
	}
	if s, ok := rs.groups[string(rs.buf)]; ok {
		return s, cached
	}
	if s, ok := rs.overflow[string(rs.buf)]; ok {
		if !cached {
			return s, cached
		}
		// The series now has a cached key: keep it across reads.
		delete(rs.overflow, string(rs.buf))
		s.inGroups = true
		if s.gen == rs.gen {
			rs.touched++
		}
		rs.groups[string(rs.buf)] = s
		return s, cached
	}
	joined := string(rs.buf)
	values := make([]string, len(rs.ends))
	start := 0
	for i, end := range rs.ends {
		values[i] = joined[start:end]
		start = end + 1
	}
	s := &series{values: values, inGroups: cached}
	if cached {
		rs.groups[joined] = s
	} else {
		rs.overflow[joined] = s
	}
	return s, cached
}

// emitCounters hands the read's active series to f, with their totals:
// one allocation for all of them.
func (m *metric) emitCounters(f *Family) {
	rs := &m.rs
	f.series = rs.active
	f.values = make([]float64, len(rs.active))
	for i, s := range rs.active {
		f.values[i] = m.number(s.value)
	}
}

// emitHistograms hands the read's active series to f, with their
// cumulative buckets, counts and sums: three allocations for all of them.
func (m *metric) emitHistograms(f *Family) {
	rs := &m.rs
	nk := len(rs.keep)
	f.series = rs.active
	f.cum = make([]uint64, len(rs.active)*nk)
	f.counts = make([]uint64, len(rs.active))
	f.sums = make([]float64, len(rs.active))
	for i, s := range rs.active {
		c := f.cum[i*nk : (i+1)*nk]
		var run uint64
		j := 0
		for b, n := range s.perBucket {
			run += n
			if j < nk && rs.keep[j] == b {
				c[j] = run
				j++
			}
		}
		f.counts[i] = s.count
		f.sums[i] = float64(s.sum) * m.Buckets.Multiplier
	}
}

package collector

import (
	"bytes"
	"errors"
	"sort"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

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
// Everything here is touched only by the read in flight; reads of one
// config never overlap (see Config.Collect), so there are no locks.

// series is one decoded label set of a metric (without the bucket label),
// and its running totals for the read in flight.
type series struct {
	// Set when the series is built, then read-only: the metrics a read
	// emits point here, and scrapes may still write them out while a later
	// read updates the totals below.
	desc   *prometheus.Desc
	values []string // label values, in key order: substrings of one string
	pairs  []*dto.LabelPair

	gen       uint64 // the read that last touched the fields below
	dropped   bool   // over max_series in read gen
	inGroups  bool   // held by readState.groups
	value     uint64 // counter total
	count     uint64 // histogram: observations, including those above the last bucket
	sum       uint64 // histogram: raw sum, in bucket units
	perBucket []uint64

	failed int // sentinels of failed keys: 1 + index in readState.decErrs
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
	limit    int
	index    map[string]int32 // map key bytes (labels part) → entries index
	entries  []keyEntry       // unused slots are listed in free
	free     []int32
	groups   map[string]*series // label values joined by 0xff → series of cached keys
	overflow map[string]*series // same, for series of uncached keys; this read only
	peak     int                // largest len(index) since the maps were last rebuilt
	active   []*series          // series exported by this read, in first-seen order
	gen      uint64
	seen     int // cached keys seen by this read
	touched  int // series of groups touched by this read
	dropped  int // entries dropped by max_series in this read
	buf      []byte
	ends     []int

	// Batch reads return a hash map's keys in bucket order, which changes
	// little between reads. The keys of the last read, in order, and their
	// entries let most entries be matched by comparing bytes with the key
	// at the same place last time, sequentially, instead of a random
	// access hash lookup. A key inserted or deleted since costs one lookup,
	// which also resynchronises the cursor. Entry -1: key not cached.
	lastKeys, curKeys []byte
	lastIdx, curIdx   []int32
	cursor            int

	desc  *prometheus.Desc
	names []string  // label names, in key order
	order []int     // label indices sorted by name (the order of dto label pairs)
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
func newReadState(mp *MetricPlan, desc *prometheus.Desc, limit int, config string) readState {
	rs := readState{
		config:   config,
		metric:   mp.Name,
		limit:    max(limit, 1),
		index:    map[string]int32{},
		groups:   map[string]*series{},
		overflow: map[string]*series{},
		desc:     desc,
		names:    make([]string, len(mp.Labels)),
		order:    make([]int, len(mp.Labels)),
		nb:       len(mp.Buckets.Upper),
	}
	for i, l := range mp.Labels {
		rs.names[i] = l.Name
		rs.order[i] = i
		for _, name := range l.Chain.Names() {
			if rs.decoderIndex(name) < 0 {
				rs.decErrs = append(rs.decErrs, &decoderErrors{decoder: name})
				rs.bad = append(rs.bad, &series{failed: len(rs.decErrs)})
			}
		}
	}
	sort.SliceStable(rs.order, func(a, b int) bool { return rs.names[rs.order[a]] < rs.names[rs.order[b]] })
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
	rs.curKeys, rs.curIdx, rs.cursor = rs.curKeys[:0], rs.curIdx[:0], 0
}

// end finishes a read. After a complete read (ok), keys and series that it
// did not see are forgotten.
func (m *metric) end(ok bool) {
	rs := &m.rs
	m.noteDropped(rs.dropped)
	clear(rs.overflow)
	clear(rs.active) // the emitted metrics do not need the slice
	rs.active = rs.active[:0]
	rs.lastKeys, rs.curKeys = rs.curKeys, rs.lastKeys
	rs.lastIdx, rs.curIdx = rs.curIdx, rs.lastIdx
	if !ok {
		return
	}
	if len(rs.index) > rs.seen {
		for k, i := range rs.index {
			if rs.entries[i].seen != rs.gen {
				delete(rs.index, k)
				rs.entries[i] = keyEntry{}
				rs.free = append(rs.free, i)
			}
		}
	}
	if len(rs.groups) > rs.touched {
		for k, s := range rs.groups {
			if s.gen != rs.gen {
				s.inGroups = false
				delete(rs.groups, k)
			}
		}
	}
	rs.peak = max(rs.peak, len(rs.index))
	if rs.peak > 4096 && len(rs.index) < rs.peak/4 {
		rs.compact()
	}
}

// compact rebuilds the cache maps after the BPF map shrank a lot: Go maps
// do not give memory back as keys are deleted.
func (rs *readState) compact() {
	index := make(map[string]int32, len(rs.index))
	entries := make([]keyEntry, 0, len(rs.index))
	for k, i := range rs.index {
		index[k] = int32(len(entries))
		entries = append(entries, rs.entries[i])
	}
	groups := make(map[string]*series, len(rs.groups))
	for k, s := range rs.groups {
		groups[k] = s
	}
	rs.index, rs.entries, rs.free, rs.groups = index, entries, nil, groups
	rs.overflow = map[string]*series{}
	rs.peak = len(index)
	rs.lastKeys, rs.curKeys, rs.lastIdx, rs.curIdx = nil, nil, nil, nil
}

// series returns the series that the entry with this key adds to in the
// read in flight, or nil when the entry is dropped: a decoder skipped or
// failed on it (counted in decoder errors), or its series is over
// max_series (counted in series dropped).
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
	} else if i, ok := rs.index[string(lk)]; ok {
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
		cache := len(rs.index) < rs.limit
		s = m.decode(lk, cache)
		if cache {
			idx = rs.newEntry(keyEntry{s: s, seen: rs.gen, pos: pos})
			rs.index[string(lk)] = idx
			rs.seen++
		}
	}
	rs.curKeys = append(rs.curKeys, lk...)
	rs.curIdx = append(rs.curIdx, idx)
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
		s.dropped = len(rs.active) >= m.MaxSeries
		if !s.dropped {
			s.value, s.count, s.sum = 0, 0, 0
			if m.Histogram {
				if s.perBucket == nil {
					s.perBucket = make([]uint64, rs.nb)
				} else {
					clear(s.perBucket)
				}
			}
			rs.active = append(rs.active, s)
		}
	}
	if s.dropped {
		rs.dropped++
		return nil
	}
	return s
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
// set, creating it if needed. cached says whether the key will be cached:
// the series of cached keys are kept in groups across reads.
func (m *metric) decode(lk []byte, cached bool) *series {
	rs := &m.rs
	rs.buf, rs.ends = rs.buf[:0], rs.ends[:0]
	for _, l := range m.Labels {
		// Valid UTF-8, so without 0xff, the separator below.
		out, err := l.Chain.DecodeBytes(lk[l.Off : l.Off+l.Size])
		if err != nil {
			if errors.Is(err, decoder.ErrSkip) {
				return skipSeries
			}
			return rs.failure(err)
		}
		rs.buf = append(rs.buf, out...)
		rs.ends = append(rs.ends, len(rs.buf))
		rs.buf = append(rs.buf, 0xff) // separator: 0xff never occurs in UTF-8
	}
	if s, ok := rs.groups[string(rs.buf)]; ok {
		return s
	}
	if s, ok := rs.overflow[string(rs.buf)]; ok {
		if !cached {
			return s
		}
		// The series now has a cached key: keep it across reads.
		delete(rs.overflow, string(rs.buf))
		s.inGroups = true
		if s.gen == rs.gen {
			rs.touched++
		}
		rs.groups[string(rs.buf)] = s
		return s
	}
	joined := string(rs.buf)
	values := make([]string, len(rs.ends))
	start := 0
	for i, end := range rs.ends {
		values[i] = joined[start:end]
		start = end + 1
	}
	s := &series{desc: rs.desc, values: values, pairs: rs.labelPairs(values), inGroups: cached}
	if cached {
		rs.groups[joined] = s
	} else {
		rs.overflow[joined] = s
	}
	return s
}

// labelPairs builds the dto label pairs of a series, sorted by name as
// prometheus.MakeLabelPairs does, with two allocations. Names point into
// rs.names and values into the series' values.
func (rs *readState) labelPairs(values []string) []*dto.LabelPair {
	if len(values) == 0 {
		return nil
	}
	pairs := make([]dto.LabelPair, len(values))
	ptrs := make([]*dto.LabelPair, len(values))
	for i, li := range rs.order {
		pairs[i].Name = &rs.names[li]
		pairs[i].Value = &values[li]
		ptrs[i] = &pairs[i]
	}
	return ptrs[:len(ptrs):len(ptrs)]
}

// counterMetric is one counter series of a read. It is immutable, so the
// scrapes that share a read may write it concurrently.
type counterMetric struct {
	s     *series // only its read-only part is used
	value float64
}

func (c *counterMetric) Desc() *prometheus.Desc { return c.s.desc }

// Write fills out as prometheus.MustNewConstMetric(desc, CounterValue, ...)
// would.
func (c *counterMetric) Write(out *dto.Metric) error {
	out.Label = c.s.pairs
	out.Counter = &dto.Counter{Value: &c.value}
	return nil
}

// histMetric is one histogram series of a read; immutable like
// counterMetric.
type histMetric struct {
	s     *series
	upper []float64 // bounds of the emitted buckets
	cum   []uint64  // cumulative counts of the emitted buckets
	count uint64
	sum   float64
}

func (h *histMetric) Desc() *prometheus.Desc { return h.s.desc }

// Write fills out as prometheus.MustNewConstHistogram would.
func (h *histMetric) Write(out *dto.Metric) error {
	buckets := make([]dto.Bucket, len(h.cum))
	ptrs := make([]*dto.Bucket, len(h.cum))
	for i := range h.cum {
		buckets[i].CumulativeCount = &h.cum[i]
		buckets[i].UpperBound = &h.upper[i]
		ptrs[i] = &buckets[i]
	}
	out.Label = h.s.pairs
	out.Histogram = &dto.Histogram{SampleCount: &h.count, SampleSum: &h.sum, Bucket: ptrs}
	return nil
}

// emitCounters appends the metrics of the read's active series: one
// allocation for all of them.
func (m *metric) emitCounters(out []prometheus.Metric) []prometheus.Metric {
	slab := make([]counterMetric, len(m.rs.active))
	for i, s := range m.rs.active {
		slab[i] = counterMetric{s: s, value: float64(s.value)}
		out = append(out, &slab[i])
	}
	return out
}

// emitHistograms appends the metrics of the read's active series: two
// allocations for all of them.
func (m *metric) emitHistograms(out []prometheus.Metric) []prometheus.Metric {
	rs := &m.rs
	nk := len(rs.keep)
	slab := make([]histMetric, len(rs.active))
	cum := make([]uint64, len(rs.active)*nk)
	for i, s := range rs.active {
		c := cum[i*nk : (i+1)*nk : (i+1)*nk]
		var run uint64
		j := 0
		for b, n := range s.perBucket {
			run += n
			if j < nk && rs.keep[j] == b {
				c[j] = run
				j++
			}
		}
		slab[i] = histMetric{s: s, upper: rs.upper, cum: c, count: s.count,
			sum: float64(s.sum) * m.Buckets.Multiplier}
		out = append(out, &slab[i])
	}
	return out
}

// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/perf"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kernel-exporter/kernel_exporter/config"
	"github.com/kernel-exporter/kernel_exporter/decoder"
)

// Counters from a perf event array (perf_event_array: true, as in
// ebpf_exporter). The metric's map is a BPF_MAP_TYPE_PERF_EVENT_ARRAY; a
// program writes records to it with bpf_perf_event_output (Linux 4.4+),
// each record laid out as the metric's labels describe a map key (label i
// takes size bytes, then skips padding bytes). Each record adds 1 to the
// series of its label set.
//
// A reader goroutine per metric drains the per-CPU ring buffers and counts
// records by their bytes in a table, a map of record → count that stands
// in for the BPF map: a read of the config (Config.read) reads the table
// as it reads a hash map, so records are decoded with the same decoder
// chains, key cache, max_series overflow series and decoder error counts
// as map keys, at scrape time. Every flush interval the table is emptied,
// and so the metric's series leave /metrics (they start again from 0 with
// the next record), as ebpf_exporter resets its counters.
//
// Bounds: each CPU's ring buffer is PerfBufferSize bytes (mmapped, charged
// to the exporter's locked memory); the table holds at most perfKeys
// distinct records (at most PerfTableBytes of record bytes); records
// beyond it add to the metric's overflow series. A record shorter than
// the labels is dropped (counted as reason "short"); bytes past the labels
// are ignored (the kernel pads each record to 8 bytes, with garbage: see
// perf.Record.RawSample). Records the kernel could not write because the
// ring was full are counted as reason "lost"
// (kernel_exporter_perf_event_array_dropped_total).

// PerfBufferSize is the size of each CPU's perf ring buffer of a
// perf_event_array counter, in bytes (a power of 2 of pages, as perf
// needs). A counted record takes 8 bytes of header and its data rounded
// up to 8 bytes (24 bytes for one u64 label): 128 KiB hold about 5,000
// records of a CPU written between two wake-ups of the reader.
const PerfBufferSize = 128 << 10

// PerfTableBytes bounds the record bytes a perf_event_array counter keeps
// in its table between flushes.
const PerfTableBytes = 16 << 20

// perfKeys is the number of distinct records a perf_event_array counter
// of keyLen-byte records with series limit maxSeries keeps: twice the
// series (several records may decode to one label set), at most
// PerfTableBytes of records and their map overhead (about 48 bytes), at
// least 1.
func perfKeys(keyLen, maxSeries int) int {
	return max(1, min(2*maxSeries, config.MaxMaxSeries, PerfTableBytes/(keyLen+48)))
}

// compilePerf builds the plan of a perf_event_array counter: its map must
// be a perf event array, and its labels (written out with sizes: a perf
// event array has no key type to infer them from) lay out the records.
func (p *Plan) compilePerf(path string, c *config.Counter, env *decoder.Env) (*MetricPlan, error) {
	cfg := p.Config
	ms, ok := p.spec.Maps[c.Name]
	if !ok || ms == nil {
		return nil, cfg.Errorf(path+".name", "map %s not found in %s (maps: %s)", config.Quote(c.Name), cfg.Object, mapNames(p.spec))
	}
	if ms.Type != ebpf.PerfEventArray {
		return nil, cfg.Errorf(path+".perf_event_array", "map %s has type %s, but perf_event_array: true needs a perf event array (BPF_MAP_TYPE_PERF_EVENT_ARRAY)", config.Quote(c.Name), mapTypeName(ms.Type))
	}
	flush, err := cfg.ParseFlushInterval(path, c)
	if err != nil {
		return nil, err
	}
	size, err := p.labelsEnd(path, c.Labels)
	if err != nil {
		return nil, err
	}
	mp := &MetricPlan{
		Name:      cfg.MetricName(c.Name),
		MapName:   c.Name,
		Help:      c.Help,
		KeySize:   size,
		ValueSize: 8,
		MaxSeries: c.MaxSeries,
		Kind:      KindCounter,
		Value:     ValueField{Size: 8},
		Perf:      true,
		Flush:     flush,
	}
	if _, err := p.compileLabels(path, mp, c.Labels, env); err != nil {
		return nil, err
	}
	return mp, nil
}

// entrySource is what a read reads: a BPF map (mapReader) or the table of
// a perf_event_array counter (perfTable). eachRaw calls fn for every entry
// with its key and value bytes, valid only during the call, and returns
// the number of entries.
type entrySource interface {
	eachRaw(fn func(key, val []byte)) (int, error)
}

// perfTable counts the records of one perf event array by their bytes.
type perfTable struct {
	config, metric string // for logs
	keyLen, limit  int
	rd             *perf.Reader

	// The records counted since the last flush, in the order first seen
	// (so that a read meets them, and max_series keeps them, in that
	// order): record i is keys[i*keyLen:(i+1)*keyLen], counted counts[i]
	// times, and index maps its bytes to i.
	mu     sync.Mutex
	index  map[string]int
	keys   []byte
	counts []uint64
	full   uint64 // records not counted in counts (table full) since the flush

	// lost and short count records dropped: lost by the kernel (ring
	// full), shorter than the labels.
	lost, short uint64

	// Copies made by eachRaw (reads of a config are one at a time).
	rkeys, rvals []byte

	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

// newPerfTable opens the ring buffers of perf event array m, for records
// of keyLen bytes, and starts reading them; the table is emptied every
// flush. Close stops it.
func newPerfTable(m *ebpf.Map, cfgName, metric string, keyLen, limit int, flush time.Duration) (*perfTable, error) {
	rd, err := perf.NewReader(m, PerfBufferSize)
	if err != nil {
		return nil, err
	}
	t := &perfTable{
		config: cfgName, metric: metric,
		keyLen: keyLen, limit: limit, rd: rd,
		index: map[string]int{},
		stop:  make(chan struct{}),
	}
	t.wg.Go(t.run)
	t.wg.Go(func() { t.flushEvery(flush) })
	return t, nil
}

// run reads records until the reader is closed.
func (t *perfTable) run() {
	var rec perf.Record
	warned := false
	for {
		err := t.rd.ReadInto(&rec)
		if err != nil {
			if errors.Is(err, perf.ErrClosed) || errors.Is(err, os.ErrClosed) {
				return
			}
			if !warned {
				warned = true
				slog.Warn("reading a perf event array", "config", t.config, "metric", t.metric, "err", err)
			}
			select {
			case <-t.stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		t.add(rec.RawSample, rec.LostSamples)
	}
}

// add counts one record: raw, its bytes, or lost records lost the kernel
// could not write.
func (t *perfTable) add(raw []byte, lost uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case lost > 0:
		t.lost += lost
	case len(raw) < t.keyLen:
		t.short++
	default:
		k := raw[:t.keyLen]
		if i, ok := t.index[string(k)]; ok {
			t.counts[i]++
		} else if len(t.counts) < t.limit {
			t.index[string(k)] = len(t.counts)
			t.keys = append(t.keys, k...)
			t.counts = append(t.counts, 1)
		} else {
			t.full++
		}
	}
}

// flushEvery empties the table every d until Close.
func (t *perfTable) flushEvery(d time.Duration) {
	tk := time.NewTicker(d)
	defer tk.Stop()
	for {
		select {
		case <-t.stop:
			return
		case <-tk.C:
			t.flush()
		}
	}
}

// flush empties the table (a new map: Go maps keep their memory).
func (t *perfTable) flush() {
	t.mu.Lock()
	t.index = map[string]int{}
	t.keys, t.counts = t.keys[:0], t.counts[:0]
	t.full = 0
	t.mu.Unlock()
}

// eachRaw hands every record counted since the last flush to fn, with its
// count as an 8-byte value. The table is copied first, so records keep
// being counted while fn runs.
func (t *perfTable) eachRaw(fn func(key, val []byte)) (int, error) {
	t.mu.Lock()
	n := len(t.counts)
	t.rkeys = append(t.rkeys[:0], t.keys...)
	t.rvals = slices.Grow(t.rvals[:0], 8*n)[:8*n]
	for i, c := range t.counts {
		nativeEndian.PutUint64(t.rvals[8*i:], c)
	}
	t.mu.Unlock()
	for i := range n {
		fn(t.rkeys[i*t.keyLen:(i+1)*t.keyLen], t.rvals[8*i:8*i+8])
	}
	return n, nil
}

// overflow returns the records not in the table since the last flush.
func (t *perfTable) overflow() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.full
}

// dropped returns the records lost by the kernel and those too short.
func (t *perfTable) dropped() (lost, short uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lost, t.short
}

// Close stops reading and closes the ring buffers; programs writing to
// the map then get ENOENT. It waits for the goroutines to end.
func (t *perfTable) Close() {
	t.once.Do(func() {
		close(t.stop)
		t.rd.Close()
		t.wg.Wait()
	})
}

// newPerfMetric binds the plan of a perf_event_array counter to its map
// m, whose ring buffers it opens.
func (c *Config) newPerfMetric(mp *MetricPlan, m *ebpf.Map, lim Limits) (*metric, error) {
	maxSeries := cmp.Or(mp.MaxSeries, lim.MaxSeries, config.DefaultMaxSeries)
	keys := perfKeys(mp.KeySize, maxSeries)
	cache := keys
	if lim.CacheSize > 0 {
		cache = min(cache, lim.CacheSize)
	}
	rs := newReadState(mp, cache, c.name)
	t, err := newPerfTable(m, c.name, mp.Name, mp.KeySize, keys, mp.Flush)
	// cilium/ebpf's reader formats the errno with %v: match its text too.
	if err != nil && (errors.Is(err, os.ErrPermission) || strings.Contains(err.Error(), "permission denied") || strings.Contains(err.Error(), "operation not permitted")) {
		// A reload after the capability drop: the privileged helper
		// loads the object, but the ring buffers are read here.
		return nil, fmt.Errorf("perf event array %s: open its ring buffers: %w (perf_event_open of a per-CPU buffer needs CAP_PERFMON, which the exporter drops after start-up: reloading this config needs --capabilities.keep=perfmon)", mp.MapName, err)
	}
	if err != nil {
		return nil, fmt.Errorf("perf event array %s: open its ring buffers: %w", mp.MapName, err)
	}
	met := &metric{
		MetricPlan: mp,
		desc:       prometheus.NewDesc(mp.Name, mp.Help, rs.names, nil),
		rs:         rs,
		maxSeries:  maxSeries,
		ncpu:       1,
		cpuSize:    8,
		perf:       t,
	}
	freeWith(met)
	return met, nil
}

// Close stops the readers of the config's perf_event_array counters and
// closes their ring buffers (the exporter runs it when the config's object
// closes). The config's other metrics are unaffected.
func (c *Config) Close() {
	for _, m := range c.metrics {
		if m.perf != nil {
			m.perf.Close()
		}
	}
}

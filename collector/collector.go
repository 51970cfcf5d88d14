// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"cmp"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kernel-exporter/kernel_exporter/config"
)

// Config reads the metrics of one loaded config. Read returns a Snapshot;
// the exposition writers encode it.
type Config struct {
	name    string
	metrics []*metric
	reads   []mapRead // one per map read; see read

	mu     sync.Mutex
	flight *flight

	lastDuration atomic.Int64 // ns, last completed read
	lastEntries  atomic.Int64
	lastSeries   atomic.Int64 // series of the last completed read; -1: none yet
	lastStart    atomic.Int64 // Unix ns when the last read began

	// base and clock time the reads for expiry (clock: a variable for
	// tests); reads are timed as clock() - base.
	base  time.Time
	clock func() time.Time

	// Map health (maphealth.go): every map but the internal ones, and the
	// reader of the update errors map (nil when the object has none).
	maps       []*mapHealth
	mapsByID   map[uint32]*mapHealth // maps by kernel id, for updateErrs
	updateErrs *mapReader
	drops      *drops // ke_dropped (drops.go); nil when the object has none
	counted    []int  // entries each metric read in the last read, -1: failed
	fdinfo     []byte // buffer for the maps' fdinfo, used by reads only
}

type flight struct {
	done chan struct{}
	snap *Snapshot
}

// metric is a MetricPlan bound to its live map, with its scrape state.
type metric struct {
	*MetricPlan
	desc      *prometheus.Desc // claims the name in a registry (Descs)
	reader    *mapReader
	rs        readState // decode cache and totals; see series.go
	maxSeries int
	// overflowed counts map entries added to the overflow series, over
	// all reads; limitHit is whether the last read did so.
	overflowed atomic.Uint64
	limitHit   atomic.Bool
	warned     bool // the overflow WARN was logged; touched by reads only
	native     *NativeLayout
	// exp tracks idle keys when the metric has a ttl (else nil), and
	// expired counts the series it expired.
	exp     *expiry
	expired atomic.Uint64

	// ncpu values of cpuSize bytes per entry (see percpu.go), and the key
	// buffer of per_cpu: label (the CPU number, then the map key).
	ncpu, cpuSize int
	cpuKey        []byte

	// perf is the record table of a perf_event_array counter (else nil);
	// see perfarray.go.
	perf *perfTable
}

// mapRead is one map's read: the metrics that read it (several for a
// struct value), Config.metrics[first:first+n], which the plan keeps
// next to each other.
type mapRead struct {
	reader   entrySource // a *mapReader, or a perf_event_array counter's *perfTable
	first, n int
}

// Limits bound what a Config keeps and exports.
type Limits struct {
	// CacheSize bounds each metric's cache of decoded keys (which holds
	// only the keys its last read saw); it is further bounded by the
	// map's max_entries. 0 or less means the map's max_entries.
	CacheSize int
	// MaxSeries is the series limit of a metric that sets no max_series
	// (0: config.DefaultMaxSeries).
	MaxSeries int
}

// New binds a plan to a loaded collection.
func New(plan *Plan, coll *ebpf.Collection, lim Limits) (*Config, error) {
	plan.Bind(coll)
	c := &Config{name: LabelValue(plan.Config.Name), base: time.Now(), clock: time.Now}
	c.lastSeries.Store(-1)
	for _, mp := range plan.Metrics {
		m := coll.Maps[mp.MapName]
		if m == nil {
			c.Close()
			return nil, errors.New("map " + mp.MapName + " missing after load")
		}
		if mp.Perf {
			met, err := c.newPerfMetric(mp, m, lim)
			if err != nil {
				c.Close()
				return nil, err
			}
			c.reads = append(c.reads, mapRead{reader: met.perf, first: len(c.metrics), n: 1})
			c.metrics = append(c.metrics, met)
			continue
		}
		// The metrics of a struct value share their map's reader, and
		// one read of the map serves them all.
		var r *mapReader
		if n := len(c.reads); n > 0 && c.metrics[c.reads[n-1].first].MapName == mp.MapName {
			r = c.reads[n-1].reader.(*mapReader)
			c.reads[n-1].n++
		} else {
			var err error
			if r, err = newMapReader(m, mp.PerCPU); err != nil {
				c.Close()
				return nil, err
			}
			c.reads = append(c.reads, mapRead{reader: r, first: len(c.metrics), n: 1})
		}
		cache := int(m.MaxEntries())
		if lim.CacheSize > 0 {
			cache = min(cache, lim.CacheSize)
		}
		rs := newReadState(mp, cache, c.name)
		met := &metric{
			MetricPlan: mp,
			desc:       prometheus.NewDesc(mp.Name, mp.Help, rs.names, nil),
			reader:     r,
			rs:         rs,
			// max_series, else --config.max-series, else the default.
			maxSeries: cmp.Or(mp.MaxSeries, lim.MaxSeries, config.DefaultMaxSeries),
			ncpu:      r.ncpu,
			cpuSize:   r.cpuSize,
		}
		if mp.Histogram {
			met.native = nativeLayout(rs.upper)
		}
		freeWith(met)
		if mp.TTL > 0 {
			met.exp = newExpiry(mp.TTL, r, met.valueSum, mp.Kind == KindGauge)
			met.rs.ttl = true
		}
		c.metrics = append(c.metrics, met)
	}
	var err error
	if c.maps, c.updateErrs, err = newMapHealth(coll, c.metrics); err != nil {
		c.Close()
		return nil, err
	}
	if c.drops, err = newDrops(coll); err != nil {
		c.Close()
		return nil, err
	}
	c.counted = make([]int, len(c.metrics))
	c.mapsByID = make(map[uint32]*mapHealth, len(c.maps))
	for _, h := range c.maps {
		if h.id != 0 {
			c.mapsByID[uint32(h.id)] = h
		}
	}
	return c, nil
}

// Descs returns a collector that describes the config's metrics and
// collects nothing: registering it claims the metric names in a registry
// (which refuses clashes with the exporter's own metrics) while Read does
// the reading.
func (c *Config) Descs() prometheus.Collector { return descsOnly{c} }

type descsOnly struct{ c *Config }

func (d descsOnly) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range d.c.metrics {
		ch <- m.desc
	}
}
func (d descsOnly) Collect(chan<- prometheus.Metric) {}

// Read reads the config's maps and returns the result. A call that arrives
// while another one is reading shares that read's result.
func (c *Config) Read() *Snapshot {
	c.mu.Lock()
	f := c.flight
	if f == nil {
		f = &flight{done: make(chan struct{})}
		c.flight = f
		c.mu.Unlock()
		f.snap = c.read()
		c.mu.Lock()
		c.flight = nil
		c.mu.Unlock()
		close(f.done)
	} else {
		c.mu.Unlock()
		<-f.done
	}
	return f.snap
}

// read builds every family of the config from its maps: one read of each
// map, whose entries go to every metric of the map.
func (c *Config) read() *Snapshot {
	start := time.Now()
	c.lastStart.Store(start.UnixNano())
	now := c.clock().Sub(c.base)
	snap := &Snapshot{Config: c.name, Families: make([]*Family, len(c.metrics)), Start: c.base, Time: start}
	entries, series := 0, 0
	for _, rd := range c.reads {
		ms := c.metrics[rd.first : rd.first+rd.n]
		for _, m := range ms {
			m.begin()
			if m.exp != nil {
				m.exp.begin(now)
			}
		}
		var n int
		var err error
		if len(ms) == 1 {
			n, err = rd.reader.eachRaw(ms[0].entry)
		} else {
			n, err = rd.reader.eachRaw(func(key, val []byte) {
				for _, m := range ms {
					m.entry(key, val)
				}
			})
		}
		entries += n
		if m := ms[0]; m.perf != nil && err == nil {
			if k := m.perf.overflow(); k > 0 {
				m.rs.value[m.rs.overflowSeries()] += k
				m.rs.dropped++
			}
		}
		for j, m := range ms {
			i := rd.first + j
			f := &Family{Name: m.Name, Help: m.Help, Kind: m.Kind, LabelNames: m.rs.names}
			if m.Histogram {
				f.Kind, f.Upper, f.Native = KindHistogram, m.rs.upper, m.native
			}
			c.counted[i] = n
			if err != nil {
				c.counted[i] = -1
				f.Err = err
				m.rs.settle()
				m.end(false)
			} else {
				if m.exp != nil {
					m.exp.eachCarried(m.rs.gen, m.addSeen)
				}
				m.rs.settle()
				if m.Histogram {
					m.emitHistograms(f)
				} else {
					m.emitCounters(f)
				}
				m.end(true)
			}
			series += f.Len()
			snap.Families[i] = f
		}
	}
	c.readMapHealth(c.counted, now)
	if c.drops != nil {
		c.drops.read(c.name)
	}
	c.lastDuration.Store(int64(time.Since(start)))
	c.lastEntries.Store(int64(entries))
	c.lastSeries.Store(int64(series))
	return snap
}

// freeWith unmaps the slabs of m's read state once m is collected (see
// offheap.go).
func freeWith(m *metric) { runtime.AddCleanup(m, (*offHeap).free, m.rs.off) }

// addSeen adds value v of key through expiry: v plus the key's carry, and
// the key's idle state updated (see expire.go). Expiry also hands it the
// keys it carries that the read did not find in the map, with v 0.
func (m *metric) addSeen(key []byte, v uint64) {
	e, v := m.exp.see(key, v, m.rs.gen)
	m.add(key, v)
	e.s = m.rs.keySeries
}

// end finishes a read: that of the decode cache (see series.go) and, after
// a complete read (ok) of a metric with a ttl, expiry. Then it rebuilds
// the cache if it holds mostly dead rows.
func (m *metric) end(ok bool) {
	m.endCache(ok)
	if ok && m.exp != nil {
		if n := m.expire(); n > 0 {
			m.expired.Add(uint64(n))
		}
	}
	m.rs.compactIfSparse()
}

// noteOverflow records the entries that the read added to the overflow
// series, and logs the first time a metric goes over its limit.
func (m *metric) noteOverflow(n int) {
	if n == 0 {
		m.limitHit.Store(false)
		return
	}
	m.overflowed.Add(uint64(n))
	m.limitHit.Store(true)
	if !m.warned {
		m.warned = true
		overflowLog(m.rs.config, m.Name, m.maxSeries)
	}
}

// readUint reads a 1, 2, 4 or 8-byte unsigned integer in host byte order.
func readUint(b []byte) uint64 {
	switch len(b) {
	case 1:
		return uint64(b[0])
	case 2:
		return uint64(nativeEndian.Uint16(b))
	case 4:
		return uint64(nativeEndian.Uint32(b))
	case 8:
		return nativeEndian.Uint64(b)
	}
	return 0
}

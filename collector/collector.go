package collector

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kernel-exporter/kernel_exporter/decoder"
)

// Config collects the metrics of one loaded config. It implements
// prometheus.Collector.
type Config struct {
	name    string
	metrics []*metric

	mu     sync.Mutex
	flight *flight

	lastDuration atomic.Int64 // ns, last completed read
	lastEntries  atomic.Int64
}

type flight struct {
	done    chan struct{}
	metrics []prometheus.Metric
}

// metric is a MetricPlan bound to its live map, with its scrape state.
type metric struct {
	*MetricPlan
	desc      *prometheus.Desc
	reader    *mapReader
	cache     *lru.Cache[string, *series]
	decodeErr atomic.Uint64
	dropped   atomic.Uint64
	limitHit  atomic.Bool
}

// series is the decoded label set of a key (without the bucket field).
type series struct {
	values []string
	group  string // values joined by \xff: the aggregation key
	skip   bool   // decoder said ErrSkip
	bad    bool   // a decoder failed: dropped and counted at every read
}

// New binds a plan to a loaded collection. cacheSize bounds each metric's
// cache of decoded keys.
func New(plan *Plan, coll *ebpf.Collection, cacheSize int) (*Config, error) {
	plan.Bind(coll)
	c := &Config{name: plan.Config.Name}
	for _, mp := range plan.Metrics {
		m := coll.Maps[mp.MapName]
		if m == nil {
			return nil, errors.New("map " + mp.MapName + " missing after load")
		}
		r, err := newMapReader(m, mp.PerCPU)
		if err != nil {
			return nil, err
		}
		cache, err := lru.New[string, *series](max(cacheSize, 1))
		if err != nil {
			return nil, err
		}
		names := make([]string, len(mp.Labels))
		for i, l := range mp.Labels {
			names[i] = l.Name
		}
		c.metrics = append(c.metrics, &metric{
			MetricPlan: mp,
			desc:       prometheus.NewDesc(mp.Name, mp.Help, names, nil),
			reader:     r,
			cache:      cache,
		})
	}
	return c, nil
}

// Describe sends the descriptors of the config's metrics.
func (c *Config) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range c.metrics {
		ch <- m.desc
	}
}

// Collect reads the maps and sends the metrics. A scrape that arrives while
// another one is reading shares that read's result.
func (c *Config) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	f := c.flight
	if f == nil {
		f = &flight{done: make(chan struct{})}
		c.flight = f
		c.mu.Unlock()
		f.metrics = c.read()
		c.mu.Lock()
		c.flight = nil
		c.mu.Unlock()
		close(f.done)
	} else {
		c.mu.Unlock()
		<-f.done
	}
	for _, m := range f.metrics {
		ch <- m
	}
}

// read builds every metric of the config from its map.
func (c *Config) read() []prometheus.Metric {
	start := time.Now()
	var out []prometheus.Metric
	entries := 0
	for _, m := range c.metrics {
		var n int
		if m.Histogram {
			out, n = m.readHistogram(out)
		} else {
			out, n = m.readCounter(out)
		}
		entries += n
	}
	c.lastDuration.Store(int64(time.Since(start)))
	c.lastEntries.Store(int64(entries))
	return out
}

// labels returns the decoded series of a key, from the cache when possible.
// It returns nil for a key that must be dropped: skipped by a decoder, or
// failing to decode (counted in decoder errors).
func (m *metric) labels(key []byte) *series {
	lk := key
	if m.Histogram {
		lk = key[:m.BucketOff]
	}
	if s, ok := m.cache.Get(string(lk)); ok {
		return m.use(s)
	}
	s := &series{values: make([]string, len(m.Labels))}
	for i, l := range m.Labels {
		v, err := l.Chain.Decode(lk[l.Off : l.Off+l.Size])
		if err != nil {
			if errors.Is(err, decoder.ErrSkip) {
				s.skip = true
				break
			}
			s.bad = true
			break
		}
		s.values[i] = v
	}
	if !s.skip && !s.bad {
		s.group = strings.Join(s.values, "\xff")
	}
	m.cache.Add(string(lk), s)
	return m.use(s)
}

func (m *metric) use(s *series) *series {
	if s.bad {
		m.decodeErr.Add(1)
		return nil
	}
	if s.skip {
		return nil
	}
	return s
}

type counterAcc struct {
	s *series
	v uint64
}

func (m *metric) readCounter(out []prometheus.Metric) ([]prometheus.Metric, int) {
	acc := map[string]*counterAcc{}
	dropped := 0
	n, err := m.reader.each(func(key []byte, v uint64) {
		s := m.labels(key)
		if s == nil {
			return
		}
		a, ok := acc[s.group]
		if !ok {
			if len(acc) >= m.MaxSeries {
				dropped++
				return
			}
			a = &counterAcc{s: s}
			acc[s.group] = a
		}
		a.v += v
	})
	m.noteDropped(dropped)
	if err != nil {
		out = append(out, prometheus.NewInvalidMetric(m.desc, err))
		return out, n
	}
	for _, a := range acc {
		out = append(out, prometheus.MustNewConstMetric(m.desc, prometheus.CounterValue, float64(a.v), a.s.values...))
	}
	return out, n
}

type histAcc struct {
	s       *series
	buckets []uint64
	count   uint64
	sum     uint64
}

func (m *metric) readHistogram(out []prometheus.Metric) ([]prometheus.Metric, int) {
	acc := map[string]*histAcc{}
	dropped := 0
	nb := len(m.Buckets.Upper)
	n, err := m.reader.each(func(key []byte, v uint64) {
		s := m.labels(key)
		if s == nil {
			return
		}
		a, ok := acc[s.group]
		if !ok {
			if len(acc) >= m.MaxSeries {
				dropped++
				return
			}
			a = &histAcc{s: s, buckets: make([]uint64, nb)}
			acc[s.group] = a
		}
		slot := readUint(key[m.BucketOff : m.BucketOff+m.BucketSize])
		switch i := m.Buckets.Slot(slot); {
		case i == -2:
			a.sum += v
		case i >= 0:
			a.buckets[i] += v
			a.count += v
		default:
			a.count += v // only in +Inf
		}
	})
	m.noteDropped(dropped)
	if err != nil {
		out = append(out, prometheus.NewInvalidMetric(m.desc, err))
		return out, n
	}
	for _, a := range acc {
		out = append(out, m.Buckets.Metric(m.desc, a.buckets, a.count, a.sum, a.s.values))
	}
	return out, n
}

func (m *metric) noteDropped(n int) {
	if n > 0 {
		m.dropped.Add(uint64(n))
		m.limitHit.Store(true)
	} else {
		m.limitHit.Store(false)
	}
}

// Metric builds a Prometheus histogram from per-bucket (non-cumulative)
// counts, the total count (which includes observations above the last
// bucket) and the raw sum in bucket units.
func (b *Buckets) Metric(desc *prometheus.Desc, counts []uint64, count, sum uint64, labels []string) prometheus.Metric {
	cum := make(map[float64]uint64, len(counts))
	var run uint64
	for i, c := range counts {
		run += c
		cum[b.Upper[i]] = run
	}
	return prometheus.MustNewConstHistogram(desc, count, float64(sum)*b.Multiplier, cum, labels...)
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

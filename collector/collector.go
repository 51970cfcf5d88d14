package collector

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
	"github.com/prometheus/client_golang/prometheus"
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
	lastOut      int // metrics of the last read; reads never overlap
}

type flight struct {
	done    chan struct{}
	metrics []prometheus.Metric
}

// metric is a MetricPlan bound to its live map, with its scrape state.
type metric struct {
	*MetricPlan
	desc     *prometheus.Desc
	reader   *mapReader
	rs       readState // decode cache and totals; see series.go
	dropped  atomic.Uint64
	limitHit atomic.Bool
}

// New binds a plan to a loaded collection. cacheSize bounds each metric's
// cache of decoded keys, which holds only the keys its last read saw.
func New(plan *Plan, coll *ebpf.Collection, cacheSize int) (*Config, error) {
	plan.Bind(coll)
	c := &Config{name: LabelValue(plan.Config.Name)}
	for _, mp := range plan.Metrics {
		m := coll.Maps[mp.MapName]
		if m == nil {
			return nil, errors.New("map " + mp.MapName + " missing after load")
		}
		r, err := newMapReader(m, mp.PerCPU)
		if err != nil {
			return nil, err
		}
		names := make([]string, len(mp.Labels))
		for i, l := range mp.Labels {
			names[i] = l.Name
		}
		desc := prometheus.NewDesc(mp.Name, mp.Help, names, nil)
		c.metrics = append(c.metrics, &metric{
			MetricPlan: mp,
			desc:       desc,
			reader:     r,
			rs:         newReadState(mp, desc, cacheSize, c.name),
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

// Descs returns a collector that describes the config's metrics and
// collects nothing: registering it claims the metric names in a registry
// (which refuses clashes) while Scrape does the reading.
func (c *Config) Descs() prometheus.Collector { return descsOnly{c} }

type descsOnly struct{ c *Config }

func (d descsOnly) Describe(ch chan<- *prometheus.Desc) { d.c.Describe(ch) }
func (d descsOnly) Collect(chan<- prometheus.Metric)    {}

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
	out := make([]prometheus.Metric, 0, c.lastOut)
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
	c.lastOut = len(out)
	return out
}

func (m *metric) readCounter(out []prometheus.Metric) ([]prometheus.Metric, int) {
	m.begin()
	n, err := m.reader.each(func(key []byte, v uint64) {
		if s := m.series(key); s != nil {
			s.value += v
		}
	})
	if err != nil {
		m.end(false)
		return append(out, prometheus.NewInvalidMetric(m.desc, err)), n
	}
	out = m.emitCounters(out)
	m.end(true)
	return out, n
}

func (m *metric) readHistogram(out []prometheus.Metric) ([]prometheus.Metric, int) {
	m.begin()
	n, err := m.reader.each(func(key []byte, v uint64) {
		s := m.series(key)
		if s == nil {
			return
		}
		slot := readUint(key[m.BucketOff : m.BucketOff+m.BucketSize])
		switch i := m.Buckets.Slot(slot); {
		case i == -2:
			s.sum += v
		case i >= 0:
			s.perBucket[i] += v
			s.count += v
		default:
			s.count += v // only in +Inf
		}
	})
	if err != nil {
		m.end(false)
		return append(out, prometheus.NewInvalidMetric(m.desc, err)), n
	}
	out = m.emitHistograms(out)
	m.end(true)
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

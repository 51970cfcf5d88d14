// SPDX-License-Identifier: Apache-2.0

package bpfstats

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// cachedMetric is one series in the form the registry reads it: its label
// pairs and value made once and sent as they are at every scrape until
// the value changes. It is never changed once made (a scrape may still
// be writing it out when the next scrape's Collect runs): a new value is
// a new cachedMetric sharing the label pairs. A host's programs and maps
// thus cost no allocation at a scrape where nothing of them changed,
// where const metrics cost a dozen per series (label pairs, the value).
type cachedMetric struct {
	desc    *prometheus.Desc
	labels  []*dto.LabelPair // sorted by name, as the registry wants them
	value   float64
	gauge   *dto.Gauge
	counter *dto.Counter
}

// newCached returns the series of d with label values lv and value v; it
// panics, as prometheus.MustNewConstMetric does, on label values that do
// not fit d.
func newCached(d *prometheus.Desc, t prometheus.ValueType, v float64, lv []string) *cachedMetric {
	var out dto.Metric
	if err := prometheus.MustNewConstMetric(d, t, v, lv...).Write(&out); err != nil {
		panic(err)
	}
	return &cachedMetric{desc: d, labels: out.Label, value: v, gauge: out.Gauge, counter: out.Counter}
}

// with returns m with value v: m itself when v is its value.
func (m *cachedMetric) with(v float64) *cachedMetric {
	if v == m.value {
		return m
	}
	n := &cachedMetric{desc: m.desc, labels: m.labels, value: v}
	if m.counter != nil {
		n.counter = &dto.Counter{Value: &n.value}
	} else {
		n.gauge = &dto.Gauge{Value: &n.value}
	}
	return n
}

// Desc is prometheus.Metric's.
func (m *cachedMetric) Desc() *prometheus.Desc { return m.desc }

// Write is prometheus.Metric's: out shares m's label pairs and value,
// which nobody changes.
func (m *cachedMetric) Write(out *dto.Metric) error {
	out.Label, out.Gauge, out.Counter = m.labels, m.gauge, m.counter
	return nil
}

// progSource is what a program's labels and fixed values are made of: its
// series are made again only when it changes.
type progSource struct {
	name           string
	typ            uint32
	tag            [8]byte
	linkType, link string
	links          int
	owner          Owner
	config         string
	insns, jited   uint32
}

// progSeries are a program's series (none made yet while runTime is nil).
type progSeries struct {
	src           progSource
	runTime, runs *cachedMetric
	static        []prometheus.Metric // values that do not change: instructions, JIT size, info
}

// collect sends program id's series, made again when a label changed.
func (st *progState) collect(id uint32, ch chan<- prometheus.Metric) {
	s := &st.series
	src := progSource{name: st.p.Name, typ: st.p.Type, tag: st.p.Tag, linkType: st.linkType, link: st.link,
		links: st.links, owner: st.owner, config: st.config, insns: st.p.VerifiedInsns, jited: st.p.JitedBytes}
	if s.runTime == nil || src != s.src {
		s.src = src
		ids := strconv.FormatUint(uint64(id), 10)
		owner := label(st.owner.Comm)
		lv := []string{ids, st.p.Name, ProgType(st.p.Type), owner}
		info := []string{ids, st.p.Name, ProgType(st.p.Type), fmt.Sprintf("%x", st.p.Tag), st.linkType, label(st.link),
			strconv.Itoa(st.links), owner, pidLabel(st.owner.PID), label(st.owner.Cgroup), label(st.owner.Pod), label(st.config)}
		s.runTime = newCached(runSecondsDesc, prometheus.CounterValue, st.runTime, lv)
		s.runs = newCached(runsDesc, prometheus.CounterValue, st.runs, lv)
		s.static = []prometheus.Metric{
			newCached(insnsDesc, prometheus.GaugeValue, float64(st.p.VerifiedInsns), lv),
			newCached(jitedDesc, prometheus.GaugeValue, float64(st.p.JitedBytes), lv),
			newCached(progInfoDesc, prometheus.GaugeValue, 1, info),
		}
	}
	s.runTime, s.runs = s.runTime.with(st.runTime), s.runs.with(st.runs)
	ch <- s.runTime
	ch <- s.runs
	for _, m := range s.static {
		ch <- m
	}
}

// mapSource is progSource for a map. Its memory is fixed unless
// dynamicMemory (then memlock is 0 here), and so are its entries unless
// the kernel counts them (entries).
type mapSource struct {
	name                           string
	typ, keySize, valueSize, flags uint32
	maxEntries                     uint32
	memlock                        uint64
	entries                        bool
	owner                          Owner
	config                         string
}

// mapSeries are a map's series (none made yet while static is nil).
type mapSeries struct {
	src             mapSource
	users           []uint32
	memory, entries *cachedMetric // nil when fixed (in static) or not served
	static          []prometheus.Metric
}

// collect sends map id's series (max_entries, entries, info, memory),
// made again when a label or a fixed value changed.
func (st *mapState) collect(id uint32, ch chan<- prometheus.Metric) {
	s := &st.series
	dynamic := dynamicMemory(st.m)
	src := mapSource{name: st.m.Name, typ: st.m.Type, keySize: st.m.KeySize, valueSize: st.m.ValueSize, flags: st.m.Flags,
		maxEntries: st.m.MaxEntries, entries: st.m.Entries >= 0 && !isArray(st.m.Type), owner: st.owner, config: st.config}
	if !dynamic {
		src.memlock = st.m.Memlock
	}
	if s.static == nil || src != s.src || !slices.Equal(st.users, s.users) {
		s.src, s.users = src, slices.Clone(st.users)
		ids := strconv.FormatUint(uint64(id), 10)
		owner := label(st.owner.Comm)
		lv := []string{ids, st.m.Name, MapType(st.m.Type), owner}
		info := []string{ids, st.m.Name, MapType(st.m.Type), strconv.FormatUint(uint64(st.m.KeySize), 10),
			strconv.FormatUint(uint64(st.m.ValueSize), 10), "0x" + strconv.FormatUint(uint64(st.m.Flags), 16), idList(st.users, 16),
			owner, pidLabel(st.owner.PID), label(st.owner.Cgroup), label(st.owner.Pod), label(st.config)}
		s.static = []prometheus.Metric{
			newCached(mapMaxDesc, prometheus.GaugeValue, float64(st.m.MaxEntries), lv),
			newCached(mapInfoDesc, prometheus.GaugeValue, 1, info),
		}
		s.memory, s.entries = nil, nil
		if isArray(st.m.Type) {
			s.static = append(s.static, newCached(mapEntriesDesc, prometheus.GaugeValue, float64(st.m.MaxEntries), lv))
		} else if src.entries {
			s.entries = newCached(mapEntriesDesc, prometheus.GaugeValue, float64(st.m.Entries), lv)
		}
		if dynamic {
			s.memory = newCached(mapMemoryDesc, prometheus.GaugeValue, float64(st.m.Memlock), lv)
		} else {
			s.static = append(s.static, newCached(mapMemoryDesc, prometheus.GaugeValue, float64(st.m.Memlock), lv))
		}
	}
	if s.memory != nil {
		s.memory = s.memory.with(float64(st.m.Memlock))
		ch <- s.memory
	}
	if s.entries != nil {
		s.entries = s.entries.with(float64(st.m.Entries))
		ch <- s.entries
	}
	for _, m := range s.static {
		ch <- m
	}
}

// SPDX-License-Identifier: Apache-2.0

package ui

import (
	"github.com/kernel-exporter/kernel_exporter/collector"
)

// histMetric is the ring of one histogram metric: per slot, the count of
// each bucket during the interval summed over label sets, and its
// quantiles.
type histMetric struct {
	Config, Name, Help string
	Upper              []float64 // bucket upper bounds; the +Inf bucket is implicit
	born               uint64    // first sequence number with data
	seen               uint64    // last sequence number the metric was read
	deltas             []uint32  // RingLen*(len(Upper)+1)
	quant              []float32 // RingLen*3: p50, p99, p99.9 (NaN: no observation)
	prev               map[string]*histPrev
}

// histPrev is the last bucket counts (not cumulative; +Inf last) of one
// label set.
type histPrev struct {
	counts []uint64
	seen   uint64
}

// Quantiles are the quantiles computed for each sample.
var Quantiles = [3]float64{0.5, 0.99, 0.999}

func newHistMetric(config string, f *collector.Family) *histMetric {
	nb := len(f.Upper) + 1
	return &histMetric{
		Config: config, Name: f.Name, Help: f.Help, Upper: f.Upper,
		deltas: make([]uint32, RingLen*nb),
		quant:  make([]float32, RingLen*3),
		prev:   map[string]*histPrev{},
	}
}

func (m *histMetric) buckets() int { return len(m.Upper) + 1 }

// slot returns the deltas of sequence number seq.
func (m *histMetric) slot(seq uint64) []uint32 {
	nb := m.buckets()
	i := int(seq%RingLen) * nb
	return m.deltas[i : i+nb : i+nb]
}

func (m *histMetric) quantSlot(seq uint64) []float32 {
	i := int(seq%RingLen) * 3
	return m.quant[i : i+3 : i+3]
}

// update records the read f as sample seq, or only as the baseline.
func (m *histMetric) update(st *state, f *collector.Family, seq uint64, baseline bool) {
	nb := m.buckets()
	if baseline {
		m.born = seq + 1
	}
	m.seen = seq
	var out []uint32
	if !baseline {
		out = m.slot(seq)
		clear(out)
	}
	for i := range f.Len() {
		cum, count, _ := f.Histogram(i)
		st.keyBuf = labelKey(st.keyBuf, f, i)
		p := m.prev[string(st.keyBuf)]
		fresh := p == nil
		if fresh {
			p = &histPrev{counts: make([]uint64, nb)}
			m.prev[string(st.keyBuf)] = p
		}
		p.seen = seq
		var below uint64
		for b := range nb {
			c := count
			if b < nb-1 {
				c = cum[b]
			}
			cur := c - below
			if c < below { // a torn read: never let a bucket underflow
				cur = 0
			}
			below = max(below, c)
			d := cur
			if !fresh && cur >= p.counts[b] {
				d = cur - p.counts[b]
			}
			p.counts[b] = cur
			if out != nil {
				out[b] = satAdd(out[b], d)
			}
		}
	}
	for k, p := range m.prev {
		if p.seen != seq {
			delete(m.prev, k)
		}
	}
	if out != nil {
		m.setQuantiles(seq, out)
	}
}

// clear records an empty sample seq for a metric absent from the read.
func (m *histMetric) clear(seq uint64) {
	clear(m.slot(seq))
	q := m.quantSlot(seq)
	q[0], q[1], q[2] = nan32, nan32, nan32
}

func (m *histMetric) setQuantiles(seq uint64, counts []uint32) {
	q := m.quantSlot(seq)
	for i, phi := range Quantiles {
		q[i] = float32(Quantile(phi, m.Upper, counts))
	}
}

func satAdd(a uint32, d uint64) uint32 {
	if s := uint64(a) + d; s <= 0xffffffff {
		return uint32(s)
	}
	return 0xffffffff
}

func (m *histMetric) size() int {
	n := 160 + len(m.Config) + len(m.Name) + len(m.Help) + 8*cap(m.Upper) + 4*cap(m.deltas) + 4*cap(m.quant)
	for k, p := range m.prev {
		n += len(k) + mapEntryOverhead + 32 + 8*cap(p.counts)
	}
	return n
}

// SPDX-License-Identifier: Apache-2.0

package ui

import (
	"github.com/kernel-exporter/kernel_exporter/collector"
)

// counterMetric is the state of one counter metric: the previous value of
// every label set, the rates of the tracked ones and the current top.
type counterMetric struct {
	Config, Name, Help string
	LabelNames         []string
	seen               uint64
	prev               map[string]*counterPrev
	tracked            map[string]*tracked
	top                []*tracked // current top TopN by rate, highest first
}

type counterPrev struct {
	v    float64
	seen uint64
}

// tracked is the rate ring of a label set that was in the top TopN.
type tracked struct {
	labels  []string
	rates   []float32 // RingLen, by slot; NaN where unknown
	lastTop uint64    // last sequence number it was in the top
	set     uint64    // last sequence number its rate was recorded
	since   uint64    // first sequence number with a rate
}

// ranked is one label set's rate during a tick, for the top selection.
type ranked struct {
	i    int
	rate float64
}

func newCounterMetric(config string, f *collector.Family) *counterMetric {
	return &counterMetric{Config: config, Name: f.Name, Help: f.Help, LabelNames: f.LabelNames,
		prev: map[string]*counterPrev{}, tracked: map[string]*tracked{}}
}

// update records the read f as sample seq, dt seconds after the previous
// read, or only as the baseline.
func (m *counterMetric) update(st *state, f *collector.Family, seq uint64, dt float64, baseline bool) {
	m.seen = seq
	slot := int(seq % RingLen)
	top := st.scratch[:0]
	for i := range f.Len() {
		v := f.Value(i)
		st.keyBuf = labelKey(st.keyBuf, f, i)
		p := m.prev[string(st.keyBuf)]
		fresh := p == nil
		if fresh {
			p = &counterPrev{}
			m.prev[string(st.keyBuf)] = p
		}
		d := v
		if !fresh && v >= p.v {
			d = v - p.v
		}
		p.v, p.seen = v, seq
		if baseline || dt <= 0 {
			continue
		}
		rate := d / dt
		if t := m.tracked[string(st.keyBuf)]; t != nil {
			t.rates[slot], t.set = float32(rate), seq
		}
		top = insertTop(top, ranked{i, rate})
	}
	st.scratch = top
	for k, p := range m.prev {
		if p.seen != seq {
			delete(m.prev, k)
		}
	}
	if baseline || dt <= 0 {
		return
	}
	m.top = m.top[:0]
	for _, r := range top {
		if r.rate <= 0 {
			break // a label set that did not move is no top
		}
		st.keyBuf = labelKey(st.keyBuf, f, r.i)
		t := m.tracked[string(st.keyBuf)]
		if t == nil {
			t = &tracked{labels: append([]string(nil), f.LabelValues(r.i)...), rates: make([]float32, RingLen), since: seq}
			for j := range t.rates {
				t.rates[j] = nan32
			}
			m.tracked[string(st.keyBuf)] = t
		}
		t.rates[slot], t.set, t.lastTop = float32(r.rate), seq, seq
		m.top = append(m.top, t)
	}
	m.endTick(seq)
}

// absent records sample seq for a metric missing from the read.
func (m *counterMetric) absent(seq uint64) {
	m.top = m.top[:0]
	m.endTick(seq)
}

// endTick marks the tracked series without a rate at seq and drops those
// out of the top for a whole ring, then the least recently top ones beyond
// MaxTracked.
func (m *counterMetric) endTick(seq uint64) {
	slot := int(seq % RingLen)
	for k, t := range m.tracked {
		if t.set != seq {
			t.rates[slot] = nan32
		}
		if seq-t.lastTop >= RingLen {
			delete(m.tracked, k)
		}
	}
	for len(m.tracked) > MaxTracked {
		var oldK string
		var old *tracked
		for k, t := range m.tracked {
			if old == nil || t.lastTop < old.lastTop || t.lastTop == old.lastTop && k < oldK {
				oldK, old = k, t
			}
		}
		delete(m.tracked, oldK)
	}
}

// insertTop inserts r into top, kept sorted by rate (highest first, then
// by series index) and at most TopN long.
func insertTop(top []ranked, r ranked) []ranked {
	if len(top) == TopN && r.rate <= top[TopN-1].rate {
		return top
	}
	if len(top) < TopN {
		top = append(top, r)
	} else {
		top[TopN-1] = r
	}
	for j := len(top) - 1; j > 0 && top[j].rate > top[j-1].rate; j-- {
		top[j], top[j-1] = top[j-1], top[j]
	}
	return top
}

func (m *counterMetric) size() int {
	n := 200 + len(m.Config) + len(m.Name) + len(m.Help) + 8*cap(m.top)
	for _, l := range m.LabelNames {
		n += 16 + len(l)
	}
	for k := range m.prev {
		n += len(k) + mapEntryOverhead + 16
	}
	for k, t := range m.tracked {
		n += len(k) + mapEntryOverhead + 80 + 4*cap(t.rates)
		for _, l := range t.labels {
			n += 16 + len(l)
		}
	}
	return n
}

// SPDX-License-Identifier: Apache-2.0

package ui

import (
	"math"
	"strconv"
)

// Data is the JSON body of /ui/data: the samples after the client's since,
// oldest first. Samples are numbered by Seq; Times[i], every Deltas[i],
// Quantiles[i] and Rates[i] belong to sample First+i.
type Data struct {
	// Running is false when the sampler was stopped (the first poll
	// starts it; samples follow a second later).
	Running bool `json:"running"`
	// Seq is the last sample's sequence number (to pass as since next).
	Seq uint64 `json:"seq"`
	// First is the sequence number of the first sample returned. When it
	// is above since+1, the samples in between are gone: the client starts
	// afresh with these.
	First      uint64        `json:"first"`
	IntervalMS int64         `json:"interval_ms"`
	Times      []int64       `json:"t"` // unix ms of each sample
	Histograms []HistData    `json:"histograms"`
	Counters   []CounterData `json:"counters"`
	// Audit is each config's self-audit now (package audit, as the
	// landing page shows it), by config then kernel counter; empty when
	// the audit is off or has not run yet.
	Audit []AuditData `json:"audit"`
}

// Audit states of AuditData.State.
const (
	AuditInBand      = "in_band"     // the ratio is within [0.98, 1.02]
	AuditOutOfBand   = "out_of_band" // the ratio is outside it
	AuditNoEvents    = "no_events"   // the kernel counted none: no ratio
	AuditError       = "error"       // not compared: Reason says why
	AuditUnavailable = "unavailable" // this kernel does not keep the counter: Reason says why
)

// AuditData is one audited pair of a config: the kernel counter
// (source), its state (one of the Audit* constants), the ratio of our
// events to the kernel's in the last interval (null without one), and the
// reason of an error or of a counter not available.
type AuditData struct {
	Config string   `json:"config"`
	Source string   `json:"source"`
	State  string   `json:"state"`
	Ratio  *float64 `json:"ratio"`
	Reason string   `json:"reason,omitempty"`
}

// HistData is one histogram metric.
type HistData struct {
	Config string    `json:"config"`
	Name   string    `json:"name"`
	Help   string    `json:"help"`
	Upper  []float64 `json:"upper"` // bucket upper bounds, +Inf implicit
	// Deltas[i] are the observations per bucket (+Inf last) during sample
	// First+i, summed over label sets; null before the metric appeared.
	Deltas [][]uint32 `json:"deltas"`
	// Quantiles[i] are p50, p99 and p99.9 of sample First+i (null: none).
	Quantiles []Floats `json:"quantiles"`
	// Window is the current distribution: the last WindowLen samples.
	Window Window `json:"window"`
}

// Window is a histogram summed over the latest samples.
type Window struct {
	Samples   int      `json:"samples"`
	Counts    []uint64 `json:"counts"` // per bucket, +Inf last
	Total     uint64   `json:"total"`
	Quantiles Floats   `json:"quantiles"` // p50, p99, p99.9 (null: empty)
}

// CounterData is one counter metric: its tracked label sets with their
// rates (per second) over the samples returned, and the current top.
type CounterData struct {
	Config     string       `json:"config"`
	Name       string       `json:"name"`
	Help       string       `json:"help"`
	LabelNames []string     `json:"label_names"`
	Series     []SeriesData `json:"series"`
	// Top are indexes into Series, highest rate first, at most TopN.
	Top []int `json:"top"`
}

// SeriesData is one tracked label set.
type SeriesData struct {
	Labels []string `json:"labels"`
	Rates  Floats   `json:"rates"` // per sample from First; null: unknown
}

// Floats is a slice of float32 written to JSON with 5 significant digits
// and NaN as null.
type Floats []float32

// MarshalJSON implements json.Marshaler.
func (fs Floats) MarshalJSON() ([]byte, error) {
	if fs == nil {
		return []byte("null"), nil
	}
	b := make([]byte, 0, 2+len(fs)*6)
	b = append(b, '[')
	for i, f := range fs {
		if i > 0 {
			b = append(b, ',')
		}
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			b = append(b, "null"...)
			continue
		}
		b = strconv.AppendFloat(b, float64(f), 'g', 5, 32)
	}
	return append(b, ']'), nil
}

// Data returns the samples after since (all kept ones when since is older
// than the ring), and marks a page as open (see Touch).
func (s *Sampler) Data(since uint64) *Data {
	s.Touch()
	auditData := []AuditData{}
	if s.audit != nil {
		if a := s.audit(); a != nil {
			auditData = a
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d := &Data{Running: s.running, IntervalMS: Interval.Milliseconds(), Times: []int64{}, Histograms: []HistData{}, Counters: []CounterData{}, Audit: auditData}
	st := s.st
	if st == nil || st.seq < st.firstSeq {
		d.Seq = s.seq
		d.First = s.seq + 1
		return d
	}
	d.Seq = st.seq
	first := st.firstValid()
	if since >= first && since <= st.seq {
		first = since + 1
	}
	d.First = first
	n := int(st.seq + 1 - first)
	d.Times = make([]int64, 0, n)
	for q := first; q <= st.seq; q++ {
		d.Times = append(d.Times, st.times[q%RingLen])
	}
	for _, key := range st.order {
		if m := st.hists[key]; m != nil {
			d.Histograms = append(d.Histograms, m.data(first, st.seq))
		}
		if m := st.counters[key]; m != nil {
			d.Counters = append(d.Counters, m.data(first, st.seq))
		}
	}
	return d
}

func (m *histMetric) data(first, last uint64) HistData {
	// Empty arrays, never null, when no sample is new: the page appends
	// them to what it has.
	h := HistData{Config: m.Config, Name: m.Name, Help: m.Help, Upper: m.Upper,
		Deltas: make([][]uint32, 0, last+1-first), Quantiles: make([]Floats, 0, last+1-first)}
	for q := first; q <= last; q++ {
		if q < m.born {
			h.Deltas = append(h.Deltas, nil)
			h.Quantiles = append(h.Quantiles, nil)
			continue
		}
		h.Deltas = append(h.Deltas, append([]uint32(nil), m.slot(q)...))
		h.Quantiles = append(h.Quantiles, append(Floats(nil), m.quantSlot(q)...))
	}
	h.Window = m.window(last)
	return h
}

// window sums the last WindowLen samples up to last.
func (m *histMetric) window(last uint64) Window {
	w := Window{Counts: make([]uint64, m.buckets())}
	for q := last; q+WindowLen > last && q >= m.born && q > 0; q-- {
		w.Samples++
		for b, c := range m.slot(q) {
			w.Counts[b] += uint64(c)
			w.Total += uint64(c)
		}
	}
	w.Quantiles = make(Floats, len(Quantiles))
	for i, phi := range Quantiles {
		w.Quantiles[i] = float32(Quantile(phi, m.Upper, w.Counts))
	}
	return w
}

func (m *counterMetric) data(first, last uint64) CounterData {
	c := CounterData{Config: m.Config, Name: m.Name, Help: m.Help, LabelNames: m.LabelNames,
		Series: []SeriesData{}, Top: []int{}}
	idx := map[*tracked]int{}
	add := func(t *tracked) int {
		if i, ok := idx[t]; ok {
			return i
		}
		sd := SeriesData{Labels: t.labels, Rates: make(Floats, 0, last+1-first)}
		for q := first; q <= last; q++ {
			sd.Rates = append(sd.Rates, t.rates[q%RingLen])
		}
		idx[t] = len(c.Series)
		c.Series = append(c.Series, sd)
		return idx[t]
	}
	for _, t := range m.top {
		c.Top = append(c.Top, add(t))
	}
	for _, t := range m.tracked {
		add(t)
	}
	return c
}

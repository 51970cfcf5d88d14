// SPDX-License-Identifier: Apache-2.0

package ui

import (
	"math"
	"slices"
	"sync"
	"time"

	"github.com/kernel-exporter/kernel_exporter/collector"
)

// Bounds of the sampler.
const (
	// Interval is the sampling period while a page is open.
	Interval = time.Second
	// RingLen is the number of samples kept: ten minutes at Interval.
	RingLen = 600
	// IdleStop is how long after the last poll of /ui/data the sampler
	// stops and drops its ring.
	IdleStop = 15 * time.Second
	// TopN is the number of label sets shown per counter metric.
	TopN = 20
	// MaxTracked bounds the series per counter metric whose rates are kept
	// for sparklines (those in the top TopN now or recently).
	MaxTracked = 2 * TopN
	// WindowLen is the number of latest samples summed into the "current"
	// distribution of a histogram (10 s at Interval).
	WindowLen = 10
)

// Sampler reads the configs once per Interval while a page is open and
// keeps the ring of deltas (see the package doc). Its methods are safe for
// concurrent use.
type Sampler struct {
	read  func() []*collector.Snapshot
	now   func() time.Time
	audit func() []AuditData // nil: no audit (SetAudit)

	mu       sync.Mutex
	running  bool
	lastPoll time.Time
	st       *state
	seq      uint64 // last sequence number used, kept across restarts
}

// NewSampler returns a stopped sampler that reads snapshots with read
// (normally collector.Status.Read).
func NewSampler(read func() []*collector.Snapshot) *Sampler {
	return &Sampler{read: read, now: time.Now}
}

// SetAudit makes Data carry f's audit states (nil: none); call it before
// serving.
func (s *Sampler) SetAudit(f func() []AuditData) { s.audit = f }

// Touch marks a page as open now and starts the sampler if it is stopped:
// it reads at once (the baseline) and then every Interval, until no Touch
// for IdleStop.
func (s *Sampler) Touch() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastPoll = s.now()
	if s.running {
		return
	}
	s.running = true
	s.st = newState(s.seq)
	go s.loop()
}

// Running reports whether the sampler is running.
func (s *Sampler) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running
}

func (s *Sampler) loop() {
	t := time.NewTicker(Interval)
	defer t.Stop()
	for {
		snaps := s.read()
		if !s.tick(s.now(), snaps) {
			return
		}
		<-t.C
	}
}

// tick records one read made at now; it returns false, having stopped the
// sampler and dropped its state, when no page has polled for IdleStop.
func (s *Sampler) tick(now time.Time, snaps []*collector.Snapshot) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Sub(s.lastPoll) > IdleStop {
		s.running = false
		s.st = nil
		return false
	}
	s.st.add(now, snaps)
	s.seq = s.st.seq
	return true
}

// Size returns the bytes the sampler's state holds now (ring, tracked
// series and previous values; 0 when stopped), counted from the lengths
// of its slices and strings plus fixed per-entry overheads for maps.
func (s *Sampler) Size() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.st == nil {
		return 0
	}
	return s.st.size()
}

// state is the sampler's data while it runs.
type state struct {
	seq      uint64 // last sample's sequence number (0 before the first)
	firstSeq uint64 // the first sample of this run
	last     time.Time
	times    [RingLen]int64 // unix ms of each slot's sample
	hists    map[string]*histMetric
	counters map[string]*counterMetric
	order    []string // metric keys in first-seen order
	keyBuf   []byte
	scratch  []ranked
}

func newState(seq uint64) *state {
	return &state{seq: seq, firstSeq: seq + 1, hists: map[string]*histMetric{}, counters: map[string]*counterMetric{}}
}

// add turns one read into a sample; the first read of a run only sets the
// baseline.
func (st *state) add(now time.Time, snaps []*collector.Snapshot) {
	baseline := st.last.IsZero()
	var dt float64
	if !baseline {
		st.seq++
		dt = now.Sub(st.last).Seconds()
		st.times[st.seq%RingLen] = now.UnixMilli()
	}
	st.last = now
	seq := st.seq
	for _, sn := range snaps {
		for _, f := range sn.Families {
			if f.Err != nil {
				continue
			}
			key := sn.Config + "\x00" + f.Name
			switch f.Kind {
			case collector.KindHistogram:
				m := st.hists[key]
				if m == nil || !slices.Equal(m.Upper, f.Upper) {
					if m == nil {
						st.order = append(st.order, key)
					}
					m = newHistMetric(sn.Config, f)
					st.hists[key] = m
					m.update(st, f, seq, true)
					continue
				}
				m.update(st, f, seq, baseline)
			case collector.KindCounter:
				m := st.counters[key]
				if m == nil {
					st.order = append(st.order, key)
					m = newCounterMetric(sn.Config, f)
					st.counters[key] = m
					m.update(st, f, seq, 0, true)
					continue
				}
				m.update(st, f, seq, dt, baseline)
			}
		}
	}
	if baseline {
		return
	}
	// Metrics absent from this read (config down, map read failed) get
	// an empty sample; those absent for a whole ring are dropped.
	keep := st.order[:0]
	for _, key := range st.order {
		if m := st.hists[key]; m != nil {
			if m.seen != seq {
				m.clear(seq)
			}
			if seq-m.seen >= RingLen {
				delete(st.hists, key)
				continue
			}
		}
		if m := st.counters[key]; m != nil {
			if m.seen != seq {
				m.absent(seq)
			}
			if seq-m.seen >= RingLen {
				delete(st.counters, key)
				continue
			}
		}
		keep = append(keep, key)
	}
	st.order = keep
}

// labelKey appends the label values of series i of f, each ended by 0xff
// (a byte UTF-8 never has), to buf[:0].
func labelKey(buf []byte, f *collector.Family, i int) []byte {
	buf = buf[:0]
	var scratch [8]string
	for _, v := range f.AppendLabelValues(scratch[:0], i) {
		buf = append(buf, v...)
		buf = append(buf, 0xff)
	}
	return buf
}

// firstValid returns the oldest sequence number still in the ring.
func (st *state) firstValid() uint64 {
	first := st.firstSeq
	if st.seq >= RingLen && st.seq-RingLen+1 > first {
		first = st.seq - RingLen + 1
	}
	return first
}

const mapEntryOverhead = 48 // bytes per map entry besides key and value

func (st *state) size() int {
	n := RingLen*8 + len(st.order)*16 + cap(st.keyBuf) + cap(st.scratch)*16
	for k, m := range st.hists {
		n += len(k) + mapEntryOverhead + m.size()
	}
	for k, m := range st.counters {
		n += len(k) + mapEntryOverhead + m.size()
	}
	return n
}

var nan32 = float32(math.NaN())

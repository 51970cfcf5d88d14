// SPDX-License-Identifier: Apache-2.0

package ui

import (
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/kernel-exporter/kernel_exporter/collector"
)

var t0 = time.Unix(1_700_000_000, 0)

// clock is a settable time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// manual returns a sampler marked running without its goroutine, whose
// ticks the test calls itself.
func manual() (*Sampler, *clock) {
	c := &clock{t: t0}
	s := NewSampler(nil)
	s.now = c.now
	s.lastPoll = t0
	s.running = true
	s.st = newState(0)
	return s, c
}

// hist builds a histogram family of bounds upper from per-bucket counts
// (not cumulative, +Inf last) per label set.
func hist(name string, upper []float64, labelNames []string, sets map[string][]uint64) *collector.Family {
	var data []collector.SeriesData
	for lv, counts := range sets {
		cum := make([]uint64, len(upper))
		var run uint64
		for b := range upper {
			run += counts[b]
			cum[b] = run
		}
		data = append(data, collector.SeriesData{Labels: []string{lv}, Cum: cum, Count: run + counts[len(upper)]})
	}
	return collector.NewFamily(name, "help", collector.KindHistogram, labelNames, upper, data)
}

func counter(name string, values map[string]float64) *collector.Family {
	var data []collector.SeriesData
	for lv, v := range values {
		data = append(data, collector.SeriesData{Labels: []string{lv}, Value: v})
	}
	return collector.NewFamily(name, "help", collector.KindCounter, []string{"function"}, nil, data)
}

func snap(config string, fs ...*collector.Family) []*collector.Snapshot {
	return []*collector.Snapshot{{Config: config, Families: fs}}
}

var upper4 = []float64{1, 2, 4, 8}

// TestHistogramDeltas checks per-bucket deltas summed over label sets,
// across a counter reset, a series that appears (counted whole) and one
// that goes; and that the first read is only the baseline.
func TestHistogramDeltas(t *testing.T) {
	s, _ := manual()
	lab := []string{"dev"}
	s.tick(t0, snap("c", hist("h", upper4, lab, map[string][]uint64{
		"a": {1, 2, 3, 4, 5}, "b": {10, 0, 0, 0, 0}, "gone": {7, 7, 7, 7, 7},
	})))
	if d := s.Data(0); len(d.Times) != 0 || len(d.Histograms) != 0 {
		t.Fatalf("baseline produced samples: %+v", d)
	}
	s.tick(t0.Add(time.Second), snap("c", hist("h", upper4, lab, map[string][]uint64{
		"a":   {2, 2, 5, 4, 6}, // +1 0 +2 0 +1
		"b":   {3, 1, 0, 0, 0}, // reset: bucket 0 went down (counts 3), bucket 1 +1
		"new": {0, 0, 0, 1, 0}, // appeared: counted whole
	})))
	d := s.Data(0)
	if d.First != 1 || d.Seq != 1 || len(d.Times) != 1 || d.Times[0] != t0.Add(time.Second).UnixMilli() {
		t.Fatalf("samples: first %d seq %d times %v", d.First, d.Seq, d.Times)
	}
	if len(d.Histograms) != 1 {
		t.Fatalf("histograms: %d, want 1", len(d.Histograms))
	}
	want := []uint32{1 + 3, 0 + 1, 2, 1, 1}
	if got := d.Histograms[0].Deltas[0]; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("deltas %v, want %v", got, want)
	}
	// 9 observations: rank 4.5 is past bucket 0's 4, so bucket (1,2] holds
	// it: 1 + 1*(0.5/1).
	q := d.Histograms[0].Quantiles[0]
	if q[0] != 1.5 {
		t.Errorf("p50 %v, want 1.5", q[0])
	}
	// rank 8.91 is in the +Inf bucket: the last finite bound.
	if q[1] != 8 || q[2] != 8 {
		t.Errorf("p99, p99.9 = %v, %v, want 8, 8", q[1], q[2])
	}
	if w := d.Histograms[0].Window; w.Total != 9 || w.Samples != 1 || w.Quantiles[0] != 1.5 {
		t.Errorf("window %+v, want total 9 over 1 sample, p50 1.5", w)
	}
	if n := len(s.st.hists["c\x00h"].prev); n != 3 {
		t.Errorf("previous values of %d label sets kept, want 3 (the one gone dropped)", n)
	}
	// Third read: metric absent (config down): an empty sample, no NaN in JSON.
	s.tick(t0.Add(2*time.Second), nil)
	d = s.Data(1)
	if d.First != 2 || len(d.Histograms[0].Deltas) != 1 || fmt.Sprint(d.Histograms[0].Deltas[0]) != "[0 0 0 0 0]" {
		t.Errorf("absent metric: first %d deltas %v, want one empty sample", d.First, d.Histograms[0].Deltas)
	}
	if b, _ := d.Histograms[0].Quantiles[0].MarshalJSON(); string(b) != "[null,null,null]" {
		t.Errorf("quantiles of an empty sample as JSON: %s", b)
	}
}

// TestQuantile checks interpolation within the bucket and the edge cases.
func TestQuantile(t *testing.T) {
	for _, c := range []struct {
		counts []uint64
		phi    float64
		want   float64
	}{
		{[]uint64{0, 10, 0, 0, 0}, 0.5, 1.5},
		{[]uint64{0, 10, 0, 0, 0}, 0.99, 1.99},
		{[]uint64{10, 20, 30, 40, 0}, 0.5, 2 + 2*20.0/30},
		{[]uint64{10, 20, 30, 40, 0}, 0.99, 4 + 4*39.0/40},
		{[]uint64{10, 20, 30, 40, 0}, 0.999, 4 + 4*39.9/40},
		{[]uint64{50, 0, 0, 0, 50}, 0.5, 1},
		{[]uint64{50, 0, 0, 0, 50}, 0.99, 8},
		{[]uint64{4, 0, 0, 0, 0}, 0.5, 0.5},
	} {
		if got := Quantile(c.phi, upper4, c.counts); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("Quantile(%v, %v) = %v, want %v", c.phi, c.counts, got, c.want)
		}
	}
	for _, bad := range [][]uint64{{0, 0, 0, 0, 0}, {1, 2}} {
		if got := Quantile(0.5, upper4, bad); !math.IsNaN(got) {
			t.Errorf("Quantile(0.5, %v) = %v, want NaN", bad, got)
		}
	}
	if got := Quantile(1.5, upper4, []uint64{1, 1, 1, 1, 1}); !math.IsNaN(got) {
		t.Errorf("Quantile(1.5) = %v, want NaN", got)
	}
}

// TestCounterTop checks rates over the interval, the top TopN order, the
// sparkline values and the bound on tracked label sets.
func TestCounterTop(t *testing.T) {
	s, clk := manual()
	vals := map[string]float64{}
	for i := range 30 {
		vals[fmt.Sprintf("f%02d", i)] = 1000
	}
	s.tick(t0, snap("timers", counter("c_total", vals)))
	// Over 2 s, f<i> moves by 2*i: rate i per second.
	for i := range 30 {
		vals[fmt.Sprintf("f%02d", i)] += 2 * float64(i)
	}
	s.tick(t0.Add(2*time.Second), snap("timers", counter("c_total", vals)))
	d := s.Data(0)
	if len(d.Counters) != 1 {
		t.Fatalf("counters: %d", len(d.Counters))
	}
	c := d.Counters[0]
	if len(c.Top) != TopN {
		t.Fatalf("top has %d, want %d", len(c.Top), TopN)
	}
	for rank, i := range c.Top {
		sd := c.Series[i]
		wantName, wantRate := fmt.Sprintf("f%02d", 29-rank), float32(29-rank)
		if sd.Labels[0] != wantName || len(sd.Rates) != 1 || sd.Rates[0] != wantRate {
			t.Errorf("top %d: %v rates %v, want %s at %v/s", rank, sd.Labels, sd.Rates, wantName, wantRate)
		}
	}
	// Each second a different band of 20 series moves: the tracked set
	// stays within MaxTracked, the old ones NaN where not tracked.
	for k := range 2 * RingLen {
		for j := range 20 {
			vals[fmt.Sprintf("f%02d", (k+j)%30)] += float64(j + 1)
		}
		now := t0.Add(time.Duration(3+k) * time.Second)
		clk.set(now)
		s.Touch() // the page polls
		s.tick(now, snap("timers", counter("c_total", vals)))
		if n := len(s.st.counters["timers\x00c_total"].tracked); n > MaxTracked {
			t.Fatalf("tick %d: %d label sets tracked, bound %d", k, n, MaxTracked)
		}
	}
	d = s.Data(0)
	if got := len(d.Times); got != RingLen {
		t.Errorf("%d samples kept, want %d", got, RingLen)
	}
	if d.First != d.Seq-RingLen+1 {
		t.Errorf("first %d, seq %d: want the last %d", d.First, d.Seq, RingLen)
	}
	top := d.Counters[0].Series[d.Counters[0].Top[0]]
	if last := top.Rates[len(top.Rates)-1]; last != 20 {
		t.Errorf("top rate %v, want 20", last)
	}
}

// TestIdleStop checks that the sampler stops and drops its state when no
// page polled for IdleStop, and that its goroutine reads then exits.
func TestIdleStop(t *testing.T) {
	c := &clock{t: t0}
	reads := 0
	var mu sync.Mutex
	s := NewSampler(func() []*collector.Snapshot {
		mu.Lock()
		reads++
		mu.Unlock()
		c.set(t0.Add(IdleStop + time.Second)) // the page went away
		return snap("c", hist("h", upper4, []string{"dev"}, map[string][]uint64{"a": {1, 0, 0, 0, 0}}))
	})
	s.now = c.now
	s.Touch()
	deadline := time.Now().Add(5 * time.Second)
	for s.Running() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if s.Running() || s.Size() != 0 {
		t.Fatalf("sampler still running (%v) or holding %d bytes after IdleStop", s.Running(), s.Size())
	}
	mu.Lock()
	defer mu.Unlock()
	if reads != 1 {
		t.Errorf("%d reads, want 1", reads)
	}
	// Sequence numbers go on across restarts, so a page that polls with an
	// old since starts afresh.
	s.mu.Lock()
	s.seq = 41
	s.mu.Unlock()
	c.set(t0)
	d := s.Data(7)
	if d.First != 42 || d.Seq != 41 {
		t.Errorf("after a restart: first %d seq %d, want 42, 41", d.First, d.Seq)
	}
}

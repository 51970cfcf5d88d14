// SPDX-License-Identifier: Apache-2.0

package ui

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/kernel-exporter/kernel_exporter/collector"
)

// defaultSet builds reads shaped like the default programs: biolatency
// (27 bounds, 4 devices x 2 operations), runqlat (37 bounds, one series)
// and timers (a counter of nTimers functions). Read k moves every bucket
// and a rotating band of timer functions, so that the counter's top keeps
// changing and its tracked set stays at MaxTracked.
type defaultSet struct {
	bio, rq   []float64
	bioCounts map[string][]uint64
	rqCounts  []uint64
	timers    map[string]float64
	nTimers   int
}

func newDefaultSet(nTimers int) *defaultSet {
	ds := &defaultSet{bioCounts: map[string][]uint64{}, timers: map[string]float64{}, nTimers: nTimers}
	for i := range 27 {
		ds.bio = append(ds.bio, 1e-6*float64(uint64(1)<<i))
	}
	for i := range 37 {
		ds.rq = append(ds.rq, 1e-9*float64(uint64(1)<<i))
	}
	for _, dev := range []string{"vda", "vdb", "nvme0n1", "sda"} {
		for _, op := range []string{"read", "write"} {
			ds.bioCounts[dev+"/"+op] = make([]uint64, 28)
		}
	}
	ds.rqCounts = make([]uint64, 38)
	return ds
}

func (ds *defaultSet) read(k int) []*collector.Snapshot {
	for _, c := range ds.bioCounts {
		for b := range c {
			c[b] += uint64(k+b) % 7
		}
	}
	for b := range ds.rqCounts {
		ds.rqCounts[b] += uint64(k*b) % 13
	}
	for i := range ds.nTimers {
		name := fmt.Sprintf("timer_callback_function_%03d", i)
		ds.timers[name] += float64((i + k) % ds.nTimers)
	}
	var rq []collector.SeriesData
	cum := make([]uint64, len(ds.rq))
	var run uint64
	for b := range ds.rq {
		run += ds.rqCounts[b]
		cum[b] = run
	}
	rq = append(rq, collector.SeriesData{Labels: []string{}, Cum: cum, Count: run + ds.rqCounts[37]})
	var bio []collector.SeriesData
	for lv, c := range ds.bioCounts {
		cum := make([]uint64, len(ds.bio))
		var run uint64
		for b := range ds.bio {
			run += c[b]
			cum[b] = run
		}
		bio = append(bio, collector.SeriesData{Labels: []string{lv[:len(lv)-5], lv[len(lv)-4:]}, Cum: cum, Count: run + c[27]})
	}
	var tm []collector.SeriesData
	for lv, v := range ds.timers {
		tm = append(tm, collector.SeriesData{Labels: []string{lv}, Value: v})
	}
	return []*collector.Snapshot{
		{Config: "timers", Families: []*collector.Family{collector.NewFamily("kernel_timer_starts_total", "Kernel timers started", collector.KindCounter, []string{"function"}, nil, tm)}},
		{Config: "biolatency", Families: []*collector.Family{collector.NewFamily("kernel_bio_latency_seconds", "Block I/O latency", collector.KindHistogram, []string{"device", "operation"}, ds.bio, bio)}},
		{Config: "runqlat", Families: []*collector.Family{collector.NewFamily("kernel_run_queue_latency_seconds", "Run-queue latency", collector.KindHistogram, nil, ds.rq, rq)}},
	}
}

// TestRingMemory fills the ring at the default set (a full ring plus as
// many ticks again) and reports its size, both as Sampler.Size counts it
// and as the heap grew, and checks both against the bound.
func TestRingMemory(t *testing.T) {
	const nTimers = 300 // timer callback functions: ~150 seen on the development VM
	ds := newDefaultSet(nTimers)
	reads := make([][]*collector.Snapshot, 0, 2*RingLen+1)
	for k := range 2*RingLen + 1 {
		reads = append(reads, ds.read(k))
	}
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	s, clk := manual()
	for k, r := range reads {
		now := t0.Add(time.Duration(k) * time.Second)
		clk.set(now)
		s.Touch()
		s.tick(now, r)
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	runtime.KeepAlive(reads)
	size := s.Size()
	heap := int64(m1.HeapAlloc) - int64(m0.HeapAlloc)
	// The ring proper: two histograms' slots and the counter's tracked rates.
	ring := RingLen*(4*28+12) + RingLen*(4*38+12) + MaxTracked*RingLen*4 + RingLen*8
	t.Logf("default set (biolatency 8 label sets, runqlat, timers %d functions): Size %d bytes (ring proper %d), heap growth %d bytes", nTimers, size, ring, heap)
	if size < ring || size > ring+nTimers*200+8*400+64<<10 {
		t.Errorf("Size %d bytes, want the ring's %d plus previous values", size, ring)
	}
	if heap > int64(size)*2 {
		t.Errorf("heap grew by %d bytes, Size says %d", heap, size)
	}
	runtime.KeepAlive(s)
}

// BenchmarkTick measures one sampler tick at the default set: the work the
// page adds per second besides the maps' read itself (which a scrape
// shares), from snapshots to the ring.
func BenchmarkTick(b *testing.B) {
	ds := newDefaultSet(300)
	reads := make([][]*collector.Snapshot, 64)
	for k := range reads {
		reads[k] = ds.read(k)
	}
	s, clk := manual()
	b.ReportAllocs()
	k := 0
	for b.Loop() {
		now := t0.Add(time.Duration(k) * time.Second)
		clk.set(now)
		s.lastPoll = now
		s.tick(now, reads[k%len(reads)])
		k++
	}
}

// BenchmarkData measures one poll of /ui/data by a page that is up to
// date (since = the sample before the last) at the default set, full ring:
// Data and its JSON encoding.
func BenchmarkData(b *testing.B) {
	ds := newDefaultSet(300)
	s, clk := manual()
	for k := range RingLen + 1 {
		now := t0.Add(time.Duration(k) * time.Second)
		clk.set(now)
		s.lastPoll = now
		s.tick(now, ds.read(k))
	}
	since := s.st.seq - 1
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(s.Data(since)); err != nil {
			b.Fatal(err)
		}
	}
}

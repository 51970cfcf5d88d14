// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/kernel-exporter/kernel_exporter/config"
)

// pairKey is the key of the scrape benchmark: two u32 labels.
type pairKey struct{ A, B uint32 }

// pairCollector returns a Config of a hash map of n entries keyed by two
// u32 labels (uint decoders), every entry its own series, as the HTTP
// benchmarks' fixture: key i is {i / 1000, i % 1000}.
func pairCollector(b *testing.B, n int) *Config {
	keys := make([]pairKey, n)
	values := make([]uint64, n)
	for i := range keys {
		keys[i] = pairKey{A: uint32(i / 1000), B: uint32(i % 1000)}
		values[i] = uint64(i%1000 + 1)
	}
	y := `metrics:
  counters:
    - name: bench_pairs_total
      help: pairs
      max_series: 1000000
      labels:
        - {name: a, size: 4, decoders: [{name: uint}]}
        - {name: b, size: 4, decoders: [{name: uint}]}
`
	return newBenchCollector(b, y, benchMapSpec[pairKey]("bench_pairs_total", n), keys, values)
}

// BenchmarkReadMemory reads a hash map of n entries keyed by two u32
// labels (uint decoders), every entry its own series, and reports the time
// per read, the time of the first read (first-ms: it decodes every key
// and fills the cache) and the Go heap the collector keeps between reads
// (the label arena and the last snapshot, after a GC) and outside it
// (mapped-MiB: the cache's slabs and tables, see offheap.go): heap-B/key
// is what a key costs the Go heap between scrapes. A read allocates more while it runs (its
// new snapshot), and the Go GC lets the heap grow to twice the live heap
// (GOGC=100) before collecting: the process's peak is about twice this.
func BenchmarkReadMemory(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			benchNeedRoot(b)
			var before runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			c := pairCollector(b, n)
			start := time.Now()
			snap := c.Read() // decodes every key; later reads find them cached
			first := time.Since(start)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				snap = c.Read()
			}
			b.StopTimer()
			if got := snap.Families[0].Len(); got != n {
				b.Fatalf("%d series, want %d", got, n)
			}
			var after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(n), "heap-B/key")
			b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "heap-MiB")
			b.ReportMetric(float64(first)/float64(time.Millisecond), "first-ms")
			mapped := 0
			for _, mem := range c.metrics[0].rs.off.maps {
				mapped += len(mem)
			}
			b.ReportMetric(float64(mapped)/(1<<20), "mapped-MiB")
			runtime.KeepAlive(snap)
			runtime.KeepAlive(c) // its cache is what is measured
		})
	}
}

// BenchmarkFirstRead times the first read of a config (every key decoded,
// the cache and the series built) against a later one, on the map of
// BenchmarkReadMemory: each iteration binds a new Config to the filled
// map and reads it twice. first/later is the ratio of their times,
// first/later-cpu that of the process's CPU time during each (the GC's
// included).
func BenchmarkFirstRead(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			benchNeedRoot(b)
			c := pairCollector(b, n)
			var first, later, firstCPU, laterCPU time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				c = c.rebind(b)
				runtime.GC()
				b.StartTimer()
				start, cpu := time.Now(), processCPU(b)
				c.Read()
				first += time.Since(start)
				firstCPU += processCPU(b) - cpu
				start, cpu = time.Now(), processCPU(b)
				c.Read()
				later += time.Since(start)
				laterCPU += processCPU(b) - cpu
			}
			b.ReportMetric(float64(first)/float64(b.N)/float64(time.Millisecond), "first-ms")
			b.ReportMetric(float64(later)/float64(b.N)/float64(time.Millisecond), "later-ms")
			b.ReportMetric(float64(first)/float64(later), "first/later")
			b.ReportMetric(float64(firstCPU)/float64(laterCPU), "first/later-cpu")
		})
	}
}

// processCPU returns the CPU time of the process (user and system, every
// thread): on a busy machine a read's wall time grows with the load, its
// CPU time much less.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rebind returns a new Config of c's plan and maps, with an empty cache.
func (c *Config) rebind(b *testing.B) *Config {
	m := c.metrics[0]
	coll := &ebpf.Collection{Maps: map[string]*ebpf.Map{m.MapName: c.reads[0].reader.(*mapReader).m}}
	plan := &Plan{Metrics: []*MetricPlan{m.MetricPlan}, Config: &config.Config{Name: c.name}}
	nc, err := New(plan, coll, Limits{CacheSize: benchCacheSize})
	if err != nil {
		b.Fatal(err)
	}
	return nc
}

// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"fmt"
	"runtime"
	"testing"
)

// pairKey is the key of the scrape benchmark: two u32 labels.
type pairKey struct{ A, B uint32 }

// BenchmarkReadMemory reads a hash map of n entries keyed by two u32
// labels (uint decoders), every entry its own series, and reports the time
// per read and the Go heap the collector keeps between reads (the decode
// cache and the last snapshot, after a GC): heap-B/key is what a key costs
// between scrapes. A read allocates more while it runs (its new snapshot),
// and the Go GC lets the heap grow to twice the live heap (GOGC=100)
// before collecting: the process's peak is about twice this.
func BenchmarkReadMemory(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			benchNeedRoot(b)
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
			spec := benchMapSpec[pairKey]("bench_pairs_total", n)
			var before runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			c := newBenchCollector(b, y, spec, keys, values)
			keys, values = nil, nil
			snap := c.Read() // decodes every key; later reads find them cached
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
			runtime.KeepAlive(snap)
			runtime.KeepAlive(c) // its cache is what is measured
		})
	}
}

// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// BenchmarkCollectTTL is BenchmarkCollectCounter's batch path at 100,000
// entries without a ttl and with ttl: 1h (no key idle: the steady-state
// cost of tracking every key), then the cost of expiring them all:
//
//	go test -run '^$' -bench CollectTTL -benchtime 20x ./collector/
func BenchmarkCollectTTL(b *testing.B) {
	const n = 100_000
	for _, ttl := range []string{"", "1h"} {
		name := "ttl=none"
		if ttl != "" {
			name = "ttl=" + ttl
		}
		b.Run(name, func(b *testing.B) {
			benchNeedRoot(b)
			c := ttlCounterFixture(b, n, ttl)
			benchCollect(b, c, n, b.Name(), false)
		})
	}
	if a, ok1 := benchResults.Load("BenchmarkCollectTTL/ttl=none"); ok1 {
		if t, ok2 := benchResults.Load("BenchmarkCollectTTL/ttl=1h"); ok2 {
			fmt.Printf("BenchmarkCollectTTL: %d entries, %.2f ms per read without ttl, %.2f ms with (%+.0f%%)\n",
				n, a.(float64)/1e6, t.(float64)/1e6, 100*(t.(float64)/a.(float64)-1))
		}
	}
	// Expiring every key: one read that finds all idle and deletes them
	// (lookup-and-delete, one syscall per key).
	b.Run("expire-all", func(b *testing.B) {
		benchNeedRoot(b)
		var total time.Duration
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			c := ttlCounterFixture(b, n, "1h")
			at := ttlClock(c)
			c.Read()
			at(time.Hour)
			b.StartTimer()
			start := time.Now()
			c.Read()
			total += time.Since(start)
			b.StopTimer()
			if got := c.metrics[0].expired.Load(); got != n {
				b.Fatalf("expired %d series, want %d", got, n)
			}
			c.metrics[0].reader.m.Close()
		}
		b.ReportMetric(float64(total.Nanoseconds())/float64(b.N)/n, "ns/deleted-key")
	})
}

// ttlCounterFixture is counterFixture with a ttl ("" for none).
func ttlCounterFixture(b *testing.B, n int, ttl string) *Config {
	addrs := kernelFuncAddrs(b)
	keys := make([]counterKey, n)
	values := make([]uint64, n)
	for i := range keys {
		keys[i] = counterKey{ID: uint32(i / (len(benchOps) * benchFuncs)), Op: uint32(i % len(benchOps)), Addr: addrs[(i/len(benchOps))%benchFuncs]}
		values[i] = uint64(i%1000 + 1)
	}
	y := benchCounterYAML(n + 1)
	if ttl != "" {
		y = strings.Replace(y, "      help: calls\n", "      help: calls\n      ttl: "+ttl+"\n", 1)
	}
	return newBenchCollector(b, y, benchMapSpec[counterKey]("bench_calls_total", n), keys, values)
}

// SPDX-License-Identifier: Apache-2.0

package collector

// Scrape-path benchmarks on real kernel maps (run as root):
//
//	make bench   (go test -run '^$' -bench 'Collect|ReadOnly' -benchtime 5x ./collector/)
//
// Each benchmark creates a BPF hash map in the kernel, fills it with batch
// updates, compiles a YAML config against it and calls Collect, the
// way the Prometheus registry does, draining the metrics it sends. Every
// size runs twice in the same process: "batch" (BPF_MAP_LOOKUP_BATCH, the
// production path) and "iterate" (the per-key BPF_MAP_GET_NEXT_KEY +
// BPF_MAP_LOOKUP_ELEM fallback). Custom metrics per result line:
//
//	ns/entry      wall time of one Collect divided by the map's entries
//	allocs/entry  heap allocations of one Collect divided by the entries
//	ms/scrape     wall time of one Collect
//	series        series sent by one Collect
//	iterate/batch (iterate lines only) how many times slower the per-key
//	              path is than the batch path on the same map
//
// The first Collect (which decodes every key) runs before the timer starts:
// the figures are for steady-state scrapes, where keys hit the decode cache.

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"

	"github.com/kernel-exporter/kernel_exporter/config"
	"github.com/kernel-exporter/kernel_exporter/decoder"
)

// benchSizes are the map sizes of the counter benchmark.
var benchSizes = []int{1_000, 10_000, 100_000, 1_000_000}

// benchHistSizes are the map sizes of the histogram benchmark.
var benchHistSizes = []int{100_000, 1_000_000}

// benchCacheSize is the decode cache used by the benchmarks: the
// --decoder.cache-size default.
const benchCacheSize = 1 << 20

// benchOps are the static_map values of the "op" label.
var benchOps = []string{"read", "write", "open", "close", "stat", "mmap", "poll", "ioctl"}

// benchFuncs is how many distinct kernel functions the "func" label takes.
const benchFuncs = 64

// counterKey is the 16-byte key of the counter benchmark map:
// labels id (uint), op (uint + static_map), func (ksym).
type counterKey struct {
	ID   uint32
	Op   uint32
	Addr uint64
}

// histKey is the 12-byte key of the histogram benchmark map: labels id
// (uint), op (uint + static_map), then the exp2 bucket slot.
type histKey struct {
	ID     uint32
	Op     uint32
	Bucket uint32
}

// histSlots is the number of slots per histogram series: buckets 0..26
// (1 µs .. 67 s at a 1e-6 multiplier) and the sum slot 27.
const histSlots = 28

func benchStaticMap() string {
	var b strings.Builder
	b.WriteString("{")
	for i, op := range benchOps {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d: %s", i, op)
	}
	b.WriteString("}")
	return b.String()
}

// benchCounterYAML exports every entry as its own series.
func benchCounterYAML(maxSeries int) string {
	return fmt.Sprintf(`metrics:
  counters:
    - name: bench_calls_total
      help: calls
      max_series: %d
      labels:
        - name: id
          size: 4
          decoders:
            - name: uint
        - name: op
          size: 4
          decoders:
            - name: uint
            - name: static_map
              static_map: %s
        - name: func
          size: 8
          decoders:
            - name: ksym
`, maxSeries, benchStaticMap())
}

func benchHistYAML(maxSeries int) string {
	return fmt.Sprintf(`metrics:
  histograms:
    - name: bench_latency_seconds
      help: latency
      max_series: %d
      bucket_type: exp2
      bucket_min: 0
      bucket_max: %d
      bucket_multiplier: 0.000001
      labels:
        - name: id
          size: 4
          decoders:
            - name: uint
        - name: op
          size: 4
          decoders:
            - name: uint
            - name: static_map
              static_map: %s
        - name: bucket
          size: 4
          decoders:
            - name: uint
`, maxSeries, histSlots-2, benchStaticMap())
}

var (
	benchAddrsOnce sync.Once
	benchAddrs     []uint64
	benchAddrsErr  error
)

// kernelFuncAddrs returns the addresses of benchFuncs distinct global text
// symbols of /proc/kallsyms, so that ksym decodes each to its own name.
func kernelFuncAddrs(b *testing.B) []uint64 {
	benchAddrsOnce.Do(func() {
		data, err := os.ReadFile("/proc/kallsyms")
		if err != nil {
			benchAddrsErr = err
			return
		}
		seenAddr := map[uint64]bool{}
		seenName := map[string]bool{}
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() && len(benchAddrs) < benchFuncs {
			f := strings.Fields(sc.Text())
			if len(f) != 3 || f[1] != "T" || strings.HasPrefix(f[2], "__pfx_") {
				continue
			}
			addr, err := strconv.ParseUint(f[0], 16, 64)
			if err != nil || addr == 0 || seenAddr[addr] || seenName[f[2]] {
				continue
			}
			seenAddr[addr], seenName[f[2]] = true, true
			benchAddrs = append(benchAddrs, addr)
		}
		if len(benchAddrs) < benchFuncs {
			benchAddrsErr = fmt.Errorf("/proc/kallsyms: found %d usable symbols, want %d", len(benchAddrs), benchFuncs)
		}
	})
	if benchAddrsErr != nil {
		b.Fatal(benchAddrsErr)
	}
	return benchAddrs
}

func benchNeedRoot(b *testing.B) {
	b.Helper()
	if os.Geteuid() != 0 {
		b.Skip("needs root for BPF maps")
	}
}

// benchMapSpec is a hash map of n entries with keys of type K and u64
// values.
func benchMapSpec[K any](name string, n int) *ebpf.MapSpec {
	var k K
	return &ebpf.MapSpec{Name: name, Type: ebpf.Hash, KeySize: uint32(unsafe.Sizeof(k)), ValueSize: 8, MaxEntries: uint32(n)}
}

// newBenchCollector creates the map of spec in the kernel, fills it, and
// compiles yaml against it.
func newBenchCollector[K any](b *testing.B, yaml string, spec *ebpf.MapSpec, keys []K, values []uint64) *Config {
	b.Helper()
	cfg, err := config.Parse("bench.yaml", []byte(yaml))
	if err != nil {
		b.Fatal(err)
	}
	m, err := ebpf.NewMap(spec)
	if err != nil {
		b.Fatalf("create %d-entry map: %v", spec.MaxEntries, err)
	}
	b.Cleanup(func() { m.Close() })
	for off := 0; off < len(keys); off += 65536 {
		end := min(off+65536, len(keys))
		if _, err := m.BatchUpdate(keys[off:end], values[off:end], nil); err != nil {
			b.Fatalf("fill map: %v", err)
		}
	}
	cs := &ebpf.CollectionSpec{Maps: map[string]*ebpf.MapSpec{spec.Name: spec}}
	plan, err := Compile(cfg, cs, decoder.NewEnv(benchCacheSize))
	if err != nil {
		b.Fatal(err)
	}
	c, err := New(plan, &ebpf.Collection{Maps: map[string]*ebpf.Map{spec.Name: m}}, Limits{CacheSize: benchCacheSize})
	if err != nil {
		b.Fatal(err)
	}
	return c
}

func counterFixture(b *testing.B, n int) *Config {
	addrs := kernelFuncAddrs(b)
	keys := make([]counterKey, n)
	values := make([]uint64, n)
	for i := range keys {
		keys[i] = counterKey{
			ID:   uint32(i / (len(benchOps) * benchFuncs)),
			Op:   uint32(i % len(benchOps)),
			Addr: addrs[(i/len(benchOps))%benchFuncs],
		}
		values[i] = uint64(i%1000 + 1)
	}
	spec := benchMapSpec[counterKey]("bench_calls_total", n)
	return newBenchCollector(b, benchCounterYAML(min(n+1, config.MaxMaxSeries)), spec, keys, values)
}

func histFixture(b *testing.B, n int) *Config {
	keys := make([]histKey, n)
	values := make([]uint64, n)
	for i := range keys {
		s := i / histSlots
		keys[i] = histKey{ID: uint32(s / len(benchOps)), Op: uint32(s % len(benchOps)), Bucket: uint32(i % histSlots)}
		values[i] = uint64(i%100 + 1)
	}
	spec := benchMapSpec[histKey]("bench_latency_seconds", n)
	return newBenchCollector(b, benchHistYAML(min(n/histSlots+1, config.MaxMaxSeries)), spec, keys, values)
}

// benchResults holds the ns per Collect of finished sub-benchmarks, by
// name, for the iterate/batch ratio.
var benchResults sync.Map

// benchCollect times Read on c, whose maps hold entries entries.
func benchCollect(b *testing.B, c *Config, entries int, name string, iterate bool) {
	for _, m := range c.metrics {
		m.reader.noBatch = iterate
	}
	series := 0
	collect := func() int {
		n := 0
		for _, f := range c.Read().Families {
			n += f.Len()
		}
		return n
	}
	series = collect() // warm the decode cache and the read buffers
	if iterate && c.metrics[0].reader.iterated == 0 {
		b.Fatal("iterate path not taken")
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		collect()
	}
	elapsed := time.Since(start)
	b.StopTimer()
	runtime.ReadMemStats(&after)
	perOp := float64(elapsed.Nanoseconds()) / float64(b.N)
	b.ReportMetric(perOp/float64(entries), "ns/entry")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(b.N)/float64(entries), "allocs/entry")
	b.ReportMetric(perOp/1e6, "ms/scrape")
	b.ReportMetric(float64(series), "series")
	benchResults.Store(name, perOp)
	if iterate {
		batchName := strings.TrimSuffix(name, "/iterate") + "/batch"
		if v, ok := benchResults.Load(batchName); ok {
			b.ReportMetric(perOp/v.(float64), "iterate/batch")
		}
	}
}

// runPair runs the batch and the iterate path on one fixture and logs their
// ratio.
func runPair(b *testing.B, name string, entries int, fixture func(*testing.B) *Config) {
	b.Run(name, func(b *testing.B) {
		benchNeedRoot(b)
		c := fixture(b)
		full := b.Name()
		b.Run("batch", func(b *testing.B) { benchCollect(b, c, entries, full+"/batch", false) })
		b.Run("iterate", func(b *testing.B) { benchCollect(b, c, entries, full+"/iterate", true) })
		bv, ok1 := benchResults.Load(full + "/batch")
		iv, ok2 := benchResults.Load(full + "/iterate")
		if ok1 && ok2 {
			fmt.Printf("%s: batch %.2f ms, iterate %.2f ms per scrape: batch is %.1fx faster\n",
				full, bv.(float64)/1e6, iv.(float64)/1e6, iv.(float64)/bv.(float64))
		}
	})
}

// BenchmarkCollectCounter collects a counter map whose 16-byte keys decode
// through uint, uint+static_map and ksym, every entry its own series.
func BenchmarkCollectCounter(b *testing.B) {
	for _, n := range benchSizes {
		runPair(b, fmt.Sprintf("entries=%d", n), n, func(b *testing.B) *Config { return counterFixture(b, n) })
	}
}

// BenchmarkCollectHistogram collects an exp2 histogram map with two labels
// (uint, uint+static_map) and 28 slots per series.
func BenchmarkCollectHistogram(b *testing.B) {
	for _, n := range benchHistSizes {
		runPair(b, fmt.Sprintf("entries=%d", n), n, func(b *testing.B) *Config { return histFixture(b, n) })
	}
}

// BenchmarkReadOnly is the floor: batch-read the counter map, without
// decoding or emitting anything.
func BenchmarkReadOnly(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			benchNeedRoot(b)
			c := counterFixture(b, n)
			r := c.metrics[0].reader
			var sum uint64
			if _, err := r.each(func(_ []byte, v uint64) { sum += v }); err != nil {
				b.Fatal(err) // warm-up: buffers
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := r.each(func(_ []byte, v uint64) { sum += v }); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/entry")
		})
	}
}

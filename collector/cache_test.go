// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/kernel-exporter/kernel_exporter/config"
	"github.com/kernel-exporter/kernel_exporter/decoder"
)

// cacheFixture is fixture with a chosen decode cache size.
func cacheFixture(t *testing.T, yaml string, cacheSize int, spec *ebpf.MapSpec) (*Config, *ebpf.Map) {
	t.Helper()
	return fileFixture(t, "test.yaml", yaml, cacheSize, spec)
}

// fileFixture is cacheFixture for a config file of the given name (the
// config label of self-metrics).
func fileFixture(t *testing.T, file, yaml string, cacheSize int, spec *ebpf.MapSpec) (*Config, *ebpf.Map) {
	t.Helper()
	needBPF(t)
	cfg, err := config.Parse(file, []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	m, err := ebpf.NewMap(spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	plan, err := Compile(cfg, &ebpf.CollectionSpec{Maps: map[string]*ebpf.MapSpec{spec.Name: spec}}, decoder.NewEnv(100))
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(plan, &ebpf.Collection{Maps: map[string]*ebpf.Map{spec.Name: m}}, Limits{CacheSize: cacheSize})
	if err != nil {
		t.Fatal(err)
	}
	return c, m
}

// counters gathers c and returns its counter values by label string, and
// the decoder errors and series dropped of its first metric.
func counters(t *testing.T, c *Config) (vals map[string]float64, decodeErrs, dropped uint64) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(asCollector{c})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	vals = map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			vals[labelsOf(m)] += m.GetCounter().GetValue()
		}
	}
	for _, d := range c.metrics[0].rs.decErrs {
		decodeErrs += d.n.Load()
	}
	return vals, decodeErrs, c.metrics[0].overflowed.Load()
}

func sameValues(got, want map[string]float64) bool {
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

var opsSpec = &ebpf.MapSpec{Name: "ops_total", Type: ebpf.Hash, KeySize: 8, ValueSize: 8, MaxEntries: 64}

// TestCacheFollowsMap checks that keys deleted from the BPF map leave the
// decode cache at the next read, and that their series disappear.
func TestCacheFollowsMap(t *testing.T) {
	c, m := cacheFixture(t, counterYAML, 100, opsSpec)
	for dev := uint32(0); dev < 10; dev++ {
		put(t, m, key(1, dev), uint64(dev+1))
	}
	vals, _, _ := counters(t, c)
	if len(vals) != 10 || vals["dev=9,op=read"] != 10 {
		t.Fatalf("first read: %v", vals)
	}
	rs := &c.metrics[0].rs
	if rs.index.len() != 10 || rs.cached != 10 {
		t.Fatalf("cache after first read: %d keys, %d series, want 10 and 10", rs.index.len(), rs.cached)
	}
	for dev := uint32(0); dev < 8; dev++ {
		if err := m.Delete(key(1, dev)); err != nil {
			t.Fatal(err)
		}
	}
	vals, _, _ = counters(t, c)
	want := map[string]float64{"dev=8,op=read": 9, "dev=9,op=read": 10}
	if !sameValues(vals, want) {
		t.Errorf("after delete: %v, want %v", vals, want)
	}
	if rs.index.len() != 2 || rs.cached != 2 {
		t.Errorf("cache after delete: %d keys, %d series, want 2 and 2", rs.index.len(), rs.cached)
	}
}

// TestCacheLimit checks that keys beyond the cache size are still decoded,
// summed with cached keys of the same label set, and counted correctly, at
// every read.
func TestCacheLimit(t *testing.T) {
	c, m := cacheFixture(t, counterYAML, 2, opsSpec)
	// op 1 and 3 both decode to "read": 6 keys, 4 label sets.
	for dev := uint32(0); dev < 2; dev++ {
		put(t, m, key(1, dev), 1)
		put(t, m, key(3, dev), 10)
		put(t, m, key(2, dev), 100)
	}
	put(t, m, key(9, 0), 5) // unknown:9 fails in errno: decoder error
	want := map[string]float64{"dev=0,op=read": 11, "dev=1,op=read": 11, "dev=0,op=write": 100, "dev=1,op=write": 100}
	for read := 1; read <= 3; read++ {
		vals, errs, _ := counters(t, c)
		if !sameValues(vals, want) {
			t.Errorf("read %d: %v, want %v", read, vals, want)
		}
		if errs != uint64(read) {
			t.Errorf("read %d: decoder errors %d, want %d", read, errs, read)
		}
		if n := c.metrics[0].rs.index.len(); n != 2 {
			t.Errorf("read %d: %d cached keys, want 2", read, n)
		}
	}
}

// TestMaxSeriesEveryRead checks that the series limit applies afresh at each
// read, adding every entry over it to the overflow series (so the sum over
// the series is the sum over the map), and clears when the map shrinks.
func TestMaxSeriesEveryRead(t *testing.T) {
	y := strings.Replace(counterYAML, "      help: ops\n", "      help: ops\n      max_series: 3\n", 1)
	c, m := cacheFixture(t, y, 100, opsSpec)
	for dev := uint32(0); dev < 5; dev++ {
		put(t, m, key(1, dev), 1)
		put(t, m, key(3, dev), 1) // same series as (1, dev)
	}
	for read := 1; read <= 2; read++ {
		vals, _, dropped := counters(t, c)
		if len(vals) != 4 {
			t.Errorf("read %d: %d series, want 3 and the overflow series", read, len(vals))
		}
		for k, v := range vals {
			want := 2.0
			if k == "dev=__overflow__,op=__overflow__" {
				want = 4
			}
			if v != want {
				t.Errorf("read %d: %s = %v, want %v", read, k, v, want)
			}
		}
		// 2 series over the limit, 2 entries each, per read.
		if dropped != uint64(4*read) {
			t.Errorf("read %d: overflow entries %d, want %d", read, dropped, 4*read)
		}
	}
	for dev := uint32(3); dev < 5; dev++ {
		m.Delete(key(1, dev))
		m.Delete(key(3, dev))
	}
	vals, _, dropped := counters(t, c)
	if len(vals) != 3 || dropped != 8 || len(c.LimitHits()) != 0 {
		t.Errorf("after shrink: %d series, overflow entries %d, limit hits %v", len(vals), dropped, c.LimitHits())
	}
}

// TestSkipAndInvalidUTF8 checks keys dropped by a regexp decoder (not an
// error) and keys whose label is not UTF-8 (U+FFFD replaces the invalid
// bytes, as the string decoder does; no error, no panic).
func TestSkipAndInvalidUTF8(t *testing.T) {
	y := `metrics:
  counters:
    - name: names_total
      help: names
      labels:
        - name: name
          size: 4
          decoders:
            - name: string
            - name: regexp
              regexps: ['^[a-z]']
`
	c, m := cacheFixture(t, y, 100, &ebpf.MapSpec{Name: "names_total", Type: ebpf.Hash, KeySize: 4, ValueSize: 8, MaxEntries: 8})
	put(t, m, []byte("abc\x00"), 3)
	put(t, m, []byte("Abc\x00"), 4) // skipped by the regexp
	vals, errs, _ := counters(t, c)
	if !sameValues(vals, map[string]float64{"name=abc": 3}) || errs != 0 {
		t.Errorf("got %v, %d errors", vals, errs)
	}
	// A chain that passes raw bytes through must not make the scrape panic
	// nor write invalid UTF-8: decoder.Chain sanitizes its output.
	c2, m2 := cacheFixture(t, counterYAML, 100, opsSpec)
	c2.metrics[0].Labels[1].Chain = decoder.Chain{rawBytes{}}
	put(t, m2, key(1, 0x00414243), 1) // "CBA\x00" on little-endian
	put(t, m2, key(1, 0x00ff4142), 2) // contains 0xff
	vals, errs, _ = counters(t, c2)
	want := map[string]float64{"dev=CBA\x00,op=read": 1, "dev=BA\uFFFD\x00,op=read": 2}
	if !sameValues(vals, want) || errs != 0 {
		t.Errorf("got %v, %d decoder errors; want %v and no error", vals, errs, want)
	}
}

// rawBytes is a decoder that returns its input.
type rawBytes struct{}

func (rawBytes) Decode(in []byte) ([]byte, error) { return in, nil }

// TestHistogramEqualBounds checks that fixed buckets with equal bounds
// produce what prometheus.MustNewConstHistogram does.
func TestHistogramEqualBounds(t *testing.T) {
	y := histYAML("fixed", "      bucket_keys: [1, 1, 5]\n")
	c, m := cacheFixture(t, y, 100, &ebpf.MapSpec{Name: "lat_seconds", Type: ebpf.Hash, KeySize: 8, ValueSize: 8, MaxEntries: 64})
	put(t, m, key(1, 1), 2)
	put(t, m, key(1, 5), 3)
	put(t, m, key(1, 7), 1) // unknown slot: +Inf only
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(asCollector{c})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := mfs[0].GetMetric()[0]
	b := c.metrics[0].Buckets
	want := b.Metric(c.metrics[0].desc, []uint64{0, 2, 3}, 6, 0, []string{"1"})
	var wm dto.Metric
	if err := want.Write(&wm); err != nil {
		t.Fatal(err)
	}
	if g, w := got.GetHistogram().String(), wm.GetHistogram().String(); g != w {
		t.Errorf("histogram:\n got %s\nwant %s", g, w)
	}
}

// TestConcurrentScrapes runs scrapes in parallel with map updates; with
// -race it checks that reads sharing a result, and a read that starts while
// an earlier result is still being written out, do not race.
func TestConcurrentScrapes(t *testing.T) {
	c, m := cacheFixture(t, histYAML("exp2", "      bucket_max: 4\n"), 100,
		&ebpf.MapSpec{Name: "lat_seconds", Type: ebpf.Hash, KeySize: 8, ValueSize: 8, MaxEntries: 64})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(asCollector{c})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				mfs, err := reg.Gather()
				if err != nil {
					errs <- err
					return
				}
				for _, mf := range mfs {
					for _, mm := range mf.GetMetric() {
						_ = mm.String() // read every field
					}
				}
			}
		}()
	}
	for i := 0; i < 200; i++ {
		put(t, m, key(uint32(i%4), uint32(i%6)), uint64(i))
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// Final state: every op has a series with the last values written.
	vals := map[string]uint64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mm := range mfs[0].GetMetric() {
		vals[labelsOf(mm)] = mm.GetHistogram().GetSampleCount()
	}
	if len(vals) != 4 {
		t.Errorf("series: %v", vals)
	}
}

// TestChurn changes the map between reads (inserts, deletes, updates in
// random order, so that the batch order shifts) and checks every read
// against sums computed here, with a cache that holds all keys and with one
// that holds a few.
func TestChurn(t *testing.T) {
	for _, cacheSize := range []int{1000, 7} {
		t.Run(fmt.Sprintf("cache=%d", cacheSize), func(t *testing.T) {
			spec := &ebpf.MapSpec{Name: "ops_total", Type: ebpf.Hash, KeySize: 8, ValueSize: 8, MaxEntries: 512}
			c, m := cacheFixture(t, counterYAML, cacheSize, spec)
			rng := rand.New(rand.NewPCG(1, uint64(cacheSize)))
			live := map[[2]uint32]uint64{}
			opName := map[uint32]string{1: "read", 2: "write", 3: "read"}
			for round := 0; round < 40; round++ {
				for i := 0; i < 30; i++ {
					k := [2]uint32{uint32(rng.IntN(3) + 1), uint32(rng.IntN(60))}
					if _, ok := live[k]; ok && rng.IntN(3) == 0 {
						if err := m.Delete(key(k[0], k[1])); err != nil {
							t.Fatal(err)
						}
						delete(live, k)
						continue
					}
					v := uint64(rng.IntN(1000))
					put(t, m, key(k[0], k[1]), v)
					live[k] = v
				}
				want := map[string]float64{}
				for k, v := range live {
					want[fmt.Sprintf("dev=%d,op=%s", k[1], opName[k[0]])] += float64(v)
				}
				got, _, _ := counters(t, c)
				if !sameValues(got, want) {
					t.Fatalf("round %d: got %v\nwant %v", round, got, want)
				}
				if n := c.metrics[0].rs.index.len(); n > cacheSize || n > len(live) {
					t.Fatalf("round %d: %d cached keys, %d live, cache size %d", round, n, len(live), cacheSize)
				}
			}
		})
	}
}

// TestCompact shrinks a big map and checks that the cache is rebuilt small
// and keeps giving right sums.
func TestCompact(t *testing.T) {
	spec := &ebpf.MapSpec{Name: "ops_total", Type: ebpf.Hash, KeySize: 8, ValueSize: 8, MaxEntries: 8192}
	c, m := cacheFixture(t, counterYAML, 100000, spec)
	const n = 6000
	keys := make([][8]byte, n)
	vals := make([]uint64, n)
	for i := range keys {
		copy(keys[i][:], key(2, uint32(i)))
		vals[i] = 1
	}
	if _, err := m.BatchUpdate(keys, vals, nil); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := counters(t, c); len(got) != n {
		t.Fatalf("%d series, want %d", len(got), n)
	}
	if _, err := m.BatchDelete(keys[100:], nil); err != nil {
		t.Fatal(err)
	}
	got, _, _ := counters(t, c)
	rs := &c.metrics[0].rs
	if len(got) != 100 || rs.index.len() != 100 || len(rs.esid) != 100 || rs.peak != 100 {
		t.Fatalf("after shrink: %d series, %d keys, %d entries, peak %d", len(got), rs.index.len(), len(rs.esid), rs.peak)
	}
	put(t, m, key(1, 1), 5)
	got, _, _ = counters(t, c)
	if len(got) != 101 || got["dev=1,op=read"] != 5 || got["dev=99,op=write"] != 1 {
		t.Fatalf("after compact: %d series, %v %v", len(got), got["dev=1,op=read"], got["dev=99,op=write"])
	}
}

// listSource hands a read its entries as listed, duplicates included (the
// per-key iteration lists keys again when it starts over).
type listSource struct{ keys [][]byte }

func (s listSource) eachRaw(fn func(key, val []byte)) (int, error) {
	for i, k := range s.keys {
		fn(k, binary.NativeEndian.AppendUint64(nil, uint64(i+1)))
	}
	return len(s.keys), nil
}

// TestDuplicateKeys reads a key listed twice, in the first read (whose
// keys are indexed at its end, see readState.settle) and in the next:
// its values add up in one series, never in two series with one label
// set, for an injective metric (a series per key) and for another.
func TestDuplicateKeys(t *testing.T) {
	const pairYAML = `metrics:
  counters:
    - name: ops_total
      help: ops
      labels:
        - {name: op, size: 4, decoders: [{name: uint}]}
        - {name: dev, size: 4, decoders: [{name: uint}]}
`
	for _, tc := range []struct {
		name, yaml, k1, k2 string
	}{
		{"injective", pairYAML, "dev=7,op=1", "dev=8,op=2"},
		{"static_map", counterYAML, "dev=7,op=read", "dev=8,op=write"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := cacheFixture(t, tc.yaml, 100, opsSpec)
			if inj := c.metrics[0].rs.injective; inj != (tc.name == "injective") {
				t.Fatalf("injective = %v", inj)
			}
			// Values 1, 2, 3, 4: key(1, 7) has 1 + 3.
			c.reads[0].reader = listSource{[][]byte{key(1, 7), key(2, 8), key(1, 7), key(3, 9)}}
			want := map[string]float64{tc.k1: 4, tc.k2: 2, "dev=9,op=3": 4}
			if tc.name != "injective" {
				want = map[string]float64{tc.k1: 4, tc.k2: 2, "dev=9,op=read": 4}
			}
			for read := 1; read <= 2; read++ {
				snap := c.Read()
				f := snap.Families[0]
				got := map[string]float64{}
				for i := range f.Len() {
					v := f.LabelValues(i)
					k := "dev=" + v[1] + ",op=" + v[0]
					if _, dup := got[k]; dup {
						t.Fatalf("read %d: two series %s", read, k)
					}
					got[k] = f.Value(i)
				}
				if !sameValues(got, want) {
					t.Errorf("read %d: %v, want %v", read, got, want)
				}
				if n := c.metrics[0].rs.index.len(); n != 3 {
					t.Errorf("read %d: %d keys cached, want 3", read, n)
				}
			}
		})
	}
}

// TestLongLabelValues reads label values of 127, 128 and 300 bytes, whose
// lengths take one and two bytes in the label set's record.
func TestLongLabelValues(t *testing.T) {
	names := map[uint32]string{1: strings.Repeat("a", 127), 2: strings.Repeat("b", 128), 3: strings.Repeat("c", 300)}
	y := opsYAML + fmt.Sprintf(`            - name: static_map
              static_map: {1: %s, 2: %s, 3: %s}
        - {name: dev, size: 4, decoders: [{name: uint}]}
`, names[1], names[2], names[3])
	c, m := cacheFixture(t, y, 100, opsSpec)
	for op := uint32(1); op <= 3; op++ {
		put(t, m, key(op, 1000+op), uint64(op))
	}
	for read := 1; read <= 2; read++ {
		f := c.Read().Families[0]
		if f.Len() != 3 {
			t.Fatalf("read %d: %d series, want 3", read, f.Len())
		}
		for i := range f.Len() {
			v := f.LabelValues(i)
			op := uint32(f.Value(i))
			if v[0] != names[op] || v[1] != fmt.Sprint(1000+op) {
				t.Errorf("read %d: series %d has labels of %d and %q, want %d bytes and %d", read, i, len(v[0]), v[1], len(names[op]), 1000+op)
			}
		}
	}
}

// TestOffHeapSlabs reads a map large enough for the read state's slabs to
// be mapped outside the Go heap (offheap.go), shrinks it (the slabs are
// rebuilt and the old mappings unmapped), grows it again, and checks the
// sums at every step and that the mappings go once the config is
// collected.
func TestOffHeapSlabs(t *testing.T) {
	const n = 40000
	spec := &ebpf.MapSpec{Name: "ops_total", Type: ebpf.Hash, KeySize: 8, ValueSize: 8, MaxEntries: n}
	y := strings.Replace(counterYAML, "      help: ops\n", "      help: ops\n      max_series: 50000\n", 1)
	c, m := cacheFixture(t, y, n, spec)
	keys := make([][8]byte, n)
	vals := make([]uint64, n)
	for i := range keys {
		copy(keys[i][:], key(2, uint32(i)))
		vals[i] = uint64(i)
	}
	if _, err := m.BatchUpdate(keys, vals, nil); err != nil {
		t.Fatal(err)
	}
	check := func(step string, want int) {
		t.Helper()
		got, _, _ := counters(t, c)
		if len(got) != want {
			t.Fatalf("%s: %d series, want %d", step, len(got), want)
		}
		for i := range want {
			if v := got[fmt.Sprintf("dev=%d,op=write", i)]; v != float64(i) {
				t.Fatalf("%s: dev %d = %v, want %d", step, i, v, i)
			}
		}
	}
	check("first read", n)
	check("second read", n)
	rs := &c.metrics[0].rs
	mapped := len(rs.off.maps)
	if mapped == 0 {
		t.Fatal("no slab mapped outside the heap")
	}
	if _, err := m.BatchDelete(keys[100:], nil); err != nil {
		t.Fatal(err)
	}
	check("after the shrink", 100)
	if len(rs.off.maps) >= mapped {
		t.Errorf("%d mappings after the rebuild, %d before: want fewer", len(rs.off.maps), mapped)
	}
	if _, err := m.BatchUpdate(keys[100:], vals[100:], nil); err != nil {
		t.Fatal(err)
	}
	check("grown again", n)
	off := rs.off
	c, rs = nil, nil
	for deadline := time.Now().Add(5 * time.Second); len(off.maps) > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d mappings left 5 s after the config was dropped", len(off.maps))
		}
		runtime.GC()
	}
}

// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"encoding/binary"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/kernel-exporter/kernel_exporter/config"
	"github.com/kernel-exporter/kernel_exporter/decoder"
)

// needBPF skips without root, except in CI where these tests must run.
func needBPF(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("needs root for BPF maps, and CI=true forbids skipping")
		}
		t.Skip("needs root for BPF maps")
	}
}

// fixture compiles yaml against maps created in the kernel and returns the
// collector and the live maps by name.
func fixture(t *testing.T, yaml string, specs ...*ebpf.MapSpec) (*Config, map[string]*ebpf.Map) {
	t.Helper()
	return fixtureWith(t, Limits{CacheSize: 100}, yaml, specs...)
}

// fixtureWith is fixture with the collector's limits.
func fixtureWith(t *testing.T, lim Limits, yaml string, specs ...*ebpf.MapSpec) (*Config, map[string]*ebpf.Map) {
	t.Helper()
	needBPF(t)
	cfg, err := config.Parse("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	cs := &ebpf.CollectionSpec{Maps: map[string]*ebpf.MapSpec{}}
	coll := &ebpf.Collection{Maps: map[string]*ebpf.Map{}}
	for _, ms := range specs {
		cs.Maps[ms.Name] = ms
		m, err := ebpf.NewMap(ms)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		coll.Maps[ms.Name] = m
	}
	plan, err := Compile(cfg, cs, decoder.NewEnv(100))
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(plan, coll, lim)
	if err != nil {
		t.Fatal(err)
	}
	return c, coll.Maps
}

func collect(t *testing.T, cc *Config) map[string]*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	isConfig := true
	reg.MustRegister(asCollector{cc})
	if isConfig {
		// A first read, so that the tests see two (counters of the
		// self-metrics count both).
		if _, err := reg.Gather(); err != nil {
			t.Fatal(err)
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if isConfig {
		// The self-metrics once the second read is over: gathered apart,
		// since a registry runs its collectors concurrently.
		st := &Status{}
		st.Add(&State{Name: cc.name, Up: true, Collector: cc})
		sreg := prometheus.NewPedanticRegistry()
		sreg.MustRegister(statusOnly{st})
		smfs, err := sreg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		mfs = append(mfs, smfs...)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

func labelsOf(m *dto.Metric) string {
	var parts []string
	for _, l := range m.GetLabel() {
		parts = append(parts, l.GetName()+"="+l.GetValue())
	}
	return strings.Join(parts, ",")
}

func key(fields ...uint32) []byte {
	b := make([]byte, 4*len(fields))
	for i, f := range fields {
		binary.NativeEndian.PutUint32(b[4*i:], f)
	}
	return b
}

func u64(v uint64) []byte {
	b := make([]byte, 8)
	binary.NativeEndian.PutUint64(b, v)
	return b
}

func put(t *testing.T, m *ebpf.Map, k []byte, v uint64) {
	t.Helper()
	if err := m.Put(k, u64(v)); err != nil {
		t.Fatal(err)
	}
}

// counterYAML's op label decodes 1 and 3 to "read", 2 to "write"; any
// other op fails in errno (static_map prints it "unknown:9", not a number):
// the decoder error the tests need.
const counterYAML = `metrics:
  counters:
    - name: ops_total
      help: ops
      labels:
        - name: op
          size: 4
          decoders:
            - name: uint
            - name: static_map
              static_map: {1: "1", 2: "2", 3: "3"}
            - name: errno
            - name: static_map
              static_map: {EPERM: read, ENOENT: write, ESRCH: read}
        - name: dev
          size: 4
          decoders:
            - name: uint
`

// TestCounter checks decoding, summing of keys with equal label sets, and
// decoder errors.
func TestCounter(t *testing.T) {
	c, maps := fixture(t, counterYAML, &ebpf.MapSpec{Name: "ops_total", Type: ebpf.Hash, KeySize: 8, ValueSize: 8, MaxEntries: 64})
	m := maps["ops_total"]
	if _, _, ok := c.LastRead(); ok {
		t.Errorf("LastRead before any read: ok")
	}
	put(t, m, key(1, 7), 10)
	put(t, m, key(3, 7), 5) // op 3 also decodes to "read": summed
	put(t, m, key(2, 7), 4)
	put(t, m, key(9, 7), 100) // unknown:9 fails in errno: decoder error, dropped
	mfs := collect(t, c)
	got := map[string]float64{}
	for _, mm := range mfs["kernel_ops_total"].GetMetric() {
		got[labelsOf(mm)] = mm.GetCounter().GetValue()
	}
	want := map[string]float64{"dev=7,op=read": 15, "dev=7,op=write": 4}
	if len(got) != len(want) || got["dev=7,op=read"] != 15 || got["dev=7,op=write"] != 4 {
		t.Errorf("got %v, want %v", got, want)
	}
	errs := mfs["kernel_exporter_decoder_errors_total"].GetMetric()[0].GetCounter().GetValue()
	// collect reads the map twice (see collect): one bad key per read.
	if errs != 2 {
		t.Errorf("decoder errors = %v, want 2", errs)
	}
	if v := mfs["kernel_exporter_map_entries_read"].GetMetric()[0].GetGauge().GetValue(); v != 4 {
		t.Errorf("entries read = %v, want 4", v)
	}
	if n, took, ok := c.LastRead(); !ok || n != 2 || took <= 0 {
		t.Errorf("LastRead = %d series in %v (ok %v), want 2 series (4 entries, 2 label sets)", n, took, ok)
	}
}

// TestMaxSeries checks the cardinality guard.
func TestMaxSeries(t *testing.T) {
	y := strings.Replace(counterYAML, "      help: ops\n", "      help: ops\n      max_series: 2\n", 1)
	c, maps := fixture(t, y, &ebpf.MapSpec{Name: "ops_total", Type: ebpf.Hash, KeySize: 8, ValueSize: 8, MaxEntries: 64})
	for dev := uint32(0); dev < 5; dev++ {
		put(t, maps["ops_total"], key(1, dev), 1)
	}
	var logged []string
	defer func(f func(string, string, int)) { overflowLog = f }(overflowLog)
	overflowLog = func(config, metric string, limit int) {
		logged = append(logged, fmt.Sprintf("%s %s %d", config, metric, limit))
	}
	mfs := collect(t, c)
	ms := mfs["kernel_ops_total"].GetMetric()
	if len(ms) != 3 {
		t.Fatalf("series = %d, want 2 and the overflow series", len(ms))
	}
	total := 0.0
	for _, m := range ms {
		total += m.GetCounter().GetValue()
	}
	if total != 5 {
		t.Errorf("sum over the series = %v, want the sum over the map, 5", total)
	}
	if got := labelsOf(ms[2]); got != "dev=__overflow__,op=__overflow__" || ms[2].GetCounter().GetValue() != 3 {
		t.Errorf("overflow series %s = %v, want 3", got, ms[2].GetCounter().GetValue())
	}
	// Three series over the limit, in each of the two reads.
	if v := mfs["kernel_exporter_series_overflow_entries_total"].GetMetric()[0].GetCounter().GetValue(); v != 6 {
		t.Errorf("overflow entries = %v, want 6", v)
	}
	if len(logged) != 1 || logged[0] != "test kernel_ops_total 2" {
		t.Errorf("overflow logged %q, want once", logged)
	}
	if hits := c.LimitHits(); len(hits) != 1 || hits[0] != "kernel_ops_total (max_series 2)" {
		t.Errorf("limit hits = %v", hits)
	}
}

func histYAML(bucketType, extra string) string {
	return `metrics:
  histograms:
    - name: lat_seconds
      help: latency
      bucket_type: ` + bucketType + `
      bucket_multiplier: 0.001
` + extra + `      labels:
        - name: op
          size: 4
          decoders:
            - name: uint
        - name: bucket
          size: 4
          decoders:
            - name: uint
`
}

type bucket struct {
	le  float64
	cum uint64
}

// TestHistogramFromMap assembles histograms from raw (op, slot) → count
// entries for each bucket type, in a per-CPU map.
func TestHistogramFromMap(t *testing.T) {
	for _, tc := range []struct {
		name, typ, extra string
		entries          map[uint32]uint64 // slot → count for op 1
		buckets          []bucket
		count            uint64
		sum              float64
	}{
		{"exp2", "exp2", "      bucket_min: 0\n      bucket_max: 3\n",
			map[uint32]uint64{0: 1, 2: 3, 3: 1, 4: 50 /* sum slot */, 9: 2 /* above: +Inf only */},
			[]bucket{{0.001, 1}, {0.002, 1}, {0.004, 4}, {0.008, 5}}, 7, 0.050},
		{"exp2 min", "exp2", "      bucket_min: 2\n      bucket_max: 3\n",
			map[uint32]uint64{0: 1, 1: 1, 2: 1, 3: 1},
			[]bucket{{0.004, 3}, {0.008, 4}}, 4, 0},
		{"exp2zero", "exp2zero", "      bucket_min: 0\n      bucket_max: 2\n",
			map[uint32]uint64{0: 2, 1: 1, 2: 4, 3: 9},
			[]bucket{{0, 2}, {0.001, 3}, {0.002, 7}}, 7, 0.009},
		{"linear", "linear", "      bucket_min: 1\n      bucket_max: 3\n",
			map[uint32]uint64{1: 1, 2: 2, 3: 3, 4: 12},
			[]bucket{{0.001, 1}, {0.002, 3}, {0.003, 6}}, 6, 0.012},
		{"fixed", "fixed", "      bucket_keys: [10, 100]\n      sum_bucket: 1000\n",
			map[uint32]uint64{10: 5, 100: 1, 1000: 700, 7: 1 /* unknown slot: +Inf */},
			[]bucket{{0.010, 5}, {0.100, 6}}, 7, 0.700},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, maps := fixture(t, histYAML(tc.typ, tc.extra),
				&ebpf.MapSpec{Name: "lat_seconds", Type: ebpf.PerCPUHash, KeySize: 8, ValueSize: 8, MaxEntries: 64})
			ncpu, err := ebpf.PossibleCPU()
			if err != nil {
				t.Fatal(err)
			}
			for slot, n := range tc.entries {
				// Spread each count over the CPUs: the collector must sum them.
				vals := make([]uint64, ncpu)
				vals[0] = n
				if ncpu > 1 && n > 1 {
					vals[0], vals[1] = n-1, 1
				}
				if err := maps["lat_seconds"].Put(key(1, slot), vals); err != nil {
					t.Fatal(err)
				}
			}
			mfs := collect(t, c)
			ms := mfs["kernel_lat_seconds"].GetMetric()
			if len(ms) != 1 || labelsOf(ms[0]) != "op=1" {
				t.Fatalf("series: %v", ms)
			}
			h := ms[0].GetHistogram()
			if h.GetSampleCount() != tc.count {
				t.Errorf("count = %d, want %d", h.GetSampleCount(), tc.count)
			}
			if d := h.GetSampleSum() - tc.sum; d > 1e-12 || d < -1e-12 {
				t.Errorf("sum = %v, want %v", h.GetSampleSum(), tc.sum)
			}
			var got []bucket
			for _, b := range h.GetBucket() {
				got = append(got, bucket{b.GetUpperBound(), b.GetCumulativeCount()})
			}
			sort.Slice(got, func(i, j int) bool { return got[i].le < got[j].le })
			if len(got) != len(tc.buckets) {
				t.Fatalf("buckets = %v, want %v", got, tc.buckets)
			}
			for i := range got {
				if d := got[i].le - tc.buckets[i].le; d > 1e-12 || d < -1e-12 || got[i].cum != tc.buckets[i].cum {
					t.Fatalf("buckets = %v, want %v", got, tc.buckets)
				}
			}
		})
	}
}

// TestIterateFallback checks the per-key path gives the same result as the
// batch path.
func TestIterateFallback(t *testing.T) {
	c, maps := fixture(t, counterYAML, &ebpf.MapSpec{Name: "ops_total", Type: ebpf.Hash, KeySize: 8, ValueSize: 8, MaxEntries: 64})
	put(t, maps["ops_total"], key(1, 1), 3)
	put(t, maps["ops_total"], key(2, 1), 4)
	c.metrics[0].reader.noBatch = true
	mfs := collect(t, c)
	var total float64
	for _, mm := range mfs["kernel_ops_total"].GetMetric() {
		total += mm.GetCounter().GetValue()
	}
	if total != 7 || c.metrics[0].reader.iterated != 4 { // 2 keys, 2 reads
		t.Errorf("total %v, iterated %d", total, c.metrics[0].reader.iterated)
	}
}

// TestCompileErrors checks errors that need the object's maps.
func TestCompileErrors(t *testing.T) {
	cs := &ebpf.CollectionSpec{Maps: map[string]*ebpf.MapSpec{
		"ops_total": {Name: "ops_total", Type: ebpf.Hash, KeySize: 12, ValueSize: 8, MaxEntries: 1},
		"wide":      {Name: "wide", Type: ebpf.Hash, KeySize: 8, ValueSize: 12, MaxEntries: 1},
	}}
	for _, tc := range []struct{ name, yaml, want string }{
		{"key size", counterYAML, `test.yaml:5: metrics.counters[0].labels: label sizes add up to 8 bytes, but map "ops_total" has 12-byte keys (labels: "op" 0-4, "dev" 4-8)`},
		{"missing map", strings.Replace(counterYAML, "ops_total", "nope_total", 1), `test.yaml:3: metrics.counters[0].name: map "nope_total" not found in  (maps: ops_total, wide)`},
		{"value size", strings.Replace(counterYAML, "ops_total", "wide", 1), `test.yaml:3: metrics.counters[0].name: map "wide" has 12-byte values, want an integer of 1, 2, 4 or 8 bytes (or a struct, with values:)`},
		{"unknown decoder", strings.Replace(counterYAML, "name: static_map", "name: nope", 1),
			`test.yaml:10: metrics.counters[0].labels[0].decoders[1].name: unknown decoder "nope" (known: cgroup, dname, errno, hex, ifname, inet_ip, kstack, ksym, kube_container, kube_namespace, kube_pod, majorminor, pci_class, pci_device, pci_subclass, pci_vendor, regexp, signal, static_map, string, syscall, uint)`},
		{"bad regexp", strings.Replace(counterYAML, "            - name: uint\n", "            - name: regexp\n              regexps: ['a(']\n", 2),
			"test.yaml:10: metrics.counters[0].labels[0].decoders[0].regexps[0]: pattern (a string of 2 bytes) does not compile: missing closing )"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Parse("test.yaml", []byte(tc.yaml))
			if err == nil {
				_, err = Compile(cfg, cs, decoder.NewEnv(10))
			}
			if err == nil {
				t.Fatal("no error")
			}
			if err.Error() != tc.want {
				t.Errorf("error:\n got: %s\nwant: %s", err, tc.want)
			}
		})
	}
}

// statusOnly is a Status that sends its status and self-metrics without
// reading the configs first, as Status.Collect does.
type statusOnly struct{ *Status }

func (s statusOnly) Collect(ch chan<- prometheus.Metric) { s.collect(ch, s.States()) }

// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"

	"github.com/kernel-exporter/kernel_exporter/config"
	"github.com/kernel-exporter/kernel_exporter/decoder"
)

// family returns the family of a snapshot by metric name.
func family(t *testing.T, s *Snapshot, name string) *Family {
	t.Helper()
	for _, f := range s.Families {
		if f.Name == name {
			if f.Err != nil {
				t.Fatalf("%s: %v", name, f.Err)
			}
			return f
		}
	}
	t.Fatalf("no family %s", name)
	return nil
}

// values returns a counter or gauge family's values by label values
// ("name=value,..." in label order).
func values(f *Family) map[string]float64 {
	out := map[string]float64{}
	for i := 0; i < f.Len(); i++ {
		var parts []string
		for j, v := range f.LabelValues(i) {
			parts = append(parts, f.LabelNames[j]+"="+v)
		}
		out[strings.Join(parts, ",")] = f.Value(i)
	}
	return out
}

func wantValues(t *testing.T, f *Family, want map[string]float64) {
	t.Helper()
	got := values(f)
	if fmt.Sprint(sorted(got)) != fmt.Sprint(sorted(want)) {
		t.Fatalf("%s = %v, want %v", f.Name, sorted(got), sorted(want))
	}
}

func sorted(m map[string]float64) []string {
	var out []string
	for k, v := range m {
		out = append(out, fmt.Sprintf("%s:%v", k, v))
	}
	sort.Strings(out)
	return out
}

func TestValueFieldRead(t *testing.T) {
	b := []byte{0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x2a}
	for _, tc := range []struct {
		f    ValueField
		want int64
	}{
		{ValueField{Off: 0, Size: 1}, 0xfe},
		{ValueField{Off: 0, Size: 1, Signed: true}, -2},
		{ValueField{Off: 0, Size: 2}, 0xfffe},
		{ValueField{Off: 0, Size: 2, Signed: true}, -2},
		{ValueField{Off: 0, Size: 4}, 0xfffffffe},
		{ValueField{Off: 0, Size: 4, Signed: true}, -2},
		{ValueField{Off: 0, Size: 8, Signed: true}, -2},
		{ValueField{Off: 8, Size: 1}, 42},
	} {
		if got := int64(tc.f.read(b)); got != tc.want {
			t.Errorf("%+v: %d, want %d", tc.f, got, tc.want)
		}
	}
}

const gaugeYAML = `metrics:
  gauges:
    - name: depth
      help: queue depth
      signed: true
      labels:
        - name: q
          size: 4
          decoders:
            - name: uint
    - name: small
      help: 2-byte value
      labels:
        - name: i
          size: 4
          decoders:
            - name: uint
`

// TestGauge reads 4-byte signed and 2-byte unsigned values as gauges that
// go up and down.
func TestGauge(t *testing.T) {
	c, maps := fixture(t, gaugeYAML,
		&ebpf.MapSpec{Name: "depth", Type: ebpf.Hash, KeySize: 4, ValueSize: 4, MaxEntries: 8},
		&ebpf.MapSpec{Name: "small", Type: ebpf.Array, KeySize: 4, ValueSize: 2, MaxEntries: 2})
	put32 := func(k uint32, v int32) {
		if err := maps["depth"].Put(k, v); err != nil {
			t.Fatal(err)
		}
	}
	put32(1, 7)
	put32(2, -5)
	if err := maps["small"].Put(uint32(1), uint16(65535)); err != nil {
		t.Fatal(err)
	}
	s := c.Read()
	f := family(t, s, "kernel_depth")
	if f.Kind != KindGauge {
		t.Fatalf("kind %v, want gauge", f.Kind)
	}
	wantValues(t, f, map[string]float64{"q=1": 7, "q=2": -5})
	wantValues(t, family(t, s, "kernel_small"), map[string]float64{"i=0": 0, "i=1": 65535})
	put32(1, 3) // goes down
	wantValues(t, family(t, c.Read(), "kernel_depth"), map[string]float64{"q=1": 3, "q=2": -5})
}

// flowValue is struct { __u64 bytes; __u32 packets; __s32 delta; }.
func flowValue() *btf.Struct {
	u64 := &btf.Int{Name: "__u64", Size: 8}
	u32 := &btf.Int{Name: "__u32", Size: 4}
	s32 := &btf.Int{Name: "__s32", Size: 4, Encoding: btf.Signed}
	return &btf.Struct{Name: "flow", Size: 16, Members: []btf.Member{
		{Name: "bytes", Type: u64, Offset: 0},
		{Name: "packets", Type: &btf.Typedef{Name: "pkts_t", Type: u32}, Offset: 64},
		{Name: "delta", Type: s32, Offset: 96},
	}}
}

func flowBytes(bytes uint64, packets uint32, delta int32) []byte {
	b := make([]byte, 16)
	binary.NativeEndian.PutUint64(b, bytes)
	binary.NativeEndian.PutUint32(b[8:], packets)
	binary.NativeEndian.PutUint32(b[12:], uint32(delta))
	return b
}

const structYAML = `metrics:
  counters:
    - name: flows
      help: flows by port
      per_cpu: PERCPU
      labels:
        - name: port
          size: 4
          decoders:
            - name: uint
      values:
        - field: bytes
          name: flow_bytes_total
        - field: packets
          name: flow_packets_total
          help: packets by port
        - field: delta
          name: flow_delta_total
`

// TestStructValues reads three fields of a struct value (through a typedef,
// one signed) as three metrics, with one read of the map; then the same
// from a per-CPU map, summed and under a cpu label, by batches and by the
// per-key fallback.
func TestStructValues(t *testing.T) {
	spec := &ebpf.MapSpec{Name: "flows", Type: ebpf.Hash, KeySize: 4, ValueSize: 16, MaxEntries: 8, Value: flowValue()}
	c, maps := fixture(t, strings.Replace(structYAML, "PERCPU", "sum", 1), spec)
	if len(c.reads) != 1 || c.reads[0].n != 3 {
		t.Fatalf("reads %+v: want one read for the three metrics", c.reads)
	}
	if err := maps["flows"].Put(uint32(80), flowBytes(1500, 3, -2)); err != nil {
		t.Fatal(err)
	}
	if err := maps["flows"].Put(uint32(443), flowBytes(64, 1, 5)); err != nil {
		t.Fatal(err)
	}
	for _, iterate := range []bool{false, true} {
		c.reads[0].reader.(*mapReader).noBatch = iterate
		s := c.Read()
		wantValues(t, family(t, s, "kernel_flow_bytes_total"), map[string]float64{"port=80": 1500, "port=443": 64})
		wantValues(t, family(t, s, "kernel_flow_packets_total"), map[string]float64{"port=80": 3, "port=443": 1})
		wantValues(t, family(t, s, "kernel_flow_delta_total"), map[string]float64{"port=80": -2, "port=443": 5})
		if f := family(t, s, "kernel_flow_packets_total"); f.Help != "packets by port" || f.Kind != KindCounter {
			t.Errorf("help %q kind %v", f.Help, f.Kind)
		}
		if s.Families[0].Help != "flows by port" {
			t.Errorf("default help %q", s.Families[0].Help)
		}
	}
	if got := c.lastEntries.Load(); got != 2 {
		t.Errorf("entries read %d, want 2 (one read for three metrics)", got)
	}

	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		t.Fatal(err)
	}
	pspec := &ebpf.MapSpec{Name: "flows", Type: ebpf.PerCPUHash, KeySize: 4, ValueSize: 16, MaxEntries: 8, Value: flowValue()}
	per := make([][]byte, ncpu)
	var sumBytes, sumPackets float64
	want := map[string]float64{}
	for i := range per {
		per[i] = flowBytes(uint64(100*(i+1)), uint32(i+1), int32(-i))
		sumBytes += float64(100 * (i + 1))
		sumPackets += float64(i + 1)
		want[fmt.Sprintf("cpu=%d,port=80", i)] = float64(i + 1)
	}
	for _, mode := range []string{"sum", "label"} {
		c, maps := fixture(t, strings.Replace(structYAML, "PERCPU", mode, 1), pspec)
		if err := maps["flows"].Put(uint32(80), per); err != nil {
			t.Fatal(err)
		}
		for _, iterate := range []bool{false, true} {
			c.reads[0].reader.(*mapReader).noBatch = iterate
			s := c.Read()
			if mode == "sum" {
				wantValues(t, family(t, s, "kernel_flow_bytes_total"), map[string]float64{"port=80": sumBytes})
				wantValues(t, family(t, s, "kernel_flow_packets_total"), map[string]float64{"port=80": sumPackets})
			} else {
				wantValues(t, family(t, s, "kernel_flow_packets_total"), want)
			}
		}
	}
}

// TestPerCPUPadding reads a per-CPU map of 4-byte values, which the kernel
// copies out padded to 8 bytes per CPU, summed and by CPU, and a per-CPU
// histogram under a cpu label.
func TestPerCPUPadding(t *testing.T) {
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		t.Fatal(err)
	}
	const yaml = `metrics:
  gauges:
    - name: inflight
      help: in flight
      per_cpu: PERCPU
      labels:
        - name: k
          size: 4
          decoders:
            - name: uint
  histograms:
    - name: lat_seconds
      help: latency
      per_cpu: PERCPU
      bucket_type: exp2
      bucket_min: 0
      bucket_max: 3
      labels:
        - name: bucket
          size: 4
`
	for _, mode := range []string{"sum", "label"} {
		c, maps := fixture(t, strings.ReplaceAll(yaml, "PERCPU", mode),
			&ebpf.MapSpec{Name: "inflight", Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 4, MaxEntries: 1},
			&ebpf.MapSpec{Name: "lat_seconds", Type: ebpf.PerCPUHash, KeySize: 4, ValueSize: 8, MaxEntries: 8})
		vals := make([]uint32, ncpu)
		var total float64
		want := map[string]float64{}
		for i := range vals {
			vals[i] = uint32(10 + i)
			total += float64(10 + i)
			want[fmt.Sprintf("cpu=%d,k=0", i)] = float64(10 + i)
		}
		if err := maps["inflight"].Put(uint32(0), vals); err != nil {
			t.Fatal(err)
		}
		// Slot 1 (le 2): CPU i holds i+1 observations; slot 2 (le 4): 1 on CPU 0.
		slot1 := make([]uint64, ncpu)
		slot2 := make([]uint64, ncpu)
		for i := range slot1 {
			slot1[i] = uint64(i + 1)
		}
		slot2[0] = 1
		if err := maps["lat_seconds"].Put(uint32(1), slot1); err != nil {
			t.Fatal(err)
		}
		if err := maps["lat_seconds"].Put(uint32(2), slot2); err != nil {
			t.Fatal(err)
		}
		s := c.Read()
		h := family(t, s, "kernel_lat_seconds")
		if mode == "sum" {
			wantValues(t, family(t, s, "kernel_inflight"), map[string]float64{"k=0": total})
			if h.Len() != 1 {
				t.Fatalf("%d histogram series, want 1", h.Len())
			}
			cum, count, _ := h.Histogram(0)
			n := uint64(ncpu * (ncpu + 1) / 2)
			if fmt.Sprint(cum) != fmt.Sprint([]uint64{0, n, n + 1, n + 1}) || count != n+1 {
				t.Fatalf("buckets %v count %d, want [0 %d %d %d] and %d", cum, count, n, n+1, n+1, n+1)
			}
			continue
		}
		wantValues(t, family(t, s, "kernel_inflight"), want)
		if h.Len() != ncpu || h.LabelNames[0] != "cpu" {
			t.Fatalf("%d histogram series with labels %v, want %d with cpu", h.Len(), h.LabelNames, ncpu)
		}
		for i := 0; i < h.Len(); i++ {
			var cpu int
			fmt.Sscan(h.LabelValues(i)[0], &cpu)
			cum, count, _ := h.Histogram(i)
			one := uint64(cpu + 1)
			want := []uint64{0, one, one, one}
			if cpu == 0 {
				want = []uint64{0, 1, 2, 2}
			}
			if fmt.Sprint(cum) != fmt.Sprint(want) || count != want[3] {
				t.Errorf("cpu %d: buckets %v count %d, want %v", cpu, cum, count, want)
			}
		}
	}
}

// TestValuesCompileErrors checks the errors that need the object's maps:
// each names the file, the line, the field path, the metric, the map and
// the field.
func TestValuesCompileErrors(t *testing.T) {
	cs := &ebpf.CollectionSpec{Maps: map[string]*ebpf.MapSpec{
		"flows":  {Name: "flows", Type: ebpf.Hash, KeySize: 4, ValueSize: 16, MaxEntries: 1, Value: flowValue()},
		"plain":  {Name: "plain", Type: ebpf.Hash, KeySize: 4, ValueSize: 8, MaxEntries: 1, Value: &btf.Int{Size: 8}},
		"nobtf":  {Name: "nobtf", Type: ebpf.Hash, KeySize: 4, ValueSize: 8, MaxEntries: 1},
		"odd":    {Name: "odd", Type: ebpf.Hash, KeySize: 4, ValueSize: 3, MaxEntries: 1},
		"pcpu":   {Name: "pcpu", Type: ebpf.PerCPUHash, KeySize: 4, ValueSize: 8, MaxEntries: 1},
		"arrays": {Name: "arrays", Type: ebpf.Hash, KeySize: 4, ValueSize: 16, MaxEntries: 1, Value: &btf.Struct{Size: 16, Members: []btf.Member{{Name: "a", Type: &btf.Array{Type: &btf.Int{Size: 8}, Nelems: 2}}}}},
	}}
	values := func(m, field string) string {
		return "metrics:\n  counters:\n    - name: " + m + "\n      help: h\n      labels:\n        - {name: k, size: 4, decoders: [{name: uint}]}\n      values:\n        - {field: " + field + ", name: x_total}\n"
	}
	for _, tc := range []struct{ name, yaml, want string }{
		{"missing field", values("flows", "octets"), `test.yaml:8: metrics.counters[0].values[0].field: metric "x_total": map "flows": field "octets": not a field of the value struct (fields: bytes, packets, delta)`},
		{"not a struct", values("plain", "a"), `test.yaml:7: metrics.counters[0].values: metric "plain": map "plain": its value is not a struct in the object's BTF`},
		{"no btf", values("nobtf", "a"), `test.yaml:7: metrics.counters[0].values: metric "nobtf": map "nobtf": the object has no BTF for its value (declare the map with __type(value, struct ...))`},
		{"array field", values("arrays", "a"), `test.yaml:8: metrics.counters[0].values[0].field: metric "x_total": map "arrays": field "a": an array, want an integer of 1, 2, 4 or 8 bytes`},
		{"odd size", "metrics:\n  gauges:\n    - name: odd\n      help: h\n", `test.yaml:3: metrics.gauges[0].name: map "odd" has 3-byte values, want an integer of 1, 2, 4 or 8 bytes (or a struct, with values:)`},
		{"per_cpu label", "metrics:\n  gauges:\n    - name: plain\n      help: h\n      per_cpu: label\n", `test.yaml:5: metrics.gauges[0].per_cpu: metric "plain": per_cpu: label needs a per-CPU map, but map "plain" is a Hash map`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Parse("test.yaml", []byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			_, err = Compile(cfg, cs, decoder.NewEnv(10))
			if err == nil || err.Error() != tc.want {
				t.Fatalf("got  %v\nwant %s", err, tc.want)
			}
		})
	}
}

// BenchmarkPerCPU reads a per-CPU hash map of 10,000 u64 counters keyed by
// a u32, summed over the CPUs (per_cpu: sum) and by CPU (per_cpu: label),
// and, as the baseline, a plain hash map of the same keys (hash); ns/entry
// is per map entry (each holding one value per possible CPU).
func BenchmarkPerCPU(b *testing.B) {
	const n = 10000
	needBPF(b)
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		b.Fatal(err)
	}
	for _, mode := range []string{"hash", "sum", "label"} {
		b.Run(mode, func(b *testing.B) {
			perCPU := mode
			if mode == "hash" {
				perCPU = "sum"
			}
			yaml := "metrics:\n  counters:\n    - name: pc_total\n      help: h\n      max_series: 100000\n      per_cpu: " + perCPU +
				"\n      labels:\n        - {name: k, size: 4, decoders: [{name: uint}]}\n"
			cfg, err := config.Parse("bench.yaml", []byte(yaml))
			if err != nil {
				b.Fatal(err)
			}
			spec := &ebpf.MapSpec{Name: "pc_total", Type: ebpf.PerCPUHash, KeySize: 4, ValueSize: 8, MaxEntries: 2 * n}
			var val any = make([]uint64, ncpu)
			for i := range val.([]uint64) {
				val.([]uint64)[i] = uint64(i + 1)
			}
			if mode == "hash" {
				spec.Type, val = ebpf.Hash, uint64(3)
			}
			m, err := ebpf.NewMap(spec)
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			for k := uint32(0); k < n; k++ {
				if err := m.Put(k, val); err != nil {
					b.Fatal(err)
				}
			}
			plan, err := Compile(cfg, &ebpf.CollectionSpec{Maps: map[string]*ebpf.MapSpec{"pc_total": spec}}, decoder.NewEnv(100))
			if err != nil {
				b.Fatal(err)
			}
			c, err := New(plan, &ebpf.Collection{Maps: map[string]*ebpf.Map{"pc_total": m}}, Limits{})
			if err != nil {
				b.Fatal(err)
			}
			c.Read() // warm the decode cache
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				c.Read()
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/entry")
			b.ReportMetric(float64(ncpu), "cpus")
		})
	}
}

// TestTTLGauge: a gauge's idle key is deleted without carry, also when
// its value changed at the last moment, from a per-CPU map of 4-byte
// values (summed), by lookup-and-delete and by lookup then delete.
func TestTTLGauge(t *testing.T) {
	const yaml = `metrics:
  gauges:
    - name: depth
      help: depth
      ttl: 10s
      labels:
        - name: q
          size: 4
          decoders:
            - name: uint
`
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		t.Fatal(err)
	}
	for _, noLAD := range []bool{false, true} {
		c, maps := fixture(t, yaml, &ebpf.MapSpec{Name: "depth", Type: ebpf.PerCPUHash, KeySize: 4, ValueSize: 4, MaxEntries: 8})
		m := maps["depth"]
		set := func(v uint32) {
			vals := make([]uint32, ncpu)
			for i := range vals {
				vals[i] = v
			}
			if err := m.Put(uint32(1), vals); err != nil {
				t.Fatal(err)
			}
		}
		x := c.metrics[0].exp
		x.noLookupDelete = noLAD
		at := ttlClock(c)
		set(5)
		ttlWant(t, "t=0", ttlSeries(c.Read()), map[string]float64{"q=1": float64(5 * ncpu)})
		x.beforeDelete = func([]byte) { set(8) } // moves at the last moment
		at(10 * time.Second)
		ttlWant(t, "t=10s", ttlSeries(c.Read()), map[string]float64{"q=1": float64(5 * ncpu)})
		x.beforeDelete = nil
		if ttlInMap(t, m, key(1)) || len(x.carried) != 0 {
			t.Fatalf("key in map %v, carried %d: want deleted, none carried", ttlInMap(t, m, key(1)), len(x.carried))
		}
		at(11 * time.Second)
		ttlWant(t, "t=11s", ttlSeries(c.Read()), map[string]float64{})
		set(2) // written again: the new level, nothing added
		at(12 * time.Second)
		ttlWant(t, "t=12s", ttlSeries(c.Read()), map[string]float64{"q=1": float64(2 * ncpu)})
	}
}

// TestCPULabelTaken: a key label named cpu (as one inferred from a key's
// BTF may be) and per_cpu: label clash, with an error naming the map.
func TestCPULabelTaken(t *testing.T) {
	cfg, err := config.Parse("test.yaml", []byte("metrics:\n  gauges:\n    - name: pcpu\n      help: h\n      per_cpu: label\n"))
	if err != nil {
		t.Fatal(err)
	}
	p := &Plan{Config: cfg}
	mp := &MetricPlan{MapName: "pcpu", Labels: []LabelPlan{{Name: "cpu", Size: 4}}}
	err = p.addCPULabel("metrics.gauges[0]", mp, decoder.NewEnv(10))
	want := `test.yaml:5: metrics.gauges[0].per_cpu: metric "pcpu": the key already has a label "cpu", which per_cpu: label would add`
	if err == nil || err.Error() != want {
		t.Fatalf("got  %v\nwant %s", err, want)
	}
}

// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/kernel-exporter/kernel_exporter/config"
	"github.com/kernel-exporter/kernel_exporter/decoder"
)

// slotsYAML is a histogram with slots_in_value over a per-CPU array keyed
// by a u32 vector: exp2 buckets 0..3 (le 1, 2, 4, 8), the sum in slot 4,
// and a sixth slot (5) above the sum, which counts in +Inf only.
const slotsYAML = `metrics:
  histograms:
    - name: lat_seconds
      help: latency
      per_cpu: PERCPU
      slots_in_value: true
      bucket_type: exp2
      bucket_min: 0
      bucket_max: 3
      labels:
        - name: vector
          size: 4
          decoders:
            - name: uint
`

// TestSlotsInValue reads a histogram whose map value holds every slot: per
// CPU, vector 0 has CPU i's i+1 observations in slot 1, one more in slot 3
// on CPU 0, a sum of 10·(i+1) and one observation in slot 5 on CPU 0;
// vector 1 was never written (all slots zero) and makes no series. Summed
// over CPUs and under a cpu label, by batch and by key.
func TestSlotsInValue(t *testing.T) {
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		t.Fatal(err)
	}
	const slots = 6
	spec := &ebpf.MapSpec{Name: "lat_seconds", Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8 * slots, MaxEntries: 2}
	per := make([][slots]uint64, ncpu)
	var n, sum uint64
	for i := range per {
		per[i][1] = uint64(i + 1)
		per[i][4] = uint64(10 * (i + 1))
		n += uint64(i + 1)
		sum += uint64(10 * (i + 1))
	}
	per[0][3] = 1
	per[0][5] = 1
	for _, mode := range []string{"sum", "label"} {
		c, maps := fixture(t, strings.ReplaceAll(slotsYAML, "PERCPU", mode), spec)
		if err := maps["lat_seconds"].Put(uint32(0), per); err != nil {
			t.Fatal(err)
		}
		wantLabels := 1 // vector; no bucket field
		if mode == "label" {
			wantLabels = 2 // cpu, vector
		}
		if layout := c.Layouts(); len(layout) != 1 || layout[0].ValueSlots != slots || len(layout[0].Labels) != wantLabels {
			t.Fatalf("layout %+v, want %d value slots and %d labels", layout, slots, wantLabels)
		}
		for _, iterate := range []bool{false, true} {
			c.reads[0].reader.(*mapReader).noBatch = iterate
			s := c.Read()
			h := family(t, s, "kernel_lat_seconds")
			if mode == "sum" {
				if h.Len() != 1 || h.LabelValues(0)[0] != "0" {
					t.Fatalf("iterate %v: %d series (%v), want vector 0 only", iterate, h.Len(), h.LabelNames)
				}
				cum, count, got := h.Histogram(0)
				want := []uint64{0, n, n, n + 1}
				if fmt.Sprint(cum) != fmt.Sprint(want) || count != n+2 || got != float64(sum) {
					t.Fatalf("iterate %v: buckets %v count %d sum %v, want %v, %d and %d", iterate, cum, count, got, want, n+2, sum)
				}
				continue
			}
			if h.Len() != ncpu || h.LabelNames[0] != "cpu" {
				t.Fatalf("iterate %v: %d series with labels %v, want %d with cpu", iterate, h.Len(), h.LabelNames, ncpu)
			}
			for i := 0; i < h.Len(); i++ {
				var cpu int
				fmt.Sscan(h.LabelValues(i)[0], &cpu)
				cum, count, got := h.Histogram(i)
				one := uint64(cpu + 1)
				want, wantCount := []uint64{0, one, one, one}, one
				if cpu == 0 {
					want, wantCount = []uint64{0, 1, 1, 2}, 3
				}
				if fmt.Sprint(cum) != fmt.Sprint(want) || count != wantCount || got != float64(10*(cpu+1)) {
					t.Errorf("iterate %v: cpu %d: buckets %v count %d sum %v, want %v, %d and %d", iterate, cpu, cum, count, got, want, wantCount, 10*(cpu+1))
				}
			}
		}
	}
}

// TestSlotsInValueErrors: a value that is not whole u64 slots, a bucket
// label and ttl are refused, each naming the file, line, field and map.
func TestSlotsInValueErrors(t *testing.T) {
	cs := &ebpf.CollectionSpec{Maps: map[string]*ebpf.MapSpec{
		"odd":  {Name: "odd", Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 12, MaxEntries: 1},
		"huge": {Name: "huge", Type: ebpf.Hash, KeySize: 4, ValueSize: 8 * (config.MaxValueSlots + 1), MaxEntries: 1},
	}}
	hist := func(m, extra string) string {
		return "metrics:\n  histograms:\n    - name: " + m + "\n      help: h\n      slots_in_value: true\n      bucket_type: exp2\n      bucket_max: 3\n" + extra
	}
	label := "      labels:\n        - {name: vector, size: 4, decoders: [{name: uint}]}\n"
	for _, tc := range []struct{ name, yaml, want string }{
		{"odd size", hist("odd", label), `test.yaml:5: metrics.histograms[0].slots_in_value: map "odd" has 12-byte values, want 1 to 4096 u64 slot counts (a multiple of 8 bytes)`},
		{"too many slots", hist("huge", label), `test.yaml:5: metrics.histograms[0].slots_in_value: map "huge" has 32776-byte values, want 1 to 4096 u64 slot counts (a multiple of 8 bytes)`},
		{"bucket label", hist("odd", "      labels:\n        - {name: bucket, size: 4}\n"), `test.yaml:9: metrics.histograms[0].labels[0].name: histogram "odd" has slots_in_value: its slots are the map value's elements, and its key has no "bucket" field`},
		{"ttl", hist("odd", "      ttl: 1h\n"+label), `test.yaml:8: metrics.histograms[0].ttl: metric "odd": ttl is not supported with slots_in_value`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Parse("test.yaml", []byte(tc.yaml))
			if err == nil {
				_, err = Compile(cfg, cs, decoder.NewEnv(10))
			}
			if err == nil || err.Error() != tc.want {
				t.Fatalf("got  %v\nwant %s", err, tc.want)
			}
		})
	}
}

// TestSkipZero reads a per-CPU array of 8 counters of which only key 2
// (on CPU 0) is non-zero: with skip_zero one series, key 2's (one per
// CPU under per_cpu: label: CPU 0's); without it, every key is a series.
func TestSkipZero(t *testing.T) {
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		t.Fatal(err)
	}
	const yaml = `metrics:
  counters:
    - name: calls_total
      help: calls
      per_cpu: PERCPU
      skip_zero: SKIP
      labels:
        - name: nr
          size: 4
          decoders:
            - name: uint
`
	spec := &ebpf.MapSpec{Name: "calls_total", Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 8}
	vals := make([]uint64, ncpu)
	vals[0] = 5
	for _, skip := range []bool{true, false} {
		for _, mode := range []string{"sum", "label"} {
			y := strings.NewReplacer("PERCPU", mode, "SKIP", fmt.Sprint(skip)).Replace(yaml)
			c, maps := fixture(t, y, spec)
			if err := maps["calls_total"].Put(uint32(2), vals); err != nil {
				t.Fatal(err)
			}
			got := values(family(t, c.Read(), "kernel_calls_total"))
			want := map[string]float64{"nr=2": 5}
			if mode == "label" {
				want = map[string]float64{"cpu=0,nr=2": 5}
			}
			if !skip {
				// Every key, every CPU, zeros included.
				want = map[string]float64{}
				for k := range 8 {
					if mode == "sum" {
						want[fmt.Sprintf("nr=%d", k)] = 0
						continue
					}
					for cpu := range ncpu {
						want[fmt.Sprintf("cpu=%d,nr=%d", cpu, k)] = 0
					}
				}
				if mode == "sum" {
					want["nr=2"] = 5
				} else {
					want["cpu=0,nr=2"] = 5
				}
			}
			if fmt.Sprint(sorted(got)) != fmt.Sprint(sorted(want)) {
				t.Errorf("skip_zero %v, per_cpu %s: series %v, want %v", skip, mode, sorted(got), sorted(want))
			}
		}
	}
}

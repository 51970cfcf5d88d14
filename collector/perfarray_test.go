// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/kernel-exporter/kernel_exporter/config"
	"github.com/kernel-exporter/kernel_exporter/decoder"
)

const perfYAML = `metrics:
  counters:
    - name: events_total
      help: Events
      perf_event_array: true
      flush_interval: 1h
      max_series: 2
      labels:
        - name: op
          size: 4
          padding: 4
          decoders:
            - name: uint
            - name: static_map
              static_map:
                1: read
                2: write
                3: sync
`

// perfRecord is a record of perfYAML's layout (op u32, 4 bytes of
// padding) followed by the kernel's alignment garbage.
func perfRecord(op uint32) []byte {
	b := make([]byte, 12)
	binary.NativeEndian.PutUint32(b, op)
	b[8] = 0xee
	return b
}

func perfSpec() *ebpf.MapSpec {
	return &ebpf.MapSpec{Name: "events_total", Type: ebpf.PerfEventArray}
}

// perfValues returns a family's series as label value → count.
func perfValues(f *Family) map[string]float64 {
	out := map[string]float64{}
	for i := range f.Len() {
		out[strings.Join(f.LabelValues(i), ",")] = f.Value(i)
	}
	return out
}

// TestPerfEventArrayCounts feeds records to a perf_event_array counter's
// table and checks the counts per label set: padding and trailing bytes
// ignored, a record too short dropped and counted, label sets over
// max_series (2) in the overflow series, lost records counted, and a
// flush empties the metric.
func TestPerfEventArrayCounts(t *testing.T) {
	c, _ := fixture(t, perfYAML, perfSpec())
	t.Cleanup(c.Close)
	m := c.metrics[0]
	if m.perf == nil || m.KeySize != 8 || m.Flush.Hours() != 1 {
		t.Fatalf("metric not a perf counter of 8-byte records flushed hourly: %+v", m.MetricPlan)
	}
	tb := m.perf
	for range 5 {
		tb.add(perfRecord(1), 0)
	}
	for range 3 {
		tb.add(perfRecord(2), 0)
	}
	tb.add(perfRecord(3), 0) // a third series: over max_series
	tb.add(perfRecord(9), 0) // "unknown:9", a fourth: over max_series too
	tb.add([]byte{1, 0, 0}, 0)
	tb.add(nil, 7)
	got := perfValues(c.Read().Families[0])
	want := map[string]float64{"read": 5, "write": 3, OverflowValue: 2}
	if len(got) != len(want) {
		t.Fatalf("series %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("series %s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
	if lost, short := tb.dropped(); lost != 7 || short != 1 {
		t.Errorf("dropped: lost %d, short %d; want 7 and 1", lost, short)
	}
	// Counts carry on across reads, until a flush.
	tb.add(perfRecord(1), 0)
	if got := perfValues(c.Read().Families[0]); got["read"] != 6 {
		t.Errorf("after one more record: read = %v, want 6", got["read"])
	}
	tb.flush()
	if f := c.Read().Families[0]; f.Len() != 0 {
		t.Errorf("after a flush: %d series, want none", f.Len())
	}
	tb.add(perfRecord(2), 0)
	if got := perfValues(c.Read().Families[0]); len(got) != 1 || got["write"] != 1 {
		t.Errorf("after a flush and one record: %v, want write 1", got)
	}
}

// TestPerfEventArrayTableFull checks that records beyond the table's
// distinct-record limit still count, in the overflow series.
func TestPerfEventArrayTableFull(t *testing.T) {
	y := strings.Replace(perfYAML, "      max_series: 2\n", "      max_series: 1\n", 1)
	y = strings.Replace(y, "            - name: static_map\n              static_map:\n                1: read\n                2: write\n                3: sync\n", "", 1)
	c, _ := fixture(t, y, perfSpec())
	t.Cleanup(c.Close)
	tb := c.metrics[0].perf
	if tb.limit != 2 {
		t.Fatalf("table limit %d, want 2 (twice max_series)", tb.limit)
	}
	for op := range uint32(10) {
		tb.add(perfRecord(op), 0)
	}
	got := perfValues(c.Read().Families[0])
	var sum float64
	for _, v := range got {
		sum += v
	}
	if sum != 10 || len(got) != 2 || got["0"] != 1 || got[OverflowValue] != 9 {
		t.Errorf("series %v: want 0 → 1 and 9 in the overflow series", got)
	}
}

// TestPerfEventArrayCompileErrors checks the errors of a perf_event_array
// counter whose map is not a perf event array, and of a perf event array
// read as a map.
func TestPerfEventArrayCompileErrors(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		spec       *ebpf.MapSpec
		want       string
	}{
		{"not a perf event array", perfYAML, &ebpf.MapSpec{Name: "events_total", Type: ebpf.Hash, KeySize: 8, ValueSize: 8, MaxEntries: 1},
			`test.yaml:5: metrics.counters[0].perf_event_array: map "events_total" has type Hash, but perf_event_array: true needs a perf event array (BPF_MAP_TYPE_PERF_EVENT_ARRAY)`},
		{"perf event array as a map", strings.Replace(perfYAML, "      perf_event_array: true\n      flush_interval: 1h\n", "", 1), perfSpec(),
			`test.yaml:3: metrics.counters[0].name: map "events_total" is a perf event array: set perf_event_array: true to count its records`},
		{"label without size", strings.Replace(perfYAML, "          size: 4\n          padding: 4\n", "", 1), perfSpec(),
			`metrics.counters[0].labels[0].size: must be 1 to 4096 bytes, got 0`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Parse("test.yaml", []byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			cs := &ebpf.CollectionSpec{Maps: map[string]*ebpf.MapSpec{tc.spec.Name: tc.spec}}
			_, err = Compile(cfg, cs, decoder.NewEnv(100))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %s", err, tc.want)
			}
		})
	}
}

// FuzzPerfRecord feeds arbitrary records (and lost counts) to a
// perf_event_array counter of perfYAML's layout, built without a kernel,
// and reads it: no panic, and the series count every record at least 8
// bytes long, no more.
func FuzzPerfRecord(f *testing.F) {
	f.Add(perfRecord(1), uint8(0), uint8(3))
	f.Add([]byte{}, uint8(5), uint8(1))
	f.Add(append(perfRecord(9), perfRecord(2)...), uint8(0), uint8(2))
	cfg, err := config.Parse("test.yaml", []byte(perfYAML))
	if err != nil {
		f.Fatal(err)
	}
	cs := &ebpf.CollectionSpec{Maps: map[string]*ebpf.MapSpec{"events_total": perfSpec()}}
	plan, err := Compile(cfg, cs, decoder.NewEnv(100))
	if err != nil {
		f.Fatal(err)
	}
	mp := plan.Metrics[0]
	f.Fuzz(func(t *testing.T, data []byte, lost, split uint8) {
		tb := &perfTable{keyLen: mp.KeySize, limit: perfKeys(mp.KeySize, 2), index: map[string]int{}}
		c := &Config{name: "test", base: time.Now(), clock: time.Now}
		c.metrics = []*metric{{MetricPlan: mp, rs: newReadState(mp, tb.limit, "test"), maxSeries: 2, ncpu: 1, cpuSize: 8, perf: tb}}
		c.reads = []mapRead{{reader: tb, n: 1}}
		c.counted = make([]int, 1)
		// data cut into records of split+1 bytes
		want := 0
		for n := int(split) + 1; len(data) > 0; data = data[min(n, len(data)):] {
			rec := data[:min(n, len(data))]
			tb.add(rec, 0)
			if len(rec) >= mp.KeySize {
				want++
			}
		}
		tb.add(nil, uint64(lost))
		var got float64
		fam := c.Read().Families[0]
		for i := range fam.Len() {
			got += fam.Value(i)
		}
		if got != float64(want) {
			t.Errorf("series sum %v, want %d records", got, want)
		}
		if l, _ := tb.dropped(); l != uint64(lost) {
			t.Errorf("lost %d, want %d", l, lost)
		}
	})
}

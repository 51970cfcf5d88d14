// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"strings"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/kernel-exporter/kernel_exporter/config"
)

// TestOverflowKeepsTotal fills a counter map with 100,000 keys, each its
// own series, under the default limit of 10,000 series: the read exports
// 10,000 series and the overflow series, and the sum over them equals the
// sum over the map. A histogram over its limit keeps its count and its
// per-bucket totals the same way.
func TestOverflowKeepsTotal(t *testing.T) {
	const n = 100_000
	c, maps := fixture(t, counterYAML, &ebpf.MapSpec{Name: "ops_total", Type: ebpf.Hash, KeySize: 8, ValueSize: 8, MaxEntries: n})
	keys := make([]uint64, n)
	vals := make([]uint64, n)
	var want float64
	for i := range keys {
		// op 1 (static_map "read"), dev i: a series per key.
		keys[i] = uint64(1) | uint64(i)<<32
		vals[i] = uint64(i%997 + 1)
		want += float64(vals[i])
	}
	if _, err := maps["ops_total"].BatchUpdate(keys, vals, nil); err != nil {
		t.Fatal(err)
	}
	for read := 1; read <= 2; read++ {
		f := c.Read().Families[0]
		if f.Len() != config.DefaultMaxSeries+1 {
			t.Fatalf("read %d: %d series, want %d and the overflow series", read, f.Len(), config.DefaultMaxSeries)
		}
		var got, over float64
		for i := 0; i < f.Len(); i++ {
			got += f.Value(i)
			if f.LabelValues(i)[0] == OverflowValue {
				over += f.Value(i)
			}
		}
		if got != want {
			t.Errorf("read %d: sum over the series %v, want the sum over the map %v", read, got, want)
		}
		if over == 0 {
			t.Errorf("read %d: no overflow series", read)
		}
	}
	if got, want := c.metrics[0].overflowed.Load(), uint64(2*(n-config.DefaultMaxSeries)); got != want {
		t.Errorf("overflow entries %d, want %d", got, want)
	}
}

// TestOverflowHistogram checks a histogram's overflow series: buckets,
// count and sum of the keys over the limit are summed.
func TestOverflowHistogram(t *testing.T) {
	y := histYAML("linear", "      bucket_max: 3\n      max_series: 1\n")
	c, maps := fixture(t, y, &ebpf.MapSpec{Name: "lat_seconds", Type: ebpf.Hash, KeySize: 8, ValueSize: 8, MaxEntries: 64})
	m := maps["lat_seconds"]
	// (op, bucket): op 1 first series, ops 2 and 3 overflow.
	for op := uint32(1); op <= 3; op++ {
		put(t, m, key(op, 0), 1)
		put(t, m, key(op, 2), 10)
	}
	f := c.Read().Families[0]
	if f.Len() != 2 {
		t.Fatalf("%d series, want 2", f.Len())
	}
	var count uint64
	var sawOverflow bool
	for i := 0; i < f.Len(); i++ {
		cum, n, _ := f.Histogram(i)
		count += n
		if f.LabelValues(i)[0] == OverflowValue {
			sawOverflow = true
			if n != 22 || cum[0] != 2 {
				t.Errorf("overflow series count %d, first bucket %d: want 22 and 2", n, cum[0])
			}
		}
	}
	if count != 33 || !sawOverflow {
		t.Errorf("count over the series %d (overflow series seen: %v), want 33", count, sawOverflow)
	}
}

// TestDefaultMaxSeriesFlag checks that Limits.MaxSeries (the
// --config.max-series flag) bounds a metric whose config sets no
// max_series, and that a metric's own max_series wins over it.
func TestDefaultMaxSeriesFlag(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want int // series, the overflow series included
	}{
		{counterYAML, 3},
		{strings.Replace(counterYAML, "      help: ops\n", "      help: ops\n      max_series: 4\n", 1), 5},
	} {
		c, maps := fixtureWith(t, Limits{MaxSeries: 2}, tc.yaml, &ebpf.MapSpec{Name: "ops_total", Type: ebpf.Hash, KeySize: 8, ValueSize: 8, MaxEntries: 64})
		for dev := uint32(0); dev < 6; dev++ {
			put(t, maps["ops_total"], key(1, dev), 1)
		}
		if got := c.Read().Families[0].Len(); got != tc.want {
			t.Errorf("%d series with --config.max-series=2, want %d", got, tc.want)
		}
	}
}

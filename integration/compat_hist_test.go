// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"math"
	"testing"
	"time"
)

// compatHistFD is the magic fd of compat_hist.bpf.c.
const compatHistFD = -4242

// TestCompatHistograms runs testdata/compat/compat_hist (a tracepoint/
// program; histograms of every bucket_type of ebpf_exporter v2, a label of
// 1 byte with 7 of padding decoded by uint and static_map) under
// --compat.ebpf-exporter, makes pread64 calls whose count argument is the
// observed value and whose pos argument is the kind, and checks each
// histogram as the reference prints it for the same slots:
//
//   - bounds: slot k × bucket_multiplier, with k from bucket_min to
//     bucket_max (exp2: 2^k, exp2zero: 0 then 2^(k-1), linear: k) or
//     the bucket_keys (fixed);
//   - the slot after the last bucket (bucket_max + 1, or the largest key
//   - 1) is the sum, also × bucket_multiplier;
//   - slots outside the buckets are left out (linear's slot 0, below
//     bucket_min 1): count and +Inf hold only the buckets' observations;
//   - a kind without a static_map entry is labelled "unknown:<n>".
func TestCompatHistograms(t *testing.T) {
	e := startCompat(t, "compat_hist")
	obs := []struct {
		kind   uint64
		values []uint64
	}{
		{1, []uint64{0, 1, 3, 5, 17, 100, 999, 5000}}, // read: sum 6125
		{2, []uint64{7, 7, 2000}},                     // write: sum 2014
		{9, []uint64{4}},                              // no static_map entry
	}
	n := 0
	onNamedThread(t, "ke_compat_hist", func() error {
		for _, o := range obs {
			for _, v := range o.values {
				if err := magicPread(compatHistFD, nil, v, o.kind); err != nil {
					return err
				}
				n++
			}
		}
		return nil
	})
	var ms Metrics
	Eventually(t, 5*time.Second, func() bool {
		ms = e.Scrape()
		c, _, _ := ms.Hist("ebpf_exporter_compat_exp2zero_bytes", nil, 0)
		return c >= uint64(n)
	}, "ebpf_exporter_compat_exp2zero_bytes did not count %d observations:\n%s", n, e.Scrape().seriesDump("ebpf_exporter_compat_exp2zero_bytes"))

	bounds := func(mult float64, slots ...float64) []float64 {
		out := make([]float64, len(slots))
		for i, k := range slots {
			out[i] = k * mult
		}
		return out
	}
	exp2 := make([]float64, 11)
	for k := range exp2 {
		exp2[k] = math.Exp2(float64(k))
	}
	read, write, unknown := L("kind", "read"), L("kind", "write"), L("kind", "unknown:9")
	for _, tc := range []struct {
		name  string
		le    []float64
		hists []compatHist
	}{
		// slot floor(log2 v), v = 0 in slot 0, at most 10; microseconds
		{"ebpf_exporter_compat_exp2_seconds", bounds(0.000001, exp2...), []compatHist{
			{labels: read, cum: []uint64{2, 3, 4, 4, 5, 5, 6, 6, 6, 7, 8}, count: 8, sum: 6125 * 0.000001},
			{labels: write, cum: []uint64{0, 0, 2, 2, 2, 2, 2, 2, 2, 2, 3}, count: 3, sum: 2014 * 0.000001},
			{labels: unknown, cum: []uint64{0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1}, count: 1, sum: 4 * 0.000001},
		}},
		// slot 0 for v = 0, else floor(log2 v) + 1, at most 6
		{"ebpf_exporter_compat_exp2zero_bytes", []float64{0, 1, 2, 4, 8, 16, 32}, []compatHist{
			{labels: read, cum: []uint64{1, 2, 3, 4, 4, 5, 8}, count: 8, sum: 6125},
			{labels: write, cum: []uint64{0, 0, 0, 2, 2, 2, 3}, count: 3, sum: 2014},
			{labels: unknown, cum: []uint64{0, 0, 0, 1, 1, 1, 1}, count: 1, sum: 4},
		}},
		// slot v, at most 5; bucket_min 1 leaves v = 0 out
		{"ebpf_exporter_compat_linear_items", []float64{1, 2, 3, 4, 5}, []compatHist{
			{labels: read, cum: []uint64{1, 1, 2, 2, 7}, count: 7, sum: 6125},
			{labels: write, cum: []uint64{0, 0, 0, 0, 3}, count: 3, sum: 2014},
			{labels: unknown, cum: []uint64{0, 0, 0, 1, 1}, count: 1, sum: 4},
		}},
		// slot: the first of 1, 10, 100, 1000 that is >= v, else 1000; milliseconds
		{"ebpf_exporter_compat_fixed_seconds", bounds(0.001, 1, 10, 100, 1000), []compatHist{
			{labels: read, cum: []uint64{2, 4, 6, 8}, count: 8, sum: 6125 * 0.001},
			{labels: write, cum: []uint64{0, 2, 2, 3}, count: 3, sum: 2014 * 0.001},
			{labels: unknown, cum: []uint64{0, 1, 1, 1}, count: 1, sum: 4 * 0.001},
		}},
	} {
		if s := ms.Series(tc.name, nil); s != len(tc.hists) {
			t.Errorf("%s: %d series, want %d:\n%s", tc.name, s, len(tc.hists), ms.seriesDump(tc.name))
		}
		for _, h := range tc.hists {
			h.le = tc.le
			checkHist(t, ms, tc.name, h)
		}
	}
	t.Logf("%d observations: exp2, exp2zero, linear and fixed histograms as the reference prints them", n)
}

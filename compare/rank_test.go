// SPDX-License-Identifier: Apache-2.0

package compare

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// synthFleet builds per-host increases over one hour: hosts base hosts
// with os="a", hosts new ones with os="b". Each host gets load
// 0.8 + 0.04 × its index; change(side, host, function) multiplies a
// counter's rate. The histogram kernel_lat_seconds has 100 events an hour
// per host in le 2^-12 .. 2^-8 (weights 1 4 6 4 1), shifted up by
// histShift buckets on the new hosts.
func synthFleet(hosts int, change func(side, host int, fn string) float64, histShift int) *fakeProm {
	f := &fakeProm{sides: map[string][]fakeSeries{}}
	for side, os := range []string{"a", "b"} {
		sel := fmt.Sprintf(`os=%q`, os)
		for h := 0; h < hosts; h++ {
			inst := fmt.Sprintf("%s-%03d", os, h)
			load := 0.8 + 0.04*float64(h%10)
			for _, fn := range []string{"alpha", "beta", "gamma", "delta"} {
				f.sides[sel] = append(f.sides[sel], fakeSeries{"kernel_calls_total",
					map[string]string{"instance": inst, "os": os, "function": fn}, 3600 * 10 * load * change(side, h, fn)})
			}
			shift := 0
			if side == 1 {
				shift = histShift
			}
			cum := 0.0
			for k := -14; k <= 0; k++ {
				if i := k + 12 - shift; i >= 0 && i < 5 {
					cum += 100 * load * []float64{1, 4, 6, 4, 1}[i] / 16
				}
				f.sides[sel] = append(f.sides[sel], fakeSeries{"kernel_lat_seconds_bucket",
					map[string]string{"instance": inst, "os": os, "le": fmt.Sprint(math.Ldexp(1, k))}, cum})
			}
			f.sides[sel] = append(f.sides[sel], fakeSeries{"kernel_lat_seconds_bucket",
				map[string]string{"instance": inst, "os": os, "le": "+Inf"}, cum})
		}
	}
	return f
}

func runSynth(t testing.TB, f *fakeProm, o Options) *Result {
	t.Helper()
	a, _ := ParseSelector(`{os="a"}`)
	b, _ := ParseSelector(`{os="b"}`)
	end := time.Unix(1735693200, 0)
	o.Client = ClientOptions{URL: "http://prometheus.invalid", Transport: f}
	o.Base = Side{Selector: a, Start: end.Add(-time.Hour), End: end}
	o.New = Side{Selector: b, Start: end.Add(-time.Hour), End: end}
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func rowOf(t *testing.T, res *Result, signal, kind string) (int, Row) {
	t.Helper()
	for i, r := range res.Rows {
		if r.Signal == signal && r.Kind == kind {
			return i, r
		}
	}
	t.Fatalf("no row %s (%s)", signal, kind)
	return 0, Row{}
}

func near(got, want float64) bool { return math.Abs(got/want-1) < 1e-6 }

// TestRankConsistentChangeFirst: a ×8 on every new host and a histogram
// two buckets up (×4) rank first with their factors; a ×100 on one new
// host and a ×100 on one base host rank below, with factor 1 (±5%).
func TestRankConsistentChangeFirst(t *testing.T) {
	f := synthFleet(10, func(side, host int, fn string) float64 {
		switch {
		case side == 1 && fn == "alpha":
			return 8
		case side == 1 && host == 4 && fn == "beta":
			return 100
		case side == 0 && host == 7 && fn == "gamma":
			return 100
		}
		return 1
	}, 2)
	res := runSynth(t, f, Options{})
	var out strings.Builder
	_ = Write(&out, res, FormatTable, 0)
	t.Logf("\n%s", out.String())

	i, r := rowOf(t, res, `kernel_calls_total{function="alpha"}`, KindCounter)
	if i != 0 || !near(float64(r.Factor), 8) || r.Agree != 10 || r.Delta != 1 || !near(r.Base, 9.8) || !near(r.New, 78.4) {
		t.Errorf("alpha: rank %d, factor %v, agree %d, delta %v, base %v, new %v; want 1, 8, 10, 1, 9.8/s, 78.4/s", i+1, r.Factor, r.Agree, r.Delta, r.Base, r.New)
	}
	i, r = rowOf(t, res, `kernel_lat_seconds`, KindHistogram)
	if i != 1 || !near(float64(r.Factor), 4) || r.Agree != 10 || r.Quantile != 0.5 {
		t.Errorf("histogram: rank %d, factor %v, agree %d, quantile %v; want 2, 4, 10, 0.5", i+1, r.Factor, r.Agree, r.Quantile)
	}
	if r.KS == nil || *r.KS < 0.6 || r.EMD == nil || *r.EMD <= 0 {
		t.Errorf("histogram: KS %v, EMD %v; want >= 0.6 and > 0", r.KS, r.EMD)
	}
	for qi := range Quantiles {
		if !near(float64(r.NewQuantiles[qi]/r.BaseQuantiles[qi]), 4) {
			t.Errorf("merged p%v: base %v, new %v, want x4", Quantiles[qi]*100, r.BaseQuantiles[qi], r.NewQuantiles[qi])
		}
	}
	for _, fn := range []string{"beta", "gamma"} {
		i, r := rowOf(t, res, `kernel_calls_total{function="`+fn+`"}`, KindCounter)
		// One host of ten moves the median by at most one rank: 4%.
		if i < 2 || math.Abs(float64(r.Factor)-1) > 0.05 || r.Score > 0.01 {
			t.Errorf("%s (single-host spike): rank %d, factor %v, score %v; want below 2, 1 ±5%%, <= 0.01", fn, i+1, r.Factor, r.Score)
		}
		wantAgree := 0
		if fn == "beta" {
			wantAgree = 1
		}
		if r.Agree != wantAgree {
			t.Errorf("%s: %d hosts agree, want %d", fn, r.Agree, wantAgree)
		}
	}
	_, r = rowOf(t, res, `kernel_lat_seconds_count`, KindEvents)
	if !near(float64(r.Factor), 1) || r.Score != 0 || !near(r.Base, 100*0.98/3600) {
		t.Errorf("histogram events: factor %v, score %v, base %v; want 1, 0, %v", r.Factor, r.Score, r.Base, 100*0.98/3600)
	}
}

// TestRankHalfTheHosts: a change on half the new hosts ranks below the
// same change on all of them, and says 5 hosts agree.
func TestRankHalfTheHosts(t *testing.T) {
	f := synthFleet(10, func(side, host int, fn string) float64 {
		switch {
		case side == 1 && fn == "alpha":
			return 8
		case side == 1 && fn == "beta" && host%2 == 0:
			return 8
		}
		return 1
	}, 0)
	res := runSynth(t, f, Options{})
	ia, a := rowOf(t, res, `kernel_calls_total{function="alpha"}`, KindCounter)
	ib, b := rowOf(t, res, `kernel_calls_total{function="beta"}`, KindCounter)
	if ia != 0 || ib != 1 || a.Agree != 10 || b.Agree != 5 || b.Score >= a.Score {
		t.Errorf("alpha rank %d agree %d score %v, beta rank %d agree %d score %v; want 1, 10, and 2, 5, lower", ia+1, a.Agree, a.Score, ib+1, b.Agree, b.Score)
	}
}

// TestRankTwoWindows: one selector over two windows of different length;
// rates are per second, so equal rates give factor 1, and a metric only
// the new window has gets factor +Inf.
func TestRankTwoWindows(t *testing.T) {
	sel, _ := ParseSelector(`{os="a"}`)
	f := &fakeProm{sides: map[string][]fakeSeries{}}
	// Both windows share the selector: the fake cannot tell them apart by
	// it, so it is given the same increases; the base window is twice as
	// long, so the base rate is half.
	for h := 0; h < 6; h++ {
		inst := fmt.Sprintf("h%d", h)
		f.sides[`os="a"`] = append(f.sides[`os="a"`], fakeSeries{"kernel_calls_total", map[string]string{"instance": inst, "os": "a"}, 7200 * float64(h+1)})
	}
	end := time.Unix(1735693200, 0)
	res, err := Run(context.Background(), Options{
		Client: ClientOptions{URL: "http://prometheus.invalid", Transport: f},
		Base:   Side{Selector: sel, Start: end.Add(-4 * time.Hour), End: end.Add(-2 * time.Hour)},
		New:    Side{Selector: sel, Start: end.Add(-time.Hour), End: end},
	})
	if err != nil {
		t.Fatal(err)
	}
	_, r := rowOf(t, res, `kernel_calls_total`, KindCounter)
	if !near(float64(r.Factor), 2) || !near(r.Base, 3.5) || !near(r.New, 7) || r.Delta < 0.5 {
		t.Errorf("factor %v, base %v, new %v, delta %v; want 2, 3.5/s, 7/s, > 0.5", r.Factor, r.Base, r.New, r.Delta)
	}
	if !strings.Contains(r.PromQL, `rate(kernel_calls_total{os="a"}[5m])`) || strings.Contains(r.PromQL, " or ") {
		t.Errorf("PromQL %q: want one query of the one selector", r.PromQL)
	}
}

// TestRankNewMetric: a counter only the new hosts have is ranked as new
// (factor +Inf, capped in the score), JSON says "+Inf".
func TestRankNewMetric(t *testing.T) {
	f := synthFleet(4, func(int, int, string) float64 { return 1 }, 0)
	for h := 0; h < 4; h++ {
		f.sides[`os="b"`] = append(f.sides[`os="b"`], fakeSeries{"kernel_oom_kills_total", map[string]string{"instance": fmt.Sprintf("b-%03d", h), "os": "b"}, 36})
	}
	res := runSynth(t, f, Options{})
	i, r := rowOf(t, res, `kernel_oom_kills_total`, KindCounter)
	if i != 0 || !math.IsInf(float64(r.Factor), 1) || r.BaseHosts != 4 || r.Base != 0 || !near(r.New, 0.01) || r.Score != MaxLog2Factor {
		t.Errorf("rank %d, factor %v, base hosts %d, base %v, new %v, score %v; want 1, +Inf, 4, 0, 0.01, %d", i+1, r.Factor, r.BaseHosts, r.Base, r.New, r.Score, MaxLog2Factor)
	}
	var out strings.Builder
	if err := Write(&out, res, FormatJSON, 1); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"factor": "+Inf"`) || strings.Count(out.String(), `"signal"`) != 1 {
		t.Errorf("JSON of the top row:\n%s", out.String())
	}
}

func TestMannWhitney(t *testing.T) {
	for _, c := range []struct {
		base, new   []float64
		delta, pMax float64
	}{
		{[]float64{1, 2, 3}, []float64{4, 5, 6}, 1, 0.1},
		{[]float64{4, 5, 6}, []float64{1, 2, 3}, -1, 0.1},
		{[]float64{1, 2, 3, 4}, []float64{1, 2, 3, 4}, 0, 1},
		{[]float64{1, 1, 1}, []float64{1, 1, 1}, 0, 1},
		{[]float64{1, 2}, []float64{2, 3}, 0.75, 1},
	} {
		d, p := mannWhitney(c.base, c.new)
		if math.Abs(d-c.delta) > 1e-9 || p > c.pMax || p < 0 || p > 1 {
			t.Errorf("mannWhitney(%v, %v) = %v, %v; want delta %v, p <= %v", c.base, c.new, d, p, c.delta, c.pMax)
		}
	}
	// 10 against 10, separated: p of the exact test is 1.08e-5; the normal
	// approximation gives about 1.8e-4.
	var a, b []float64
	for i := 0; i < 10; i++ {
		a, b = append(a, float64(i)), append(b, float64(i+10))
	}
	if _, p := mannWhitney(a, b); p > 3e-4 {
		t.Errorf("p = %v for two separated sets of 10, want < 3e-4", p)
	}
}

func TestQuantile(t *testing.T) {
	bs := []bucket{{1, 10}, {2, 30}, {4, 40}, {math.Inf(1), 40}}
	for _, c := range []struct{ q, want float64 }{{0.25, 1}, {0.5, 1.5}, {0.75, 2}, {0.875, 3}, {1, 4}} {
		if got := quantile(c.q, bs); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("quantile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
	if got := quantile(0.5, []bucket{{1, 0}, {math.Inf(1), 0}}); !math.IsNaN(got) {
		t.Errorf("quantile of nothing = %v, want NaN", got)
	}
	a := []bucket{{1, 10}, {2, 10}, {math.Inf(1), 10}}
	b := []bucket{{1, 0}, {2, 10}, {math.Inf(1), 10}}
	if ks, emd := distances(a, b); ks != 1 || emd != 1 {
		t.Errorf("distances = %v, %v; want 1, 1", ks, emd)
	}
	if ks, emd := distances(a, a); ks != 0 || emd != 0 {
		t.Errorf("distances of the same = %v, %v; want 0, 0", ks, emd)
	}
}

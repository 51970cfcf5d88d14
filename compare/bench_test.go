// SPDX-License-Identifier: Apache-2.0

package compare

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// benchFleet is 1000 hosts (500 per side) × 500 kernel series: 30
// counters of 10 label values and 10 histograms of 20 buckets. Every
// tenth counter is 3 times as high on the new side.
func benchFleet() *fakeProm {
	f := &fakeProm{sides: map[string][]fakeSeries{}}
	for side, os := range []string{"a", "b"} {
		sel := fmt.Sprintf(`os=%q`, os)
		for h := 0; h < 500; h++ {
			inst := fmt.Sprintf("%s-%04d.example.com:19435", os, h)
			load := 0.8 + 0.4*float64(h%17)/16
			for m := 0; m < 30; m++ {
				change := 1.0
				if side == 1 && m%10 == 0 {
					change = 3
				}
				for v := 0; v < 10; v++ {
					f.sides[sel] = append(f.sides[sel], fakeSeries{fmt.Sprintf("kernel_counter_%02d_total", m),
						map[string]string{"instance": inst, "os": os, "job": "kernel", "function": fmt.Sprintf("function_%d", v)}, 3600 * 100 * load * change})
				}
			}
			for m := 0; m < 10; m++ {
				cum := 0.0
				for k := 0; k < 20; k++ {
					le := "+Inf"
					if k < 19 {
						le = fmt.Sprint(math.Ldexp(1, k-20))
						cum += 1000 * load * math.Exp(-math.Pow(float64(k-9-side), 2)/4)
					}
					f.sides[sel] = append(f.sides[sel], fakeSeries{fmt.Sprintf("kernel_hist_%02d_seconds_bucket", m),
						map[string]string{"instance": inst, "os": os, "job": "kernel", "le": le}, math.Round(cum)})
				}
			}
		}
	}
	return f
}

// BenchmarkCompareFleet runs compare over 1000 hosts × 500 kernel series
// (500,000 series) answered by an in-process stand-in from canned JSON:
// the client's decoding and the ranking. It reports the peak heap in use
// (sampled every millisecond) as peak-heap-MB, and the process' CPU time
// (user and system, the garbage collector's included) as cpu-s/op, which
// other jobs on a shared machine stretch less than the wall time.
func BenchmarkCompareFleet(b *testing.B) {
	f := benchFleet()
	o := Options{MaxSeries: 1_000_000}
	res := runSynth(b, f, o) // fills the canned answers
	if len(res.Rows) != 30*10+2*10 || res.Series != 500_000 {
		b.Fatalf("%d rows, %d series; want 320 and 500000", len(res.Rows), res.Series)
	}
	if top := res.Rows[0]; math.Abs(float64(top.Factor)-3) > 1e-9 || top.Agree != 500 {
		b.Fatalf("top row %s: factor %v, %d agree; want 3 and 500", top.Signal, top.Factor, top.Agree)
	}
	f.sides = nil
	runtime.GC()
	var peak atomic.Uint64
	done := make(chan struct{})
	go func() {
		var ms runtime.MemStats
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				runtime.ReadMemStats(&ms)
				if ms.HeapInuse > peak.Load() {
					peak.Store(ms.HeapInuse)
				}
			}
		}
	}()
	cpu := func() time.Duration {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpu()
	for i := 0; i < b.N; i++ {
		res, err := Run(context.Background(), withFake(o, f))
		if err != nil || len(res.Rows) != 320 {
			b.Fatalf("%v, %d rows", err, len(res.Rows))
		}
	}
	b.StopTimer()
	b.ReportMetric((cpu()-cpu0).Seconds()/float64(b.N), "cpu-s/op")
	close(done)
	b.ReportMetric(float64(peak.Load())/(1<<20), "peak-heap-MB")
}

// withFake is o comparing os="a" with os="b" over the hour runSynth uses,
// answered by f.
func withFake(o Options, f *fakeProm) Options {
	a, _ := ParseSelector(`{os="a"}`)
	bs, _ := ParseSelector(`{os="b"}`)
	end := time.Unix(1735693200, 0)
	o.Client = ClientOptions{URL: "http://prometheus.invalid", Transport: f}
	o.Base = Side{Selector: a, Start: end.Add(-time.Hour), End: end}
	o.New = Side{Selector: bs, Start: end.Add(-time.Hour), End: end}
	return o
}

// SPDX-License-Identifier: Apache-2.0

package bpfstats

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"
)

// loadForeign loads n socket filters, each with its own hash map, as
// another agent's programs would be (closed at cleanup).
func loadForeign(b *testing.B, n int) {
	b.Helper()
	for i := 0; i < n; i++ {
		testObjects(b, fmt.Sprintf("ke_bench_%d", i), 64)
	}
}

// cpuTime is this process' user and system CPU time.
func cpuTime() time.Duration {
	var ru unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loop runs f b.N times and reports the process' CPU time per run
// (cpu-ns/op: user and system, the kernel's work for the system calls
// included), which a machine shared with other loads does not inflate as
// it does the wall time of ns/op.
func loop(b *testing.B, f func()) {
	c0 := cpuTime()
	for b.Loop() {
		f()
	}
	b.ReportMetric(float64(cpuTime()-c0)/float64(b.N), "cpu-ns/op")
}

// BenchmarkScrape reports the cost of one scrape of the host BPF collector
// with 100 and 1000 programs (and as many maps) loaded besides the host's
// own, listing in this process (as with --capabilities.keep=all; through
// the privileged helper, privsep's BenchmarkListBPF adds the round trip):
//
//   - list: one Enumerator.List (every program, map and link by id, and the
//     holders iterator);
//   - scrape: a Gather of a registry holding the collector, which lists
//     (Refresh 0: every scrape) and builds every series.
func BenchmarkScrape(b *testing.B) {
	needRoot(b)
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("programs=%d", n), func(b *testing.B) {
			loadForeign(b, n)
			e := NewEnumerator(Limits{})
			defer e.Close()
			l, err := e.List(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			b.Run("list", func(b *testing.B) {
				loop(b, func() {
					if _, err := e.List(context.Background()); err != nil {
						b.Fatal(err)
					}
				})
				b.ReportMetric(float64(len(l.Programs)), "programs")
			})
			b.Run("scrape", func(b *testing.B) {
				c := New(Options{Lister: e, Refresh: 1})
				reg := prometheus.NewRegistry()
				reg.MustRegister(c)
				series := 0
				loop(b, func() {
					fams, err := reg.Gather()
					if err != nil {
						b.Fatal(err)
					}
					series = 0
					for _, f := range fams {
						series += len(f.Metric)
					}
				})
				b.ReportMetric(float64(series), "series")
			})
			b.Run("encode+decode", func(b *testing.B) {
				loop(b, func() {
					enc, err := Encode(l)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := Decode(enc); err != nil {
						b.Fatal(err)
					}
				})
				enc, _ := Encode(l)
				b.ReportMetric(float64(len(enc)), "bytes")
			})
		})
	}
}

// SPDX-License-Identifier: Apache-2.0

package exposition

import (
	"io"
	"strconv"
	"testing"

	"github.com/prometheus/common/expfmt"

	"github.com/kernel-exporter/kernel_exporter/collector"
)

// benchSnapshot is one counter family of n series with two labels and
// integer values, as a large per-CPU, per-task map reads.
func benchSnapshot(n int) []*collector.Snapshot {
	data := make([]collector.SeriesData, n)
	for i := range data {
		data[i] = collector.SeriesData{
			Labels: []string{strconv.Itoa(i % 64), "task-" + strconv.Itoa(i)},
			Value:  float64(i * 37 % 100003),
		}
	}
	f := collector.NewFamily("bench_events_total", "Events.", collector.KindCounter, []string{"cpu", "comm"}, nil, data)
	return []*collector.Snapshot{{Config: "bench", Families: []*collector.Family{f}}}
}

func benchmarkWrite(b *testing.B, f expfmt.Format) {
	for _, n := range []struct {
		name string
		n    int
	}{{"100k", 100_000}, {"1M", 1_000_000}} {
		b.Run(n.name, func(b *testing.B) {
			snaps := benchSnapshot(n.n)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if err := Write(io.Discard, f, nil, snaps); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkWriteText(b *testing.B)        { benchmarkWrite(b, expfmt.FmtText) }
func BenchmarkWriteOpenMetrics(b *testing.B) { benchmarkWrite(b, expfmt.FmtOpenMetrics_1_0_0) }
func BenchmarkWriteProtobuf(b *testing.B)    { benchmarkWrite(b, fmtProtoDelim) }

// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"github.com/prometheus/client_golang/prometheus"
)

// asCollector serves a Config's reads as client_golang const metrics, so
// that tests can gather them with a registry and compare them with
// client_golang's own.
type asCollector struct{ c *Config }

func (a asCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range a.c.metrics {
		ch <- m.desc
	}
}

func (a asCollector) Collect(ch chan<- prometheus.Metric) {
	snap := a.c.Read()
	for j, f := range snap.Families {
		desc := a.c.metrics[j].desc
		if f.Err != nil {
			ch <- prometheus.NewInvalidMetric(desc, f.Err)
			continue
		}
		for i := 0; i < f.Len(); i++ {
			if f.Kind != KindHistogram {
				ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, f.Value(i), f.LabelValues(i)...)
				continue
			}
			cum, count, sum := f.Histogram(i)
			m := make(map[float64]uint64, len(cum))
			for k, c := range cum {
				m[f.Upper[k]] = c
			}
			ch <- prometheus.MustNewConstHistogram(desc, count, sum, m, f.LabelValues(i)...)
		}
	}
}

// Metric builds a Prometheus histogram from per-bucket (non-cumulative)
// counts, the total count (which includes observations above the last
// bucket) and the raw sum in bucket units.
func (b *Buckets) Metric(desc *prometheus.Desc, counts []uint64, count, sum uint64, labels []string) prometheus.Metric {
	cum := make(map[float64]uint64, len(counts))
	var run uint64
	for i, c := range counts {
		run += c
		cum[b.Upper[i]] = run
	}
	return prometheus.MustNewConstHistogram(desc, count, float64(sum)*b.Multiplier, cum, labels...)
}

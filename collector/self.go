// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Namespace of the exporter's own metrics.
const selfNamespace = "kernel_exporter"

var (
	scrapeDurationDesc = prometheus.NewDesc(selfNamespace+"_scrape_duration_seconds",
		"Time the last read of a config's maps took.", []string{"config"}, nil)
	entriesReadDesc = prometheus.NewDesc(selfNamespace+"_map_entries_read",
		"Map entries read by the last read of a config's maps.", []string{"config"}, nil)
	decoderErrorsDesc = prometheus.NewDesc(selfNamespace+"_decoder_errors_total",
		"Map keys dropped because a decoder failed on them, by the decoder that failed.", []string{"config", "metric", "decoder"}, nil)
	seriesOverflowDesc = prometheus.NewDesc(selfNamespace+"_series_overflow_entries_total",
		"Map entries whose series was over the metric's max_series, added to its overflow series (every label "+OverflowValue+"), summed over reads.", []string{"config", "metric"}, nil)
	seriesExpiredDesc = prometheus.NewDesc(selfNamespace+"_series_expired_total",
		"Series (label sets) whose map keys were all idle for the metric's ttl and were deleted from the map; only metrics with a ttl have it.", []string{"config", "metric"}, nil)
	perfDroppedDesc = prometheus.NewDesc(selfNamespace+"_perf_event_array_dropped_total",
		"Records of a perf_event_array counter not counted: reason lost, the kernel found the CPU's ring buffer full; short, the record was shorter than the metric's labels.", []string{"config", "metric", "reason"}, nil)
)

// collectSelf sends the config's scrape self-metrics. Decoder errors have
// one series per metric and decoder name of its label chains, from 0. The Status collector
// calls it, so that these descriptors are registered once for all configs.
func (c *Config) collectSelf(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(scrapeDurationDesc, prometheus.GaugeValue,
		time.Duration(c.lastDuration.Load()).Seconds(), c.name)
	ch <- prometheus.MustNewConstMetric(entriesReadDesc, prometheus.GaugeValue,
		float64(c.lastEntries.Load()), c.name)
	for _, m := range c.metrics {
		for _, d := range m.rs.decErrs {
			ch <- prometheus.MustNewConstMetric(decoderErrorsDesc, prometheus.CounterValue,
				float64(d.n.Load()), c.name, m.Name, d.decoder)
		}
		ch <- prometheus.MustNewConstMetric(seriesOverflowDesc, prometheus.CounterValue,
			float64(m.overflowed.Load()), c.name, m.Name)
		if m.perf != nil {
			lost, short := m.perf.dropped()
			ch <- prometheus.MustNewConstMetric(perfDroppedDesc, prometheus.CounterValue, float64(lost), c.name, m.Name, "lost")
			ch <- prometheus.MustNewConstMetric(perfDroppedDesc, prometheus.CounterValue, float64(short), c.name, m.Name, "short")
		}
		if m.exp != nil {
			ch <- prometheus.MustNewConstMetric(seriesExpiredDesc, prometheus.CounterValue,
				float64(m.expired.Load()), c.name, m.Name)
		}
	}
	c.collectMapHealth(ch) // maphealth.go
	if c.drops != nil {
		c.drops.collect(ch, c.name) // drops.go
	}
}

// LastRead returns what the last completed read of the config's maps
// served, without reading them: its series (label sets, summed over the
// config's metrics; a histogram's label set counts once, whatever its
// buckets) and how long it took (kernel_exporter_scrape_duration_seconds).
// ok is false before the first read ends.
func (c *Config) LastRead() (series int, took time.Duration, ok bool) {
	n := c.lastSeries.Load()
	if n < 0 {
		return 0, 0, false
	}
	return int(n), time.Duration(c.lastDuration.Load()), true
}

// LimitHits returns the metrics whose last read went over max_series, each
// as "<metric> (max_series <n>)".
func (c *Config) LimitHits() []string {
	var names []string
	for _, m := range c.metrics {
		if m.limitHit.Load() {
			names = append(names, fmt.Sprintf("%s (max_series %d)", m.Name, m.maxSeries))
		}
	}
	return names
}

// overflowLog logs, once per metric, that it went over its series limit.
// A variable for tests.
var overflowLog = func(config, metric string, limit int) {
	slog.Warn("metric over its series limit: further series are summed into one overflow series",
		"config", config, "metric", metric, "max_series", limit, "overflow_label_value", OverflowValue)
}

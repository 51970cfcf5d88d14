// SPDX-License-Identifier: Apache-2.0

// Package exposition writes the Prometheus exposition formats straight from
// collector Snapshots.
//
// The model is one read path and several writers: a read of a config's maps
// produces an immutable collector.Snapshot (families of series held in a few
// slabs), and each writer here iterates its families and appends the bytes
// of one format into a reused buffer that is flushed to the destination
// every 32 KiB. No writer builds a dto.Metric or any other object per
// series, nor the whole response in memory: a scrape costs a bounded buffer
// and a constant number of allocations per family, whatever the number of
// series.
//
// Three formats are written (see Negotiate):
//
//   - the text format 0.0.4, byte for byte as expfmt.MetricFamilyToText
//     writes the same families;
//   - OpenMetrics 1.0.0, as expfmt.MetricFamilyToOpenMetrics writes them,
//     ended by a single "# EOF";
//   - delimited protobuf (io.prometheus.client.MetricFamily messages, each
//     preceded by its varint length), hand-encoded: a size pass over a
//     family's series, then a write pass, so that a family of a million
//     series is one message. Histograms whose bounds have a native layout
//     (collector.NativeLayout) carry the native fields besides their
//     classic buckets.
//
// The exporter's own metrics, gathered from a client_golang registry as
// dto.MetricFamily, are written first with expfmt's encoders.
//
// Metric and label names are assumed to be valid in the legacy Prometheus
// scheme (config validation ensures it). Label values are any strings:
// they are escaped as each format requires, and invalid UTF-8 is replaced
// by U+FFFD so that the output is always a valid exposition.
//
// Compress wraps the destination in a pooled zstd or gzip encoder chosen
// from the request's Accept-Encoding.
package exposition

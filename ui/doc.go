// SPDX-License-Identifier: Apache-2.0

// Package ui serves the live page at /ui/: for every histogram metric a
// heatmap of the last ten minutes at one-second resolution, its current
// distribution and p50, p99 and p99.9; for every counter metric its top
// label sets by rate, each with a sparkline; under each config's name, its
// self-audit (package audit) as the landing page shows it, given by
// Sampler.SetAudit and sent whole with every poll. The page is HTML, CSS and
// JavaScript embedded in the binary (assets/); it draws on <canvas> itself
// and fetches nothing but /ui/data from the exporter.
//
// The model is a sampler that runs only while someone looks. Every request
// of /ui/data marks the page as open and starts the sampler if it is
// stopped; the sampler then reads every config once a second through
// collector.Status.Read (the same immutable snapshots the exposition
// writes, and a read shared with any scrape in flight) and stops itself,
// dropping its ring, once no page has polled for IdleStop. A closed page
// costs nothing: no timer, no read, no ring.
//
// Each tick turns the cumulative snapshot into per-interval deltas, kept
// in a ring of RingLen samples indexed by sequence number (slot = seq mod
// RingLen):
//
//   - a histogram metric keeps, per sample, the count of each bucket
//     (+Inf included) that arrived during the interval, summed over its
//     label sets (uint32 each), and the p50, p99 and p99.9 of that sample
//     (float32 each);
//   - a counter metric keeps the rate of each label set over the interval,
//     but only for the series that were in its top TopN by rate recently:
//     at most MaxTracked series per metric, each a ring of RingLen float32
//     rates. A series that leaves the top TopN is kept until it is the
//     least recently in it at the cap, or until it has not been in it for
//     RingLen samples.
//
// To compute deltas the sampler remembers the previous cumulative value of
// every series it read (bounded by each config's max_series): a series
// whose value went down was reset (its delta is its new value), a series
// new to a known metric counts whole (it appeared during the interval),
// and a metric seen for the first time only sets the baseline.
//
// Quantiles are interpolated linearly within their bucket, as PromQL's
// histogram_quantile does: bucket i spans (Upper[i-1], Upper[i]] (the first
// from 0), and a rank that falls in the +Inf bucket gives the last finite
// bound.
//
// Memory: the ring holds, for each histogram metric of B bounds,
// RingLen*(4*(B+1)+12) bytes, and for each counter metric at most
// MaxTracked*RingLen*4 bytes of rates plus their label values; Sampler.Size
// reports the total, previous values included.
package ui

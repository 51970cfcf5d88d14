// SPDX-License-Identifier: Apache-2.0

package otlp

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// Split cuts metrics into requests whose estimated encoded size is at most
// max bytes each, in order; a metric whose points do not fit in what is
// left of a request continues in the next one (its name, description and
// kind repeated). A single point larger than max goes alone. The estimate
// is an upper bound of OTLP's protobuf encoding: 16 bytes per bucket
// count or bound, the attributes' key and value bytes plus 8 each, and 64
// per point and per metric.
func Split(ms []metricdata.Metrics, max int) [][]metricdata.Metrics {
	b := splitter{max: max}
	for _, m := range ms {
		head := 64 + len(m.Name) + len(m.Description) + len(m.Unit)
		switch d := m.Data.(type) {
		case metricdata.Sum[float64]:
			splitPoints(&b, m, head, d.DataPoints, numberSize, func(pts []metricdata.DataPoint[float64]) metricdata.Aggregation {
				d.DataPoints = pts
				return d
			})
		case metricdata.Gauge[float64]:
			splitPoints(&b, m, head, d.DataPoints, numberSize, func(pts []metricdata.DataPoint[float64]) metricdata.Aggregation {
				d.DataPoints = pts
				return d
			})
		case metricdata.Histogram[float64]:
			splitPoints(&b, m, head, d.DataPoints,
				func(p *metricdata.HistogramDataPoint[float64]) int {
					return attrSize(p.Attributes) + 16*(len(p.Bounds)+len(p.BucketCounts))
				},
				func(pts []metricdata.HistogramDataPoint[float64]) metricdata.Aggregation {
					d.DataPoints = pts
					return d
				})
		case metricdata.ExponentialHistogram[float64]:
			splitPoints(&b, m, head, d.DataPoints,
				func(p *metricdata.ExponentialHistogramDataPoint[float64]) int {
					return attrSize(p.Attributes) + 16*(len(p.PositiveBucket.Counts)+len(p.NegativeBucket.Counts))
				},
				func(pts []metricdata.ExponentialHistogramDataPoint[float64]) metricdata.Aggregation {
					d.DataPoints = pts
					return d
				})
		case metricdata.Summary:
			splitPoints(&b, m, head, d.DataPoints,
				func(p *metricdata.SummaryDataPoint) int { return attrSize(p.Attributes) + 16*len(p.QuantileValues) },
				func(pts []metricdata.SummaryDataPoint) metricdata.Aggregation {
					d.DataPoints = pts
					return d
				})
		default:
			b.add(m, head)
		}
	}
	b.flush()
	return b.out
}

type splitter struct {
	max  int
	cur  []metricdata.Metrics
	size int
	out  [][]metricdata.Metrics
}

func (b *splitter) flush() {
	if len(b.cur) > 0 {
		b.out = append(b.out, b.cur)
	}
	b.cur, b.size = nil, 0
}

// add appends m, of size n, to the request being built.
func (b *splitter) add(m metricdata.Metrics, n int) {
	b.cur = append(b.cur, m)
	b.size += n
}

// splitPoints adds metric m (whose header is head bytes) with points pts,
// cut where a request is full; with rebuilds m's data from a run of pts.
func splitPoints[P any](b *splitter, m metricdata.Metrics, head int, pts []P, size func(*P) int, with func([]P) metricdata.Aggregation) {
	lo, n := 0, head
	for i := range pts {
		s := 64 + size(&pts[i])
		if b.size+n+s > b.max && (b.size > 0 || i > lo) {
			if i > lo {
				part := m
				part.Data = with(pts[lo:i:i])
				b.add(part, n)
			}
			b.flush()
			lo, n = i, head
		}
		n += s
	}
	if lo < len(pts) || len(pts) == 0 {
		part := m
		part.Data = with(pts[lo:])
		b.add(part, n)
	}
}

// numberSize estimates the encoded size of a counter or gauge point's
// attributes (its value and times are in splitPoints' 64 bytes).
func numberSize(p *metricdata.DataPoint[float64]) int { return attrSize(p.Attributes) }

// attrSize estimates the encoded size of an attribute set.
func attrSize(s attribute.Set) int {
	n := 0
	for it := s.Iter(); it.Next(); {
		kv := it.Attribute()
		n += 8 + len(kv.Key) + len(kv.Value.Emit())
	}
	return n
}

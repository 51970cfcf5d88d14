// SPDX-License-Identifier: Apache-2.0

package otlp

import (
	"math"
	"time"

	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/kernel-exporter/kernel_exporter/collector"
)

// ExpLayout is how a histogram's classic buckets map exactly onto an OTLP
// exponential histogram of scale 0, whose positive bucket of index i
// counts the observations in (2^i, 2^(i+1)].
//
// The mapping is exact when every bound (after the first, if it is 0) is
// a power of two and each is twice the one before: exp2 and exp2zero
// histograms whose bucket_multiplier is a power of two (1, 2^-10, 1024),
// and any other bounds that happen to be so. The Prometheus bucket
// le=2^k then counts (2^(k-1), 2^k], positive index k-1. Two edges are
// carried over as Prometheus carries them:
//
//   - a first bound of 0 (exp2zero with bucket_min 0) is the zero bucket:
//     its count is the zero count, with zero threshold 0;
//   - otherwise the first bucket, le=2^k0, also holds what lies below
//     2^(k0-1) (a value 0 of exp2's slot 0, say), as the Prometheus
//     bucket does: it is positive index k0-1 all the same.
//
// Observations above the last bound (slots past bucket_max, which
// Prometheus counts in +Inf only) go to the positive bucket after the
// last, so that the buckets add up to the count, as in the native
// histograms of the protobuf exposition (collector.NativeLayout).
type ExpLayout struct {
	// Zero is set when bucket 0 (le=0) is the zero bucket.
	Zero bool
	// Offset is the positive index of the first bucket that is not the
	// zero bucket; the others follow it, one index each.
	Offset int32
}

// ExponentialLayout returns the exact scale-0 layout of bucket bounds
// upper (strictly increasing, in the metric's unit), or false when there
// is none (linear, fixed, exp2 with a multiplier such as 1e-6): such
// histograms are sent with explicit bounds.
func ExponentialLayout(upper []float64) (ExpLayout, bool) {
	var l ExpLayout
	pos := upper
	if len(pos) > 0 && pos[0] == 0 {
		l.Zero = true
		pos = pos[1:]
	}
	if len(pos) == 0 {
		return l, false
	}
	for i, u := range pos {
		frac, exp := math.Frexp(u) // u = frac · 2^exp
		if frac != 0.5 || math.IsInf(u, 0) {
			return l, false
		}
		if i == 0 {
			// u = 2^(exp-1): index exp-2 counts (2^(exp-2), 2^(exp-1)].
			l.Offset = int32(exp - 2)
		} else if u != 2*pos[i-1] {
			return l, false
		}
	}
	return l, true
}

// converter turns snapshots and gathered families into OTLP metrics. Its
// times are set per push.
type converter struct {
	now time.Time
	// procStart is the start time of the exporter's own counters and
	// histograms that carry no created timestamp.
	procStart time.Time
}

// family converts f, read into snapshot snap, or returns false when it
// has nothing to send (its read failed). Counters become cumulative
// monotonic sums, gauges gauges, histograms exponential histograms when
// their bounds have an ExpLayout and explicit-bound histograms otherwise;
// all cumulative from the config's load (Snapshot.Start). Label values
// become string attributes; an empty value is left out, as Prometheus
// treats a label with an empty value as absent.
func (c *converter) family(snap *collector.Snapshot, f *collector.Family) (metricdata.Metrics, bool) {
	if f.Err != nil {
		return metricdata.Metrics{}, false
	}
	m := metricdata.Metrics{Name: f.Name, Description: f.Help}
	start, now := snap.Start, snap.Time
	if now.IsZero() {
		now = c.now
	}
	if start.IsZero() || start.After(now) {
		start = now
	}
	keys := make([]attribute.Key, len(f.LabelNames))
	for i, n := range f.LabelNames {
		keys[i] = attribute.Key(n)
	}
	kv := make([]attribute.KeyValue, 0, len(keys))
	values := make([]string, 0, len(keys))
	attrs := func(i int) attribute.Set {
		kv = kv[:0]
		values = f.AppendLabelValues(values[:0], i)
		for j, v := range values {
			if v != "" {
				kv = append(kv, keys[j].String(v))
			}
		}
		return attribute.NewSet(kv...)
	}
	n := f.Len()
	switch f.Kind {
	case collector.KindCounter, collector.KindGauge:
		pts := make([]metricdata.DataPoint[float64], n)
		for i := range pts {
			pts[i] = metricdata.DataPoint[float64]{Attributes: attrs(i), StartTime: start, Time: now, Value: f.Value(i)}
		}
		if f.Kind == collector.KindGauge {
			for i := range pts {
				pts[i].StartTime = time.Time{}
			}
			m.Data = metricdata.Gauge[float64]{DataPoints: pts}
		} else {
			m.Data = metricdata.Sum[float64]{DataPoints: pts, Temporality: metricdata.CumulativeTemporality, IsMonotonic: true}
		}
	case collector.KindHistogram:
		nb := len(f.Upper)
		if l, ok := ExponentialLayout(f.Upper); ok {
			pts := make([]metricdata.ExponentialHistogramDataPoint[float64], n)
			npos := nb + 1 // the positive buckets and the one above the last bound
			if l.Zero {
				npos--
			}
			slab := make([]uint64, n*npos)
			for i := range pts {
				cum, count, sum := f.Histogram(i)
				p := &pts[i]
				*p = metricdata.ExponentialHistogramDataPoint[float64]{Attributes: attrs(i), StartTime: start, Time: now, Count: count, Sum: sum}
				counts := slab[i*npos : (i+1)*npos : (i+1)*npos]
				b := cum
				if l.Zero {
					p.ZeroCount = cum[0]
				}
				prev := uint64(0)
				for j, c := range b {
					if l.Zero && j == 0 {
						prev = c
						continue
					}
					counts[j-(nb+1-npos)] = sub(c, prev)
					prev = c
				}
				counts[npos-1] = sub(count, prev)
				// Trailing empty buckets are implicit; the one above the
				// last bound is almost always empty.
				end := npos
				for end > 0 && counts[end-1] == 0 {
					end--
				}
				p.PositiveBucket = metricdata.ExponentialBucket{Offset: l.Offset, Counts: counts[:end:end]}
			}
			m.Data = metricdata.ExponentialHistogram[float64]{DataPoints: pts, Temporality: metricdata.CumulativeTemporality}
			break
		}
		pts := make([]metricdata.HistogramDataPoint[float64], n)
		slab := make([]uint64, n*(nb+1))
		for i := range pts {
			cum, count, sum := f.Histogram(i)
			counts := slab[i*(nb+1) : (i+1)*(nb+1) : (i+1)*(nb+1)]
			prev := uint64(0)
			for j, c := range cum {
				counts[j] = sub(c, prev)
				prev = c
			}
			counts[nb] = sub(count, prev)
			pts[i] = metricdata.HistogramDataPoint[float64]{Attributes: attrs(i), StartTime: start, Time: now,
				Count: count, Sum: sum, Bounds: f.Upper, BucketCounts: counts}
		}
		m.Data = metricdata.Histogram[float64]{DataPoints: pts, Temporality: metricdata.CumulativeTemporality}
	default:
		return metricdata.Metrics{}, false
	}
	return m, true
}

// sub is a - b, or 0 when b > a (a cumulative count never decreases, but
// a bucket count is never negative whatever the input).
func sub(a, b uint64) uint64 {
	if b > a {
		return 0
	}
	return a - b
}

// gathered converts a family gathered from the exporter's own registry
// (kernel_exporter_*, process_*, go_*): counters become cumulative
// monotonic sums that start at their created timestamp, or at the
// exporter's start; gauges and untyped metrics gauges; classic histograms
// explicit-bound histograms; summaries summaries. Anything else (gauge
// histograms) is left out.
func (c *converter) gathered(mf *dto.MetricFamily) (metricdata.Metrics, bool) {
	m := metricdata.Metrics{Name: mf.GetName(), Description: mf.GetHelp()}
	start := func(ts *timestamppb.Timestamp) time.Time {
		if ts != nil {
			if t := ts.AsTime(); t.Unix() > 0 && !t.After(c.now) {
				return t
			}
		}
		return c.procStart
	}
	attrs := func(lp []*dto.LabelPair) attribute.Set {
		kv := make([]attribute.KeyValue, 0, len(lp))
		for _, p := range lp {
			if p.GetValue() != "" {
				kv = append(kv, attribute.String(p.GetName(), p.GetValue()))
			}
		}
		return attribute.NewSet(kv...)
	}
	switch mf.GetType() {
	case dto.MetricType_COUNTER:
		var pts []metricdata.DataPoint[float64]
		for _, x := range mf.Metric {
			pts = append(pts, metricdata.DataPoint[float64]{Attributes: attrs(x.Label),
				StartTime: start(x.GetCounter().GetCreatedTimestamp()), Time: c.now, Value: x.GetCounter().GetValue()})
		}
		m.Data = metricdata.Sum[float64]{DataPoints: pts, Temporality: metricdata.CumulativeTemporality, IsMonotonic: true}
	case dto.MetricType_GAUGE, dto.MetricType_UNTYPED:
		var pts []metricdata.DataPoint[float64]
		for _, x := range mf.Metric {
			v := x.GetGauge().GetValue()
			if mf.GetType() == dto.MetricType_UNTYPED {
				v = x.GetUntyped().GetValue()
			}
			pts = append(pts, metricdata.DataPoint[float64]{Attributes: attrs(x.Label), Time: c.now, Value: v})
		}
		m.Data = metricdata.Gauge[float64]{DataPoints: pts}
	case dto.MetricType_HISTOGRAM:
		var pts []metricdata.HistogramDataPoint[float64]
		for _, x := range mf.Metric {
			h := x.GetHistogram()
			var bounds []float64
			var counts []uint64
			prev := uint64(0)
			for _, b := range h.Bucket {
				if math.IsInf(b.GetUpperBound(), +1) {
					continue // the +Inf bucket is the last count below
				}
				bounds = append(bounds, b.GetUpperBound())
				counts = append(counts, sub(b.GetCumulativeCount(), prev))
				prev = b.GetCumulativeCount()
			}
			counts = append(counts, sub(h.GetSampleCount(), prev))
			pts = append(pts, metricdata.HistogramDataPoint[float64]{Attributes: attrs(x.Label),
				StartTime: start(h.GetCreatedTimestamp()), Time: c.now, Count: h.GetSampleCount(), Sum: h.GetSampleSum(),
				Bounds: bounds, BucketCounts: counts})
		}
		m.Data = metricdata.Histogram[float64]{DataPoints: pts, Temporality: metricdata.CumulativeTemporality}
	case dto.MetricType_SUMMARY:
		var pts []metricdata.SummaryDataPoint
		for _, x := range mf.Metric {
			s := x.GetSummary()
			qs := make([]metricdata.QuantileValue, 0, len(s.Quantile))
			for _, q := range s.Quantile {
				qs = append(qs, metricdata.QuantileValue{Quantile: q.GetQuantile(), Value: q.GetValue()})
			}
			pts = append(pts, metricdata.SummaryDataPoint{Attributes: attrs(x.Label),
				StartTime: start(s.GetCreatedTimestamp()), Time: c.now, Count: s.GetSampleCount(), Sum: s.GetSampleSum(), QuantileValues: qs})
		}
		m.Data = metricdata.Summary{DataPoints: pts}
	default:
		return metricdata.Metrics{}, false
	}
	return m, true
}

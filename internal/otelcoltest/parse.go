// SPDX-License-Identifier: Apache-2.0

package otelcoltest

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// Data is what the collector received, in arrival order.
type Data struct {
	Spans   []Span
	Metrics []Metric
}

// Scope is an instrumentation scope.
type Scope struct {
	Name, Version string
}

// Span is one received span. Ids are lower-case hex as the debug exporter
// prints them; ParentID is "" for a root span.
type Span struct {
	Resource   map[string]string // resource attributes (service.name ...)
	Scope      Scope
	TraceID    string // 32 hex digits
	ParentID   string // 16 hex digits, or ""
	SpanID     string // 16 hex digits
	Name       string
	Kind       string // Internal, Server, Client ...
	Start, End time.Time
	StatusCode string // Unset, Ok, Error
	Attributes map[string]string
}

// Duration is End - Start.
func (s Span) Duration() time.Duration { return s.End.Sub(s.Start) }

// Metric is one received metric of one resource and scope, with its data
// points.
type Metric struct {
	Resource    map[string]string
	Scope       Scope
	Name        string
	Description string
	Unit        string
	// Type is the debug exporter's DataType: Gauge, Sum, Histogram,
	// ExponentialHistogram or Summary.
	Type string
	// IsMonotonic is set for a monotonic Sum.
	IsMonotonic bool
	// Temporality is Cumulative or Delta (Sum and the histograms).
	Temporality string
	Points      []Point
}

// Point is one data point. Which fields are set depends on the metric's
// Type: Value for Gauge and Sum; Count, Sum (HasSum), Min/Max, Bounds and
// BucketCounts for Histogram; Count, Sum, Scale, ZeroCount, Positive/
// NegativeOffset and Positive/NegativeBuckets for ExponentialHistogram;
// Count, Sum and Quantiles for Summary.
type Point struct {
	Attributes   map[string]string
	Start, Time  time.Time
	Value        float64
	Count        uint64
	Sum          float64
	HasSum       bool
	Min, Max     *float64
	Bounds       []float64 // explicit bucket upper bounds
	BucketCounts []uint64  // len(Bounds)+1 counts, not cumulative
	// Exponential histogram: Scale, ZeroCount, and the offset (index of
	// the first bucket) and counts of each range. The debug exporter
	// prints bucket bounds, not the scale and offsets; Parse recovers them
	// as the only (scale, offset) whose bounds print exactly as received.
	Scale           int32
	ZeroCount       uint64
	PositiveOffset  int32
	PositiveBuckets []uint64
	NegativeOffset  int32
	NegativeBuckets []uint64
	Quantiles       map[float64]float64 // Summary: quantile -> value

	posBounds, negBounds [][2]string // the printed bounds, for the scale
}

// SpansNamed returns the spans named name.
func (d *Data) SpansNamed(name string) []Span {
	var out []Span
	for _, s := range d.Spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// Metric returns the last metric named name received, or nil.
func (d *Data) Metric(name string) *Metric {
	for i := len(d.Metrics) - 1; i >= 0; i-- {
		if d.Metrics[i].Name == name {
			return &d.Metrics[i]
		}
	}
	return nil
}

// section is what attribute lines ("     -> k: T(v)") belong to.
type section int

const (
	secNone section = iota
	secResource
	secScope
	secSpan
	secPoint
	secDescriptor
	secIgnore // events, links, exemplars, entity refs, metadata
)

// maxLine bounds one line of debug output.
const maxLine = 1 << 20

// Parse reads the debug exporter's detailed output (verbosity: detailed,
// use_internal_logger: false) of traces and metrics; other lines, logs
// and profiles are skipped. An error names the line number and what is
// wrong with it.
func Parse(r io.Reader) (*Data, error) {
	p := &parser{d: &Data{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	n := 0
	for sc.Scan() {
		n++
		if err := p.line(sc.Text()); err != nil {
			return p.d, fmt.Errorf("otelcoltest: debug output line %d: %w", n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return p.d, fmt.Errorf("otelcoltest: debug output: %w", err)
	}
	if err := p.finishMetric(); err != nil {
		return p.d, fmt.Errorf("otelcoltest: debug output: %w", err)
	}
	return p.d, nil
}

type parser struct {
	d        *Data
	resource map[string]string
	scope    Scope
	sec      section
	span     *Span
	metric   *Metric
	point    *Point
}

func (p *parser) line(l string) error {
	switch {
	case strings.HasPrefix(l, "ResourceSpans #"), strings.HasPrefix(l, "ResourceMetrics #"),
		strings.HasPrefix(l, "ResourceLog #"), strings.HasPrefix(l, "ResourceLogs #"),
		strings.HasPrefix(l, "ResourceProfiles #"):
		if err := p.finishMetric(); err != nil {
			return err
		}
		p.resource = map[string]string{}
		p.scope = Scope{}
		p.span = nil
		p.sec = secNone
		if !strings.HasPrefix(l, "ResourceSpans") && !strings.HasPrefix(l, "ResourceMetrics") {
			p.sec = secIgnore
			p.resource = nil
		}
		return nil
	case p.resource == nil:
		return nil // not in a span or metric resource
	case l == "Resource attributes:":
		p.sec = secResource
		return nil
	case strings.HasPrefix(l, "ScopeSpans #"), strings.HasPrefix(l, "ScopeMetrics #"):
		if err := p.finishMetric(); err != nil {
			return err
		}
		p.scope = Scope{}
		p.span = nil
		p.sec = secNone
		return nil
	case strings.HasPrefix(l, "InstrumentationScope attributes:"):
		p.sec = secScope
		return nil
	case strings.HasPrefix(l, "InstrumentationScope "):
		rest := strings.TrimPrefix(l, "InstrumentationScope ")
		if i := strings.LastIndexByte(rest, ' '); i >= 0 {
			p.scope = Scope{Name: rest[:i], Version: rest[i+1:]}
		} else {
			p.scope = Scope{Name: rest}
		}
		return nil
	case strings.HasPrefix(l, "Span #"):
		p.d.Spans = append(p.d.Spans, Span{Resource: p.resource, Scope: p.scope, Attributes: map[string]string{}})
		p.span = &p.d.Spans[len(p.d.Spans)-1]
		p.sec = secSpan
		return nil
	case strings.HasPrefix(l, "Metric #"):
		if err := p.finishMetric(); err != nil {
			return err
		}
		p.metric = &Metric{Resource: p.resource, Scope: p.scope}
		p.sec = secDescriptor
		return nil
	case l == "Attributes:" && p.span != nil, l == "Data point attributes:" && p.point != nil:
		// The span's or point's own attributes.
		if p.span != nil {
			p.sec = secSpan
		} else {
			p.sec = secPoint
		}
		return nil
	case l == "Events:", l == "Links:", l == "Exemplars:", l == "Resource entity refs:", l == "     -> Metadata:":
		p.sec = secIgnore
		return nil
	case strings.HasPrefix(l, "     -> "):
		return p.arrow(strings.TrimPrefix(l, "     -> "))
	case strings.HasPrefix(l, "    ") && p.span != nil && p.sec == secSpan:
		return p.spanField(strings.TrimSpace(l))
	case p.metric != nil:
		return p.pointLine(l)
	}
	return nil
}

// arrow is a "     -> " line: an attribute or a metric descriptor field.
func (p *parser) arrow(rest string) error {
	k, v, ok := strings.Cut(rest, ": ")
	if !ok {
		if p.sec == secIgnore {
			return nil
		}
		return fmt.Errorf("no \": \" in %q", rest)
	}
	switch p.sec {
	case secResource:
		p.resource[k] = attrValue(v)
	case secScope:
		// scope attributes are not kept
	case secSpan:
		p.span.Attributes[k] = attrValue(v)
	case secPoint:
		p.point.Attributes[k] = attrValue(v)
	case secDescriptor:
		switch k {
		case "Name":
			p.metric.Name = v
		case "Description":
			p.metric.Description = v
		case "Unit":
			p.metric.Unit = v
		case "DataType":
			p.metric.Type = v
		case "IsMonotonic":
			p.metric.IsMonotonic = v == "true"
		case "AggregationTemporality":
			p.metric.Temporality = v
		}
	}
	return nil
}

// attrValue strips the type of an attribute value: Str(x) -> x, Int(5) -> 5.
func attrValue(v string) string {
	i := strings.IndexByte(v, '(')
	if i < 0 || !strings.HasSuffix(v, ")") {
		return v
	}
	return v[i+1 : len(v)-1]
}

// Name of a line "    Trace ID       : 0123...".
func (p *parser) spanField(l string) error {
	k, v, ok := strings.Cut(l, ":")
	if !ok {
		return fmt.Errorf("span field without \":\": %q", l)
	}
	k = strings.TrimSpace(k)
	v = strings.TrimPrefix(v, " ")
	var err error
	switch k {
	case "Trace ID":
		p.span.TraceID = v
	case "Parent ID":
		p.span.ParentID = v
	case "ID":
		p.span.SpanID = v
	case "Name":
		p.span.Name = v
	case "Kind":
		p.span.Kind = v
	case "Start time":
		p.span.Start, err = parseTime(v)
	case "End time":
		p.span.End, err = parseTime(v)
	case "Status code":
		p.span.StatusCode = v
	}
	return err
}

// parseTime reads pcommon.Timestamp's String(): UTC, nanoseconds.
func parseTime(v string) (time.Time, error) {
	t, err := time.Parse("2006-01-02 15:04:05.999999999 -0700 MST", v)
	if err != nil {
		return t, fmt.Errorf("timestamp %q: %w", v, err)
	}
	return t, nil
}

// pointLine is a line of a metric after its descriptor.
func (p *parser) pointLine(l string) error {
	for _, kind := range []string{"NumberDataPoints #", "HistogramDataPoints #", "ExponentialHistogramDataPoints #", "SummaryDataPoints #"} {
		if strings.HasPrefix(l, kind) {
			if p.point != nil {
				if err := p.finishPoint(); err != nil {
					return err
				}
			}
			p.point = &Point{Attributes: map[string]string{}}
			p.sec = secNone
			return nil
		}
	}
	if p.point == nil {
		return nil
	}
	var err error
	pt := p.point
	switch {
	case strings.HasPrefix(l, "StartTimestamp: "):
		pt.Start, err = parseTime(strings.TrimPrefix(l, "StartTimestamp: "))
	case strings.HasPrefix(l, "Timestamp: "):
		pt.Time, err = parseTime(strings.TrimPrefix(l, "Timestamp: "))
	case strings.HasPrefix(l, "Value: "):
		pt.Value, err = strconv.ParseFloat(strings.TrimPrefix(l, "Value: "), 64)
	case strings.HasPrefix(l, "Count: "):
		pt.Count, err = strconv.ParseUint(strings.TrimPrefix(l, "Count: "), 10, 64)
	case strings.HasPrefix(l, "Sum: "):
		pt.Sum, err = strconv.ParseFloat(strings.TrimPrefix(l, "Sum: "), 64)
		pt.HasSum = true
	case strings.HasPrefix(l, "Min: "):
		var f float64
		f, err = strconv.ParseFloat(strings.TrimPrefix(l, "Min: "), 64)
		pt.Min = &f
	case strings.HasPrefix(l, "Max: "):
		var f float64
		f, err = strconv.ParseFloat(strings.TrimPrefix(l, "Max: "), 64)
		pt.Max = &f
	case strings.HasPrefix(l, "ExplicitBounds #"):
		var f float64
		_, v, _ := strings.Cut(l, ": ")
		f, err = strconv.ParseFloat(v, 64)
		pt.Bounds = append(pt.Bounds, f)
	case strings.HasPrefix(l, "Buckets #"):
		var c uint64
		_, v, _ := strings.Cut(l, ", Count: ")
		c, err = strconv.ParseUint(v, 10, 64)
		pt.BucketCounts = append(pt.BucketCounts, c)
	case strings.HasPrefix(l, "Bucket "):
		err = p.expBucket(strings.TrimPrefix(l, "Bucket "))
	case strings.HasPrefix(l, "QuantileValue #"):
		// QuantileValue #0: Quantile 0.500000, Value 1.000000
		var q, v float64
		_, rest, _ := strings.Cut(l, ": Quantile ")
		qs, vs, _ := strings.Cut(rest, ", Value ")
		if q, err = strconv.ParseFloat(qs, 64); err == nil {
			if v, err = strconv.ParseFloat(vs, 64); err == nil {
				if pt.Quantiles == nil {
					pt.Quantiles = map[float64]float64{}
				}
				pt.Quantiles[q] = v
			}
		}
	}
	if err != nil {
		return fmt.Errorf("metric %s: %q: %w", p.metric.Name, l, err)
	}
	return nil
}

// expBucket is an exponential histogram bucket line after "Bucket ":
// "[-u, -l), Count: n" (negative), "[0, 0], Count: n" (zero) or
// "(l, u], Count: n" (positive).
func (p *parser) expBucket(s string) error {
	rng, cs, ok := strings.Cut(s, ", Count: ")
	if !ok || len(rng) < 2 {
		return fmt.Errorf("bucket %q", s)
	}
	c, err := strconv.ParseUint(cs, 10, 64)
	if err != nil {
		return err
	}
	lo, hi, ok := strings.Cut(rng[1:len(rng)-1], ", ")
	if !ok {
		return fmt.Errorf("bucket range %q", rng)
	}
	pt := p.point
	switch {
	case rng == "[0, 0]":
		pt.ZeroCount = c
	case rng[0] == '[':
		// Negative buckets are printed from the highest index down.
		pt.NegativeBuckets = append([]uint64{c}, pt.NegativeBuckets...)
		pt.negBounds = append([][2]string{{strings.TrimPrefix(hi, "-"), strings.TrimPrefix(lo, "-")}}, pt.negBounds...)
	default:
		pt.PositiveBuckets = append(pt.PositiveBuckets, c)
		pt.posBounds = append(pt.posBounds, [2]string{lo, hi})
	}
	return nil
}

func (p *parser) finishPoint() error {
	if p.metric.Type == "ExponentialHistogram" {
		if err := p.point.solveScale(); err != nil {
			return fmt.Errorf("metric %s: %w", p.metric.Name, err)
		}
	}
	p.metric.Points = append(p.metric.Points, *p.point)
	p.point = nil
	return nil
}

func (p *parser) finishMetric() error {
	if p.metric == nil {
		return nil
	}
	if p.point != nil {
		if err := p.finishPoint(); err != nil {
			return err
		}
	}
	p.d.Metrics = append(p.d.Metrics, *p.metric)
	p.metric = nil
	p.sec = secNone
	return nil
}

// solveScale finds the scale and offsets whose bucket bounds, computed as
// the debug exporter does (exp(index * ln2 * 2^-scale), printed %f), are
// exactly the printed ones. Scales -10..20 are tried (OTLP allows -10..20);
// more than one answer (bounds too small to tell apart at six decimals) is
// an error, as is none.
func (pt *Point) solveScale() error {
	if len(pt.posBounds) == 0 && len(pt.negBounds) == 0 {
		return nil // no buckets: the scale is not printed
	}
	type answer struct{ scale, pos, neg int32 }
	var found []answer
	for s := int32(-10); s <= 20; s++ {
		factor := math.Ldexp(math.Ln2, -int(s))
		pos, okp := solveOffset(pt.posBounds, factor)
		neg, okn := solveOffset(pt.negBounds, factor)
		if okp && okn {
			found = append(found, answer{s, pos, neg})
		}
	}
	switch len(found) {
	case 0:
		return fmt.Errorf("no exponential scale gives the printed bucket bounds %v %v", pt.posBounds, pt.negBounds)
	case 1:
		pt.Scale, pt.PositiveOffset, pt.NegativeOffset = found[0].scale, found[0].pos, found[0].neg
		return nil
	}
	return fmt.Errorf("%d exponential scales give the printed bucket bounds %v (too small to tell apart)", len(found), pt.posBounds)
}

// solveOffset finds the offset whose buckets at this factor print as
// bounds, from the last (largest, most precise) bucket's upper bound.
func solveOffset(bounds [][2]string, factor float64) (int32, bool) {
	if len(bounds) == 0 {
		return 0, true
	}
	last := bounds[len(bounds)-1]
	hi, err := strconv.ParseFloat(last[1], 64)
	if err != nil || hi <= 0 || math.IsInf(hi, 0) {
		return 0, false
	}
	guess := int64(math.Round(math.Log(hi)/factor)) - 1 - int64(len(bounds)-1)
	for off := guess - 1; off <= guess+1; off++ {
		if off < math.MinInt32 || off > math.MaxInt32 {
			continue
		}
		ok := true
		for i, b := range bounds {
			idx := float64(off) + float64(i)
			if fmt.Sprintf("%f", math.Exp(idx*factor)) != b[0] || fmt.Sprintf("%f", math.Exp((idx+1)*factor)) != b[1] {
				ok = false
				break
			}
		}
		if ok {
			return int32(off), true
		}
	}
	return 0, false
}

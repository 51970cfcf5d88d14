// SPDX-License-Identifier: Apache-2.0

package otelcoltest

import (
	"math"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestParseCaptured parses real debug exporter output (collector v0.150.0,
// verbosity detailed) of two spans and five metrics sent by the
// OpenTelemetry Go SDK: a Sum with two points, a Gauge, an explicit
// Histogram, and exponential histograms at scale 3 (with a zero and a
// negative bucket) and at a fine scale near 1000.
func TestParseCaptured(t *testing.T) {
	f, err := os.Open("testdata/debug-detailed.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Spans) != 2 {
		t.Fatalf("%d spans, want 2", len(d.Spans))
	}
	child, root := d.Spans[0], d.Spans[1]
	if root.Name != "root" || child.Name != "child" {
		t.Fatalf("names %q %q", root.Name, child.Name)
	}
	if root.TraceID != "df708acae9b0953c19cc8f4c6129a5ae" || child.TraceID != root.TraceID {
		t.Errorf("trace ids %q %q", root.TraceID, child.TraceID)
	}
	if root.ParentID != "" || child.ParentID != root.SpanID || root.SpanID != "4d368b069d0284c9" {
		t.Errorf("root %q parent %q, child parent %q", root.SpanID, root.ParentID, child.ParentID)
	}
	if want := time.Unix(1700000000, 123456789).UTC(); !root.Start.Equal(want) || root.Duration() != time.Second {
		t.Errorf("root start %v duration %v", root.Start, root.Duration())
	}
	if child.Duration() != 299*time.Millisecond || child.Kind != "Server" || root.Kind != "Internal" {
		t.Errorf("child duration %v kind %q, root kind %q", child.Duration(), child.Kind, root.Kind)
	}
	if want := map[string]string{"pid": "42", "n": "3"}; !reflect.DeepEqual(root.Attributes, want) {
		t.Errorf("root attributes %v", root.Attributes)
	}
	if len(child.Attributes) != 0 {
		t.Errorf("child attributes %v (the event's must not count)", child.Attributes)
	}
	if want := map[string]string{"service.name": "sample-svc", "sample.int": "7"}; !reflect.DeepEqual(root.Resource, want) {
		t.Errorf("resource %v", root.Resource)
	}
	if root.Scope != (Scope{"sample-scope", "1.2.3"}) {
		t.Errorf("scope %+v", root.Scope)
	}
	if got := d.SpansNamed("child"); len(got) != 1 || got[0].SpanID != "3eda22e26bd13870" {
		t.Errorf("SpansNamed(child) = %+v", got)
	}

	if len(d.Metrics) != 5 {
		t.Fatalf("%d metrics, want 5", len(d.Metrics))
	}
	sum := d.Metric("events_total")
	if sum == nil || sum.Type != "Sum" || !sum.IsMonotonic || sum.Temporality != "Cumulative" || sum.Unit != "1" || sum.Description != "events" ||
		len(sum.Points) != 2 || sum.Points[0].Value != 5 || sum.Points[0].Attributes["kind"] != "a" || sum.Points[1].Value != 2 {
		t.Errorf("events_total %+v", sum)
	}
	if sum != nil && (sum.Scope != Scope{"sample-meter", ""} || sum.Resource["service.name"] != "sample-svc" || sum.Points[0].Time.IsZero()) {
		t.Errorf("events_total scope %+v resource %v time %v", sum.Scope, sum.Resource, sum.Points[0].Time)
	}
	if g := d.Metric("temp"); g == nil || g.Type != "Gauge" || len(g.Points) != 1 || g.Points[0].Value != 21.5 {
		t.Errorf("temp %+v", g)
	}
	h := d.Metric("lat")
	if h == nil || h.Type != "Histogram" || len(h.Points) != 1 {
		t.Fatalf("lat %+v", h)
	}
	hp := h.Points[0]
	if hp.Count != 5 || hp.Sum != 56.25 || !hp.HasSum || *hp.Min != 0.05 || *hp.Max != 50 ||
		!reflect.DeepEqual(hp.Bounds, []float64{0.1, 1, 10}) || !reflect.DeepEqual(hp.BucketCounts, []uint64{1, 2, 1, 1}) {
		t.Errorf("lat point %+v", hp)
	}
	e := d.Metric("exp_hist")
	if e == nil || e.Type != "ExponentialHistogram" || len(e.Points) != 1 {
		t.Fatalf("exp_hist %+v", e)
	}
	ep := e.Points[0]
	// Scale 3: bucket i is (2^(i/8), 2^((i+1)/8)]; 1.5 is in bucket 4
	// (1.414, 1.542], 100 in bucket 53, -2 in negative bucket 7 [-2, -1.834).
	if ep.Scale != 3 || ep.ZeroCount != 1 || ep.PositiveOffset != 4 || len(ep.PositiveBuckets) != 50 ||
		ep.PositiveBuckets[0] != 1 || ep.PositiveBuckets[8] != 1 || ep.PositiveBuckets[9] != 1 || ep.PositiveBuckets[49] != 1 ||
		ep.NegativeOffset != 7 || !reflect.DeepEqual(ep.NegativeBuckets, []uint64{1}) || ep.Count != 6 {
		t.Errorf("exp_hist point: scale %d zero %d pos offset %d (%d buckets) neg offset %d %v",
			ep.Scale, ep.ZeroCount, ep.PositiveOffset, len(ep.PositiveBuckets), ep.NegativeOffset, ep.NegativeBuckets)
	}
	var total uint64
	for _, c := range ep.PositiveBuckets {
		total += c
	}
	if total != 4 {
		t.Errorf("exp_hist positive counts sum to %d, want 4", total)
	}
	fine := d.Metric("exp_hist_fine").Points[0]
	lower := math.Exp(float64(fine.PositiveOffset) * math.Ldexp(math.Ln2, -int(fine.Scale)))
	if fine.Scale < 15 || lower > 1000.5 || lower < 1000.49 || fine.PositiveBuckets[0] != 1 || fine.PositiveBuckets[len(fine.PositiveBuckets)-1] != 1 {
		t.Errorf("exp_hist_fine: scale %d offset %d (lower bound %f), %d buckets", fine.Scale, fine.PositiveOffset, lower, len(fine.PositiveBuckets))
	}
}

// TestParseBad checks that a malformed value is an error naming the line,
// and that lines outside a span or metric are skipped.
func TestParseBad(t *testing.T) {
	in := "noise\nResourceSpans #0\nSpan #0\n    Start time     : yesterday\n"
	if _, err := Parse(strings.NewReader(in)); err == nil || !strings.Contains(err.Error(), "line 4") {
		t.Errorf("err = %v, want one naming line 4", err)
	}
	in = "ResourceMetrics #0\nMetric #0\nDescriptor:\n     -> Name: m\n     -> DataType: ExponentialHistogram\nExponentialHistogramDataPoints #0\nBucket (1.000000, 7.000000], Count: 1\n"
	if _, err := Parse(strings.NewReader(in)); err == nil || !strings.Contains(err.Error(), "scale") {
		t.Errorf("err = %v, want one about the scale", err)
	}
	if d, err := Parse(strings.NewReader("2026-11-26T11:12:30.126Z\tinfo\tstarting\n")); err != nil || len(d.Spans)+len(d.Metrics) != 0 {
		t.Errorf("log line: %+v, %v", d, err)
	}
}

// FuzzParse checks that no input makes Parse panic.
func FuzzParse(f *testing.F) {
	if b, err := os.ReadFile("testdata/debug-detailed.txt"); err == nil {
		f.Add(string(b))
	}
	f.Add("ResourceMetrics #0\nMetric #0\nDescriptor:\n     -> DataType: ExponentialHistogram\nExponentialHistogramDataPoints #0\nBucket [-1.000000, -0.500000), Count: 1\n")
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = Parse(strings.NewReader(s))
	})
}

// SPDX-License-Identifier: Apache-2.0

package otlp

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/kernel-exporter/kernel_exporter/collector"
)

var errTest = errors.New("test error")

func prototextUnmarshal(s string, m proto.Message) error { return prototext.Unmarshal([]byte(s), m) }

func slogTo(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

func timestamp(t time.Time) *timestamppb.Timestamp { return timestamppb.New(t) }

// source serves fixed snapshots and counts reads.
type source struct {
	mu    sync.Mutex
	snaps []*collector.Snapshot
	reads int
}

func (s *source) Read() []*collector.Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	return s.snaps
}

// exporter records requests; block, when set, makes Export wait for its
// context; fail makes it fail.
type exporter struct {
	mu       sync.Mutex
	requests []*metricdata.ResourceMetrics
	block    bool
	started  chan struct{}
	fail     error
	shutdown int
}

func (e *exporter) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	e.mu.Lock()
	e.requests = append(e.requests, rm)
	block, fail := e.block, e.fail
	e.mu.Unlock()
	if block {
		if e.started != nil {
			close(e.started)
			e.started = nil
		}
		<-ctx.Done()
		return ctx.Err()
	}
	return fail
}

func (e *exporter) Shutdown(context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.shutdown++
	return nil
}

func newTestPusher(t *testing.T, src *source, exp *exporter, timeout time.Duration) (*Pusher, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	p, err := New(context.Background(), src, reg, Options{Interval: time.Second, Timeout: timeout, Exporter: exp,
		Resource: resource.NewSchemaless(attribute.String("service.name", "kernel_exporter")), Version: "1.2.3", Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	return p, reg
}

func exports(t *testing.T, reg *prometheus.Registry, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "kernel_exporter_otlp_exports_total" {
			continue
		}
		for _, m := range mf.Metric {
			if m.Label[0].GetValue() == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no kernel_exporter_otlp_exports_total{result=%q}", result)
	return 0
}

func TestPush(t *testing.T) {
	f := collector.NewFamily("timer_starts_total", "Starts.", collector.KindCounter, []string{"function"}, nil,
		[]collector.SeriesData{{Labels: []string{"tcp_write_timer"}, Value: 12}})
	bad := collector.NewFamily("broken_total", "", collector.KindCounter, nil, nil, nil)
	bad.Err = errTest
	src := &source{snaps: []*collector.Snapshot{{Config: "timers", Families: []*collector.Family{f, bad}, Start: tStart, Time: tRead}}}
	exp := &exporter{}
	p, reg := newTestPusher(t, src, exp, time.Second)
	if err := p.Push(context.Background()); err != nil {
		t.Fatal(err)
	}
	if src.reads != 1 || len(exp.requests) != 1 {
		t.Fatalf("%d reads, %d requests; want 1, 1", src.reads, len(exp.requests))
	}
	rm := exp.requests[0]
	if v, _ := rm.Resource.Set().Value("service.name"); v.AsString() != "kernel_exporter" {
		t.Fatalf("resource %v", rm.Resource)
	}
	sm := rm.ScopeMetrics[0]
	if sm.Scope.Name != ScopeName || sm.Scope.Version != "1.2.3" {
		t.Fatalf("scope %+v", sm.Scope)
	}
	// the program's metric (not the failed one), then the self-metrics
	names := map[string]int{}
	for i, m := range sm.Metrics {
		names[m.Name] = i
	}
	if i, ok := names["timer_starts_total"]; !ok || i != 0 {
		t.Fatalf("metrics %v: want timer_starts_total first", names)
	}
	if _, ok := names["broken_total"]; ok {
		t.Fatal("a family whose read failed was pushed")
	}
	for _, n := range []string{"kernel_exporter_otlp_exports_total", "kernel_exporter_otlp_export_duration_seconds"} {
		if _, ok := names[n]; !ok {
			t.Fatalf("metrics %v: %s missing", names, n)
		}
	}
	if got := sm.Metrics[0].Data.(metricdata.Sum[float64]).DataPoints[0].Value; got != 12 {
		t.Fatalf("value %v, want 12", got)
	}
	if exports(t, reg, "success") != 1 || exports(t, reg, "failure") != 0 {
		t.Fatal("push not counted as a success")
	}
}

func TestPushFailureCounted(t *testing.T) {
	src := &source{}
	exp := &exporter{fail: errTest}
	p, reg := newTestPusher(t, src, exp, time.Second)
	var logs strings.Builder
	p.log = slogTo(&logs)
	for range 3 {
		if err := p.Push(context.Background()); !errors.Is(err, errTest) {
			t.Fatalf("err %v, want %v", err, errTest)
		}
	}
	if exports(t, reg, "failure") != 3 || exports(t, reg, "success") != 0 {
		t.Fatal("failures not counted")
	}
	// rate-limited: one line for three failures within FailureLogEvery
	if n := strings.Count(logs.String(), "OTLP metrics push failed"); n != 1 {
		t.Fatalf("%d failure lines, want 1:\n%s", n, logs.String())
	}
	exp.fail = nil
	if err := p.Push(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "failures_not_logged=2") {
		t.Fatalf("recovery line does not count the 2 failures not logged:\n%s", logs.String())
	}
}

// A push that hangs ends at its timeout, counted as a failure, and a push
// attempted meanwhile is skipped, not run alongside.
func TestPushTimeoutNoOverlap(t *testing.T) {
	src := &source{}
	started := make(chan struct{})
	exp := &exporter{block: true, started: started}
	p, reg := newTestPusher(t, src, exp, 300*time.Millisecond)
	done := make(chan error)
	go func() { done <- p.Push(context.Background()) }()
	<-started
	if err := p.Push(context.Background()); !errors.Is(err, ErrBusy) {
		t.Fatalf("second push: %v, want ErrBusy", err)
	}
	if err := <-done; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("first push: %v, want the deadline", err)
	}
	if exports(t, reg, "failure") != 1 || exports(t, reg, "skipped") != 1 {
		t.Fatal("timeout or skip not counted")
	}
	if src.reads != 1 {
		t.Fatalf("%d reads, want 1 (the skipped push reads nothing)", src.reads)
	}
	if d := testutil.ToFloat64(p.duration); d < 0.3 || d > 5 {
		t.Fatalf("duration %v, want about the 0.3 s timeout", d)
	}
}

func TestMissedTicks(t *testing.T) {
	for _, tc := range []struct {
		took time.Duration
		want int
	}{{0, 0}, {999 * time.Millisecond, 0}, {time.Second, 0}, {1999 * time.Millisecond, 0}, {2 * time.Second, 1}, {2500 * time.Millisecond, 1}, {3 * time.Second, 2}} {
		if got := missedTicks(tc.took, time.Second); got != tc.want {
			t.Errorf("missedTicks(%v, 1s) = %d, want %d", tc.took, got, tc.want)
		}
	}
}

func TestRunShutsDown(t *testing.T) {
	exp := &exporter{}
	p, _ := newTestPusher(t, &source{}, exp, time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan struct{})
	go func() { p.Run(ctx); close(ended) }()
	cancel()
	<-ended
	if exp.shutdown != 1 {
		t.Fatalf("%d shutdowns, want 1", exp.shutdown)
	}
}

func TestCheckOptions(t *testing.T) {
	for _, tc := range []struct {
		interval, timeout time.Duration
		err               string
	}{
		{30 * time.Second, 10 * time.Second, ""},
		{time.Second, time.Second, ""},
		{time.Hour, time.Minute, ""},
		{999 * time.Millisecond, time.Second, "--otlp.metrics.interval 999ms: must be 1s to 1h0m0s"},
		{2 * time.Hour, time.Second, "--otlp.metrics.interval 2h0m0s: must be 1s to 1h0m0s"},
		{time.Minute, 0, "--otlp.metrics.timeout 0s: must be positive"},
	} {
		err := CheckOptions(tc.interval, tc.timeout)
		if (err == nil) != (tc.err == "") || (err != nil && err.Error() != tc.err) {
			t.Errorf("CheckOptions(%v, %v) = %v, want %q", tc.interval, tc.timeout, err, tc.err)
		}
	}
	// a timeout longer than the interval is cut to it
	p, err := New(context.Background(), &source{}, prometheus.NewRegistry(), Options{Interval: 2 * time.Second, Timeout: time.Minute, Exporter: &exporter{}, Resource: resource.Empty()})
	if err != nil || p.timeout != 2*time.Second {
		t.Fatalf("timeout %v, %v; want 2s", p.timeout, err)
	}
}

// The certificate and key files the SDK reads whole are checked first.
func TestNewExporterTLSFiles(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	t.Setenv("OTEL_EXPORTER_OTLP_METRICS_CLIENT_KEY", "/dev/zero")
	_, _, err := NewExporter(context.Background())
	if err == nil || err.Error() != "OTEL_EXPORTER_OTLP_METRICS_CLIENT_KEY /dev/zero: not a regular file (a character device)" {
		t.Fatalf("NewExporter: %v", err)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_METRICS_CLIENT_KEY", "")
	exp, proto, err := NewExporter(context.Background())
	if err != nil || proto != "grpc" {
		t.Fatalf("NewExporter: %v, %q", err, proto)
	}
	_ = exp.Shutdown(context.Background())
}

func TestResourceFromEnv(t *testing.T) {
	t.Setenv("OTEL_SERVICE_NAME", "")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test,team=kernel")
	r, err := NewResource(context.Background(), "1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	want := map[attribute.Key]string{"service.name": "kernel_exporter", "service.version": "1.2.3",
		"deployment.environment": "test", "team": "kernel"}
	for k, v := range want {
		if got, _ := r.Set().Value(k); got.AsString() != v {
			t.Errorf("%s = %q, want %q", k, got.AsString(), v)
		}
	}
	if got, ok := r.Set().Value("host.name"); !ok || got.AsString() == "" {
		t.Error("no host.name")
	}
	t.Setenv("OTEL_SERVICE_NAME", "kx")
	r, _ = NewResource(context.Background(), "1.2.3")
	if got, _ := r.Set().Value("service.name"); got.AsString() != "kx" {
		t.Errorf("service.name %q, want OTEL_SERVICE_NAME's kx", got.AsString())
	}
}

func TestSplit(t *testing.T) {
	var ms []metricdata.Metrics
	total := 0
	for i := range 5 {
		up := pow2(0, 26, 1)
		ones := make([]uint64, len(up))
		for j := range ones {
			ones[j] = 1
		}
		var data []collector.SeriesData
		for j := range 1000 {
			data = append(data, collector.SeriesData{Labels: []string{strings.Repeat("x", j%50), "v"}, Cum: cumulative(ones...), Count: uint64(len(up))})
		}
		f := collector.NewFamily("h"+string(rune('a'+i)), "", collector.KindHistogram, []string{"a", "b"}, up, data)
		ms = append(ms, convertOne(t, f))
		total += 1000
	}
	ms = append(ms, metricdata.Metrics{Name: "empty", Data: metricdata.Gauge[float64]{}})
	const max = 64 << 10
	batches := Split(ms, max)
	if len(batches) < 2 {
		t.Fatalf("%d requests, want several", len(batches))
	}
	got, names := 0, []string{}
	for _, b := range batches {
		size := 0
		for _, m := range b {
			if len(names) == 0 || names[len(names)-1] != m.Name {
				names = append(names, m.Name)
			}
			pts := 0
			switch d := m.Data.(type) {
			case metricdata.ExponentialHistogram[float64]:
				pts = len(d.DataPoints)
				for _, p := range d.DataPoints {
					size += 64 + attrSize(p.Attributes) + 16*len(p.PositiveBucket.Counts)
				}
			}
			got += pts
			size += 64 + len(m.Name)
		}
		if size > max {
			t.Fatalf("a request of %d estimated bytes, over %d", size, max)
		}
	}
	if got != total || strings.Join(names, ",") != "ha,hb,hc,hd,he,empty" {
		t.Fatalf("%d points of %d, metrics %v", got, total, names)
	}
}

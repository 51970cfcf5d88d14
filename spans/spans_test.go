// SPDX-License-Identifier: Apache-2.0

package spans

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/kernel-exporter/kernel_exporter/config"
	"github.com/kernel-exporter/kernel_exporter/decoder"
)

// testYAML is a tracing config: the base span fields, an operation u32
// with a static_map, 4 bytes padding, and a 16-byte span_name: 72 bytes.
const testYAML = `tracing:
  spans:
    - name: io
      ringbuf: io_spans
      service: io-trace
      labels:
        - {name: trace_id, size: 16, decoders: [{name: hex}]}
        - {name: parent_span_id, size: 8, decoders: [{name: hex}]}
        - {name: span_id, size: 8, decoders: [{name: hex}]}
        - {name: span_monotonic_timestamp_ns, size: 8, decoders: [{name: uint}]}
        - {name: span_duration_ns, size: 8, decoders: [{name: uint}]}
        - name: operation
          size: 4
          padding: 4
          decoders:
            - name: uint
            - name: static_map
              static_map: {0: read, 1: write}
        - {name: span_name, size: 16, decoders: [{name: string}]}
`

func testLayout(t testing.TB) *Layout {
	t.Helper()
	cfg, err := config.Parse("io.yaml", []byte(testYAML))
	if err != nil {
		t.Fatal(err)
	}
	spec := &ebpf.CollectionSpec{Maps: map[string]*ebpf.MapSpec{"io_spans": {Name: "io_spans", Type: ebpf.RingBuf, MaxEntries: 4096}}}
	p, err := Compile(cfg, spec, decoder.NewEnv(100))
	if err != nil {
		t.Fatal(err)
	}
	return p.Layouts[0]
}

// record builds a record of testLayout's layout.
func record(traceID [16]byte, parent, span [8]byte, ts, dur uint64, op uint32, name string) []byte {
	b := make([]byte, 0, 80)
	b = append(b, traceID[:]...)
	b = append(b, parent[:]...)
	b = append(b, span[:]...)
	b = binary.NativeEndian.AppendUint64(b, ts)
	b = binary.NativeEndian.AppendUint64(b, dur)
	b = binary.NativeEndian.AppendUint32(b, op)
	b = append(b, 0, 0, 0, 0)
	var n [16]byte
	copy(n[:], name)
	return append(b, n[:]...)
}

// TestCompile checks the ring buffer checks against the object.
func TestCompile(t *testing.T) {
	cfg, err := config.Parse("io.yaml", []byte(testYAML))
	if err != nil {
		t.Fatal(err)
	}
	env := decoder.NewEnv(100)
	_, err = Compile(cfg, &ebpf.CollectionSpec{Maps: map[string]*ebpf.MapSpec{}}, env)
	if err == nil || !strings.Contains(err.Error(), `io.yaml:4: tracing.spans[0].ringbuf: no map "io_spans" in the object`) {
		t.Errorf("missing map: %v", err)
	}
	_, err = Compile(cfg, &ebpf.CollectionSpec{Maps: map[string]*ebpf.MapSpec{"io_spans": {Type: ebpf.Hash}}}, env)
	if err == nil || !strings.Contains(err.Error(), `map "io_spans" is a Hash, not a ring buffer`) {
		t.Errorf("hash map: %v", err)
	}
	if l := testLayout(t); l.Size != 72 || l.Name != "io" || l.Service != "io-trace" {
		t.Errorf("layout %+v", l)
	}
}

// TestDecode checks each field of a record, and the size checks.
func TestDecode(t *testing.T) {
	l := testLayout(t)
	tid := [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	raw := record(tid, [8]byte{0xaa, 1}, [8]byte{0xbb, 2}, 123456789, 300e6, 1, "dd")
	r, err := l.Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	if r.TraceID.String() != "0102030405060708090a0b0c0d0e0f10" || r.ParentID.String() != "aa01000000000000" || r.SpanID.String() != "bb02000000000000" {
		t.Errorf("ids %s %s %s", r.TraceID, r.ParentID, r.SpanID)
	}
	if !r.HasStart || r.Start != 123456789 || r.Duration != 300e6 || r.Name != "dd" {
		t.Errorf("record %+v", r)
	}
	if len(r.Attrs) != 1 || r.Attrs[0].Key != "operation" || r.Attrs[0].Value.AsString() != "write" {
		t.Errorf("attrs %v", r.Attrs)
	}
	// An empty span_name keeps the entry's name; tail padding is allowed.
	r, err = l.Decode(append(record(tid, [8]byte{}, [8]byte{}, 1, 1, 0, ""), 0, 0, 0, 0))
	if err != nil || r.Name != "io" || r.Attrs[0].Value.AsString() != "read" {
		t.Errorf("padded record: %+v, %v", r, err)
	}
	for _, tc := range []struct {
		n      int
		reason string
	}{{71, ReasonShort}, {0, ReasonShort}, {80, ReasonLong}} {
		b := make([]byte, tc.n)
		copy(b, raw)
		_, err := l.Decode(b)
		if re, ok := errors.AsType[*RecordError](err); !ok || re.Reason != tc.reason {
			t.Errorf("%d bytes: %v, want %s", tc.n, err, tc.reason)
		}
	}
	// A negative duration (end before start) read as unsigned.
	if _, err := l.Decode(record(tid, [8]byte{}, [8]byte{}, 1, ^uint64(0), 0, "x")); err == nil {
		t.Error("duration 2^64-1 decoded")
	} else if re, ok := errors.AsType[*RecordError](err); !ok || re.Reason != ReasonDecoder {
		t.Errorf("duration 2^64-1: %v", err)
	}
	// An operation outside the static_map is kept, as for metrics.
	if r, err := l.Decode(record(tid, [8]byte{}, [8]byte{}, 1, 1, 7, "x")); err != nil || r.Attrs[0].Value.AsString() != "unknown:7" {
		t.Errorf("operation 7: %v, %v", r.Attrs, err)
	}
}

// TestEmit checks the span a record becomes: the record's ids, the parent,
// start converted from CLOCK_MONOTONIC, end = start + duration,
// attributes and the service; and generated ids where the record has
// zeros.
func TestEmit(t *testing.T) {
	l := testLayout(t)
	exp := tracetest.NewInMemoryExporter()
	s := NewSink(nil)
	s.started = true
	s.ids = newIDGenerator()
	s.batch = newBatcher(exp, batchConfig{queue: 8, batch: 4, delay: time.Hour, timeout: time.Second}, func(error) {})
	tr := s.tracer(l.Service)
	now := monotonicNow()
	tid := [16]byte{0xee, 1}
	for _, raw := range [][]byte{
		record(tid, [8]byte{0xaa, 1}, [8]byte{0xbb, 2}, now-2e9, 300e6, 1, "child"),
		record(tid, [8]byte{}, [8]byte{0xaa, 1}, now-3e9, 2e9, 0, "root"),
		record([16]byte{}, [8]byte{}, [8]byte{}, now, 1, 0, "fresh"),
	} {
		r, err := l.Decode(raw)
		if err != nil {
			t.Fatal(err)
		}
		emit(tr, "cfg", &r)
	}
	if err := s.batch.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := exp.GetSpans()
	if len(got) != 3 {
		t.Fatalf("%d spans", len(got))
	}
	child, root, fresh := got[0], got[1], got[2]
	if child.Name != "child" || child.SpanContext.TraceID() != trace.TraceID(tid) || child.Parent.SpanID().String() != "aa01000000000000" ||
		child.SpanContext.SpanID().String() != "bb02000000000000" || child.EndTime.Sub(child.StartTime) != 300*time.Millisecond {
		t.Errorf("child %+v", child)
	}
	if ago := time.Since(child.StartTime); ago < 2*time.Second || ago > 3*time.Second {
		t.Errorf("child started %v ago, want 2s", ago)
	}
	if root.Parent.IsValid() || root.SpanContext.TraceID() != trace.TraceID(tid) || root.SpanContext.SpanID().String() != "aa01000000000000" ||
		root.EndTime.Sub(root.StartTime) != 2*time.Second || !root.StartTime.Before(child.StartTime) {
		t.Errorf("root %+v", root)
	}
	if !fresh.SpanContext.TraceID().IsValid() || !fresh.SpanContext.SpanID().IsValid() || fresh.SpanContext.TraceID() == trace.TraceID(tid) {
		t.Errorf("fresh ids %v", fresh.SpanContext)
	}
	attrs := map[string]string{}
	for _, a := range child.Attributes {
		attrs[string(a.Key)] = a.Value.AsString()
	}
	if attrs["operation"] != "write" || attrs[ConfigAttribute] != "cfg" || len(attrs) != 2 {
		t.Errorf("attributes %v", attrs)
	}
	if svc, _ := child.Resource.Set().Value("service.name"); svc.AsString() != "io-trace" {
		t.Errorf("service %v", svc)
	}
	if n := s.batch.exported.Load(); n != 3 {
		t.Errorf("exported %d", n)
	}
}

// TestBatcherDrops checks that a full queue drops and counts, and that a
// failed export counts its spans.
func TestBatcherDrops(t *testing.T) {
	exp := &failExporter{}
	b := newBatcher(exp, batchConfig{queue: 2, batch: 2, delay: time.Hour, timeout: time.Second}, func(error) {})
	// A stopped batcher no longer drains its queue: the queue of 2 fills
	// deterministically.
	if err := b.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(b))
	for range 5 {
		_, s := tp.Tracer("t").Start(context.Background(), "s")
		s.End()
	}
	if b.dropQueue.Load() != 3 {
		t.Errorf("queue_full %d, want 3", b.dropQueue.Load())
	}
	b2 := newBatcher(exp, batchConfig{queue: 8, batch: 8, delay: time.Hour, timeout: time.Second}, func(error) {})
	tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(b2))
	for range 3 {
		_, s := tp.Tracer("t").Start(context.Background(), "s")
		s.End()
	}
	if err := b2.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if b2.dropExport.Load() != 3 || b2.exported.Load() != 0 {
		t.Errorf("export_failed %d exported %d", b2.dropExport.Load(), b2.exported.Load())
	}
}

type failExporter struct{}

func (failExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error {
	return errors.New("refused")
}
func (failExporter) Shutdown(context.Context) error { return nil }

// TestBatchConfigFromEnv checks the OTEL_BSP_* bounds.
func TestBatchConfigFromEnv(t *testing.T) {
	t.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", "100")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "200")
	c, err := batchConfigFromEnv()
	if err != nil || c.queue != 100 || c.batch != 100 || c.delay != 200*time.Millisecond {
		t.Errorf("%+v %v", c, err)
	}
	t.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", "0")
	if _, err := batchConfigFromEnv(); err == nil || !strings.Contains(err.Error(), `OTEL_BSP_MAX_QUEUE_SIZE="0"`) {
		t.Errorf("queue 0: %v", err)
	}
}

// FuzzDecode checks that no record makes Decode, or emitting the span of
// a decoded one, panic, and that a record of the wrong size is always a
// RecordError.
func FuzzDecode(f *testing.F) {
	l := testLayout(f)
	exp := tracetest.NewInMemoryExporter()
	tr := sdktrace.NewTracerProvider(sdktrace.WithIDGenerator(newIDGenerator()), sdktrace.WithSyncer(exp)).Tracer("fuzz")
	f.Add(record([16]byte{1}, [8]byte{2}, [8]byte{3}, 4, 5, 1, "name"))
	f.Add([]byte{})
	f.Add(make([]byte, 79))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := l.Decode(b)
		if (len(b) < l.Size || len(b) >= l.Size+MaxTailPadding) && err == nil {
			t.Fatalf("%d-byte record decoded", len(b))
		}
		if err == nil {
			emit(tr, "fuzz", &r)
			exp.Reset()
		}
	})
}

// TestSinkEnv checks the exporter choices: a bad OTEL_TRACES_EXPORTER or
// protocol is Start's error naming the variable and value (the config
// goes down with it), and none builds no exporter.
func TestSinkEnv(t *testing.T) {
	p := &Plan{Config: "c"}
	for _, tc := range []struct{ env, val, want string }{
		{"OTEL_TRACES_EXPORTER", "zipkin", `OTEL_TRACES_EXPORTER="zipkin": want otlp, console or none`},
		{"OTEL_EXPORTER_OTLP_PROTOCOL", "http/json", `OTEL_EXPORTER_OTLP_PROTOCOL="http/json": unsupported OTLP protocol (want grpc or http/protobuf)`},
		{"OTEL_BSP_EXPORT_TIMEOUT", "-1", `OTEL_BSP_EXPORT_TIMEOUT="-1": want milliseconds`},
		{"OTEL_EXPORTER_OTLP_CERTIFICATE", "/dev/zero", `OTEL_EXPORTER_OTLP_CERTIFICATE /dev/zero: not a regular file`},
		{"OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY", "/nonexistent/key.pem", `OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY /nonexistent/key.pem: no such file`},
	} {
		t.Run(tc.env, func(t *testing.T) {
			t.Setenv(tc.env, tc.val)
			_, err := NewSink(nil).Start(p, &ebpf.Collection{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
	t.Setenv("OTEL_TRACES_EXPORTER", "console")
	s := NewSink(nil)
	if r, err := s.Start(p, &ebpf.Collection{}); err != nil || s.proto != "console" || s.batch == nil {
		t.Errorf("console: %v, %q", err, s.proto)
	} else {
		r.Close()
		_ = s.Shutdown(context.Background())
	}
	t.Setenv("OTEL_TRACES_EXPORTER", "none")
	s = NewSink(nil)
	r, err := s.Start(p, &ebpf.Collection{})
	if err != nil || s.batch != nil {
		t.Fatalf("none: %v, batch %v", err, s.batch)
	}
	r.Close()
	if err := s.Shutdown(context.Background()); err != nil {
		t.Error(err)
	}
}

// TestDestination checks what Destination says for each environment: a
// destination only when OTEL_TRACES_EXPORTER is console or an OTLP
// endpoint is set, the endpoint without its user information.
func TestDestination(t *testing.T) {
	for _, tc := range []struct {
		exporter, proto, endpoint, tracesEndpoint string
		want                                      string
		set                                       bool
	}{
		{"", "", "", "", "nowhere set: neither OTEL_EXPORTER_OTLP_TRACES_ENDPOINT nor OTEL_EXPORTER_OTLP_ENDPOINT is set, so the OTLP default, localhost:4318, is tried", false},
		{"otlp", "grpc", "", "", "localhost:4317, is tried", false},
		{"none", "", "http://c:4318", "", "nowhere: OTEL_TRACES_EXPORTER=none", false},
		{"jaeger", "", "http://c:4318", "", `nowhere: OTEL_TRACES_EXPORTER="jaeger" is not otlp, console or none`, false},
		{"", "thrift", "http://c:4318", "", `nowhere: OTEL_EXPORTER_OTLP_PROTOCOL="thrift"`, false},
		{"console", "", "", "", "stdout (OTEL_TRACES_EXPORTER=console)", true},
		{"", "", "http://user:secret@collector:4318", "", "OTLP http/protobuf to http://collector:4318 (OTEL_EXPORTER_OTLP_ENDPOINT)", true},
		{"", "grpc", "http://all:4317", "https://traces:4317", "OTLP grpc to https://traces:4317 (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)", true},
	} {
		t.Setenv("OTEL_TRACES_EXPORTER", tc.exporter)
		t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", tc.proto)
		t.Setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "")
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", tc.endpoint)
		t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", tc.tracesEndpoint)
		got, set := Destination()
		if !strings.Contains(got, tc.want) || set != tc.set || strings.Contains(got, "secret") {
			t.Errorf("%+v: Destination() = %q, %v; want %q, %v", tc, got, set, tc.want, tc.set)
		}
	}
}

// SPDX-License-Identifier: Apache-2.0

package otelcoltest

import (
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// maxRequest bounds one OTLP request body the Receiver reads.
const maxRequest = 16 << 20

// Receiver is an OTLP/HTTP trace receiver inside the test process, for
// where no collector binary runs (the kernel matrix guests): it accepts
// POST /v1/traces with a binary protobuf ExportTraceServiceRequest
// (uncompressed, as the OTLP exporters send by default) and keeps the
// spans in the Collector's Span form.
type Receiver struct {
	// Endpoint is http://127.0.0.1:<port>, for OTEL_EXPORTER_OTLP_ENDPOINT
	// with OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf.
	Endpoint string

	mu    sync.Mutex
	spans []Span
	errs  []string
}

// StartReceiver serves a Receiver on a free loopback port until t ends.
func StartReceiver(t testing.TB) *Receiver {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &Receiver{Endpoint: "http://" + l.Addr().String()}
	srv := &http.Server{Handler: http.HandlerFunc(r.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return r
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		http.Error(w, "only POST /v1/traces", http.StatusNotFound)
		return
	}
	fail := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		r.mu.Lock()
		r.errs = append(r.errs, msg)
		r.mu.Unlock()
		http.Error(w, msg, http.StatusBadRequest)
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		fail("content type %q, want application/x-protobuf", ct)
		return
	}
	if enc := req.Header.Get("Content-Encoding"); enc != "" {
		fail("content encoding %q not supported", enc)
		return
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, maxRequest+1))
	if err != nil || len(body) > maxRequest {
		fail("body: %v (%d bytes)", err, len(body))
		return
	}
	var msg coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &msg); err != nil {
		fail("protobuf: %v", err)
		return
	}
	spans := convert(&msg)
	r.mu.Lock()
	r.spans = append(r.spans, spans...)
	r.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// convert turns a request into Spans as Parse would give them.
func convert(msg *coltracepb.ExportTraceServiceRequest) []Span {
	var out []Span
	for _, rs := range msg.GetResourceSpans() {
		res := attrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			scope := Scope{Name: ss.GetScope().GetName(), Version: ss.GetScope().GetVersion()}
			for _, s := range ss.GetSpans() {
				out = append(out, Span{
					Resource:   res,
					Scope:      scope,
					TraceID:    hex.EncodeToString(s.GetTraceId()),
					ParentID:   hex.EncodeToString(s.GetParentSpanId()),
					SpanID:     hex.EncodeToString(s.GetSpanId()),
					Name:       s.GetName(),
					Kind:       kindName(s.GetKind()),
					Start:      time.Unix(0, int64(s.GetStartTimeUnixNano())).UTC(),
					End:        time.Unix(0, int64(s.GetEndTimeUnixNano())).UTC(),
					StatusCode: strings.TrimPrefix(s.GetStatus().GetCode().String(), "STATUS_CODE_"),
					Attributes: attrs(s.GetAttributes()),
				})
			}
		}
	}
	return out
}

// kindName is the debug exporter's name of a span kind: SPAN_KIND_SERVER
// -> Server.
func kindName(k tracepb.Span_SpanKind) string {
	s := strings.ToLower(strings.TrimPrefix(k.String(), "SPAN_KIND_"))
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// attrs keeps attribute values as text, as Parse does.
func attrs(kvs []*commonpb.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		v := kv.GetValue()
		var s string
		switch v.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			s = v.GetStringValue()
		case *commonpb.AnyValue_IntValue:
			s = fmt.Sprint(v.GetIntValue())
		case *commonpb.AnyValue_DoubleValue:
			s = fmt.Sprint(v.GetDoubleValue())
		case *commonpb.AnyValue_BoolValue:
			s = fmt.Sprint(v.GetBoolValue())
		default:
			s = v.String()
		}
		m[kv.GetKey()] = s
	}
	return m
}

// Received returns the spans received so far, and an error for the first
// request the Receiver refused.
func (r *Receiver) Received() (*Data, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := &Data{Spans: append([]Span(nil), r.spans...)}
	if len(r.errs) > 0 {
		return d, fmt.Errorf("receiver refused a request: %s", r.errs[0])
	}
	return d, nil
}

// Wait polls Received every 100 ms until cond holds and returns that Data;
// after timeout, or on a refused request, it fails t naming what.
func (r *Receiver) Wait(t testing.TB, timeout time.Duration, what string, cond func(*Data) bool) *Data {
	t.Helper()
	return wait(t, timeout, what, r.Received, cond, func() string { return "" })
}

// SPDX-License-Identifier: Apache-2.0

package otelcoltest

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// sendSpan sends, with the OpenTelemetry Go SDK over proto to endpoint, a
// root span "span-<proto>" of service "svc-<proto>" lasting i+1 seconds
// with attribute i, and its child "child-<proto>" of kind Server.
func sendSpan(t *testing.T, proto, endpoint string, i int) {
	t.Helper()
	ctx := context.Background()
	host := strings.TrimPrefix(endpoint, "http://")
	var client otlptrace.Client
	if proto == GRPC {
		client = otlptracegrpc.NewClient(otlptracegrpc.WithEndpoint(host), otlptracegrpc.WithInsecure())
	} else {
		client = otlptracehttp.NewClient(otlptracehttp.WithEndpoint(host), otlptracehttp.WithInsecure())
	}
	exp, err := otlptrace.New(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "svc-"+proto))))
	start := time.Unix(1700000000, 0)
	pctx, s := tp.Tracer("otelcoltest").Start(ctx, "span-"+proto, trace.WithTimestamp(start))
	s.SetAttributes(attribute.Int("i", i))
	_, c := tp.Tracer("otelcoltest").Start(pctx, "child-"+proto, trace.WithTimestamp(start), trace.WithSpanKind(trace.SpanKindServer))
	c.End(trace.WithTimestamp(start.Add(time.Millisecond)))
	s.End(trace.WithTimestamp(start.Add(time.Duration(i+1) * time.Second)))
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatalf("%s: %v", proto, err)
	}
}

// checkSent checks what sendSpan sent, as received.
func checkSent(t *testing.T, d *Data, proto string, i int) {
	t.Helper()
	got, kids := d.SpansNamed("span-"+proto), d.SpansNamed("child-"+proto)
	if len(got) != 1 || got[0].Resource["service.name"] != "svc-"+proto || got[0].Duration() != time.Duration(i+1)*time.Second ||
		got[0].Attributes["i"] != strconv.Itoa(i) || got[0].Scope.Name != "otelcoltest" || len(got[0].TraceID) != 32 || got[0].ParentID != "" || got[0].Kind != "Internal" {
		t.Fatalf("%s: %+v", proto, got)
	}
	if len(kids) != 1 || kids[0].ParentID != got[0].SpanID || kids[0].TraceID != got[0].TraceID || kids[0].Kind != "Server" || kids[0].Duration() != time.Millisecond {
		t.Errorf("%s child: %+v", proto, kids)
	}
}

// TestStart runs a collector and sends it spans over each protocol; Wait
// must return them as sent.
func TestStart(t *testing.T) {
	c := Start(t)
	for i, proto := range []string{GRPC, HTTP} {
		sendSpan(t, proto, c.Endpoint(proto), i)
	}
	d := c.Wait(t, 20*time.Second, "four spans", func(d *Data) bool { return len(d.Spans) == 4 })
	for i, proto := range []string{GRPC, HTTP} {
		checkSent(t, d, proto, i)
	}
}

// TestReceiver sends the same spans over OTLP/HTTP to the in-process
// Receiver: it must give the same Spans as the collector's output.
func TestReceiver(t *testing.T) {
	r := StartReceiver(t)
	sendSpan(t, HTTP, r.Endpoint, 1)
	checkSent(t, r.Wait(t, 20*time.Second, "two spans", func(d *Data) bool { return len(d.Spans) == 2 }), HTTP, 1)
}

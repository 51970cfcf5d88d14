package otelcoltest

import (
	"context"
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

// TestStart runs a collector and sends it one span over each protocol with
// the OpenTelemetry Go SDK; Wait must return both, as sent.
func TestStart(t *testing.T) {
	c := Start(t)
	ctx := context.Background()
	start := time.Unix(1700000000, 0)
	for i, proto := range []string{GRPC, HTTP} {
		host := strings.TrimPrefix(c.Endpoint(proto), "http://")
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
		_, s := tp.Tracer("otelcoltest").Start(ctx, "span-"+proto, trace.WithTimestamp(start))
		s.SetAttributes(attribute.Int("i", i))
		s.End(trace.WithTimestamp(start.Add(time.Duration(i+1) * time.Second)))
		if err := tp.Shutdown(ctx); err != nil {
			t.Fatalf("%s: %v", proto, err)
		}
	}
	d := c.Wait(t, 20*time.Second, "two spans", func(d *Data) bool { return len(d.Spans) == 2 })
	for i, proto := range []string{GRPC, HTTP} {
		got := d.SpansNamed("span-" + proto)
		if len(got) != 1 || got[0].Resource["service.name"] != "svc-"+proto || got[0].Duration() != time.Duration(i+1)*time.Second ||
			got[0].Attributes["i"] != string(rune('0'+i)) || got[0].Scope.Name != "otelcoltest" || len(got[0].TraceID) != 32 {
			t.Errorf("%s: %+v", proto, got)
		}
	}
}

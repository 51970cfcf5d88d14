// SPDX-License-Identifier: Apache-2.0

package spans

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/kernel-exporter/kernel_exporter/internal/otlpenv"
	"github.com/kernel-exporter/kernel_exporter/internal/printable"
)

// DefaultService is the service.name of spans whose config sets no service
// when $OTEL_SERVICE_NAME is empty too.
const DefaultService = "kernel_exporter"

// ConfigAttribute is the attribute naming the config a span came from
// (ebpf_exporter's name for it, so that queries carry over).
const ConfigAttribute = "ebpf_exporter.config"

// scopeName is the instrumentation scope of record spans.
const scopeName = "github.com/kernel-exporter/kernel_exporter/spans"

// Sink exports the spans of every config. It builds its OTLP exporter when
// the first config with spans starts (so nothing connects anywhere while
// no config has a tracing section), from the environment:
//
//	OTEL_TRACES_EXPORTER        otlp (default), console (JSON lines on
//	                            stdout) or none (spans are decoded and
//	                            counted, not sent)
//	OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, OTEL_EXPORTER_OTLP_PROTOCOL
//	                            http/protobuf (default) or grpc
//	OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT, _HEADERS, _TIMEOUT, _INSECURE,
//	_COMPRESSION, _CERTIFICATE, _CLIENT_KEY, _CLIENT_CERTIFICATE
//	                            read by the OTLP exporter itself
//	OTEL_BSP_MAX_QUEUE_SIZE, OTEL_BSP_MAX_EXPORT_BATCH_SIZE,
//	OTEL_BSP_SCHEDULE_DELAY, OTEL_BSP_EXPORT_TIMEOUT
//	                            the queue's bounds (see DefaultQueueSize)
//	OTEL_SERVICE_NAME           service.name of spans whose config sets none
//
// One TracerProvider per service name shares the exporter. A Sink is a
// prometheus.Collector of its self-metrics. Its methods are safe for
// concurrent use.
type Sink struct {
	log *slog.Logger

	mu        sync.Mutex
	started   bool
	initErr   error
	proto     string // "grpc", "http/protobuf", or "" for none
	batch     *batcher
	ids       *idGenerator
	providers map[string]*sdktrace.TracerProvider
	tracers   map[string]trace.Tracer
	readers   map[*Reader]struct{}
	lastErr   time.Time
}

// Destination says where spans go under the environment the Sink reads:
// "OTLP http/protobuf to http://collector:4318 (OTEL_EXPORTER_OTLP_ENDPOINT)",
// "stdout (OTEL_TRACES_EXPORTER=console)", or why they go nowhere. set is
// false when nothing sends them anywhere on purpose: OTEL_TRACES_EXPORTER
// is none, or it is otlp (the default) with no
// OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT, so that the SDK tries its default,
// localhost, where usually nothing listens. An endpoint is shown without
// its user information; a variable with a bad value is named, set false.
func Destination() (where string, set bool) {
	switch v := os.Getenv("OTEL_TRACES_EXPORTER"); v {
	case "", "otlp":
	case "none":
		return "nowhere: OTEL_TRACES_EXPORTER=none (spans are decoded and counted, not sent)", false
	case "console":
		return "stdout (OTEL_TRACES_EXPORTER=console)", true
	default:
		return "nowhere: OTEL_TRACES_EXPORTER=" + printable.Quote(v, 32) + " is not otlp, console or none", false
	}
	proto, err := otlpenv.Protocol("TRACES")
	if err != nil {
		return "nowhere: " + err.Error(), false
	}
	name, value := otlpenv.Endpoint("TRACES")
	if name == "" {
		port := "4318"
		if proto == otlpenv.GRPC {
			port = "4317"
		}
		return "nowhere set: neither OTEL_EXPORTER_OTLP_TRACES_ENDPOINT nor OTEL_EXPORTER_OTLP_ENDPOINT is set, so the OTLP default, localhost:" + port + ", is tried", false
	}
	if u, err := url.Parse(value); err == nil && u.Host != "" {
		u.User = nil
		value = u.Redacted()
	} else {
		value = printable.Quote(value, 64)
	}
	return "OTLP " + proto + " to " + value + " (" + name + ")", true
}

// NewSink returns a Sink that has built nothing yet.
func NewSink(log *slog.Logger) *Sink {
	if log == nil {
		log = slog.Default()
	}
	return &Sink{log: log, providers: map[string]*sdktrace.TracerProvider{}, tracers: map[string]trace.Tracer{}, readers: map[*Reader]struct{}{}}
}

// init builds the exporter once. The caller holds s.mu.
func (s *Sink) init() error {
	if s.started {
		return s.initErr
	}
	s.started = true
	s.ids = newIDGenerator()
	s.initErr = func() error {
		cfg, err := batchConfigFromEnv()
		if err != nil {
			return err
		}
		switch v := os.Getenv("OTEL_TRACES_EXPORTER"); v {
		case "", "otlp":
		case "none":
			s.log.Info("spans are decoded but not exported", "OTEL_TRACES_EXPORTER", v)
			return nil
		case "console":
			exp, err := stdouttrace.New(stdouttrace.WithWriter(os.Stdout))
			if err != nil {
				return fmt.Errorf("console span exporter: %w", err)
			}
			s.proto = "console"
			s.batch = newBatcher(exp, cfg, s.exportError)
			s.log.Info("writing spans to stdout as JSON", "OTEL_TRACES_EXPORTER", v)
			return nil
		default:
			return fmt.Errorf("OTEL_TRACES_EXPORTER=%s: want otlp, console or none", strconv.Quote(v))
		}
		proto, err := otlpenv.Protocol("TRACES")
		if err != nil {
			return err
		}
		if err := otlpenv.CheckTLSFiles("TRACES"); err != nil {
			return err
		}
		var exp sdktrace.SpanExporter
		if proto == otlpenv.GRPC {
			exp, err = otlptracegrpc.New(context.Background())
		} else {
			exp, err = otlptracehttp.New(context.Background())
		}
		if err != nil {
			return fmt.Errorf("OTLP %s span exporter: %w", proto, err)
		}
		s.proto = proto
		s.batch = newBatcher(exp, cfg, s.exportError)
		s.log.Info("exporting spans over OTLP", "protocol", proto, "queue", cfg.queue, "batch", cfg.batch, "delay", cfg.delay)
		return nil
	}()
	return s.initErr
}

func (s *Sink) exportError(err error) {
	s.mu.Lock()
	now := time.Now()
	quiet := now.Sub(s.lastErr) < time.Minute
	if !quiet {
		s.lastErr = now
	}
	s.mu.Unlock()
	if !quiet {
		s.log.Warn("span export failed (spans dropped; counted in kernel_exporter_spans_dropped_total)", "protocol", s.proto, "err", err)
	}
}

// tracer returns the tracer of service (empty: $OTEL_SERVICE_NAME, then
// DefaultService). The caller holds s.mu.
func (s *Sink) tracer(service string) trace.Tracer {
	if service == "" {
		service = os.Getenv("OTEL_SERVICE_NAME")
	}
	if service == "" {
		service = DefaultService
	}
	if t, ok := s.tracers[service]; ok {
		return t
	}
	opts := []sdktrace.TracerProviderOption{
		sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithIDGenerator(s.ids),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", service))),
	}
	if s.batch != nil {
		opts = append(opts, sdktrace.WithSpanProcessor(s.batch))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	s.providers[service] = tp
	t := tp.Tracer(scopeName)
	s.tracers[service] = t
	return t
}

// emit makes the span of a decoded record.
func emit(t trace.Tracer, config string, r *Record) {
	psc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: r.TraceID, SpanID: r.ParentID, TraceFlags: trace.FlagsSampled, Remote: r.ParentID.IsValid()})
	ctx := trace.ContextWithSpanContext(context.Background(), psc)
	ctx = context.WithValue(ctx, idsKey{}, recordIDs{trace: r.TraceID, span: r.SpanID})
	start := time.Now()
	if r.HasStart {
		start = wallTime(r.Start)
	}
	attrs := append(r.Attrs, attribute.String(ConfigAttribute, config))
	_, span := t.Start(ctx, r.Name, trace.WithTimestamp(start), trace.WithAttributes(attrs...))
	span.End(trace.WithTimestamp(start.Add(time.Duration(r.Duration))))
}

// Shutdown exports the queued spans and closes the exporter, waiting until
// ctx is done at most. Readers should be closed first.
func (s *Sink) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	b := s.batch
	s.batch = nil
	s.mu.Unlock()
	if b == nil {
		return nil
	}
	return b.Shutdown(ctx)
}

// ErrNoSpans is returned by Start for a nil plan.
var ErrNoSpans = errors.New("spans: config has no tracing spans")

var (
	spansDesc = prometheus.NewDesc("kernel_exporter_spans_total",
		"Ring buffer records turned into spans, by config and ring buffer.", []string{"config", "ringbuf"}, nil)
	spanErrorsDesc = prometheus.NewDesc("kernel_exporter_span_errors_total",
		"Ring buffer records that did not become spans: reason short_record or long_record (size unlike the labels'), decoder (a decoder failed).", []string{"config", "ringbuf", "reason"}, nil)
	spansDroppedDesc = prometheus.NewDesc("kernel_exporter_spans_dropped_total",
		"Spans not delivered: reason queue_full (the export queue was full) or export_failed (the OTLP export failed).", []string{"reason"}, nil)
	spansExportedDesc = prometheus.NewDesc("kernel_exporter_spans_exported_total",
		"Spans the OTLP endpoint accepted.", nil, nil)
)

// Describe implements prometheus.Collector.
func (s *Sink) Describe(ch chan<- *prometheus.Desc) {
	ch <- spansDesc
	ch <- spanErrorsDesc
	ch <- spansDroppedDesc
	ch <- spansExportedDesc
}

// Collect implements prometheus.Collector: a config's series exist while
// it runs; the drop and export counters once the exporter is built.
func (s *Sink) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for r := range s.readers {
		for _, rr := range r.rings {
			ch <- prometheus.MustNewConstMetric(spansDesc, prometheus.CounterValue, float64(rr.spans.Load()), r.config, rr.l.RingBuf)
			for _, e := range []struct {
				reason string
				n      uint64
			}{{ReasonShort, rr.short.Load()}, {ReasonLong, rr.long.Load()}, {ReasonDecoder, rr.decErr.Load()}} {
				ch <- prometheus.MustNewConstMetric(spanErrorsDesc, prometheus.CounterValue, float64(e.n), r.config, rr.l.RingBuf, e.reason)
			}
		}
	}
	if b := s.batch; b != nil {
		ch <- prometheus.MustNewConstMetric(spansDroppedDesc, prometheus.CounterValue, float64(b.dropQueue.Load()), "queue_full")
		ch <- prometheus.MustNewConstMetric(spansDroppedDesc, prometheus.CounterValue, float64(b.dropExport.Load()), "export_failed")
		ch <- prometheus.MustNewConstMetric(spansExportedDesc, prometheus.CounterValue, float64(b.exported.Load()))
	}
}

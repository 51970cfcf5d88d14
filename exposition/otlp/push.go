// SPDX-License-Identifier: Apache-2.0

// Package otlp pushes every metric the exporter serves to an OpenTelemetry
// Protocol (OTLP) endpoint, over gRPC or HTTP/protobuf, for fleets that
// run an OpenTelemetry pipeline rather than Prometheus scrapes.
//
// A push is one more reader of the snapshots a scrape reads
// (exposition.Source, that is collector.Status.Read): a push and a scrape
// at the same time share one read of each config's maps, and max_series
// and the other read limits apply alike. It then gathers the exporter's
// own metrics (kernel_exporter_*, and process_* and go_* unless
// --web.disable-exporter-metrics) as a scrape does, converts both (see
// converter.family and converter.gathered) and hands them to the
// OpenTelemetry Go SDK's OTLP exporters, which encode and send them.
//
// Bounds: pushes run one at a time, one every Options.Interval, in their
// own goroutine; ticks due while a push runs start at most one more. Each
// push has Options.Timeout for all its requests. A push is cut into
// requests of at most MaxRequestBytes (estimated). Failures are counted in
// kernel_exporter_otlp_exports_total{result="failure"} and logged at most
// once per FailureLogEvery. Scrapes never wait for a push beyond the map
// read they may share with it.
package otlp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/kernel-exporter/kernel_exporter/exposition"
	"github.com/kernel-exporter/kernel_exporter/internal/otlpenv"
)

// Push interval and timeout bounds (--otlp.metrics.interval,
// --otlp.metrics.timeout).
const (
	DefaultInterval = 30 * time.Second
	MinInterval     = time.Second
	MaxInterval     = time.Hour
	DefaultTimeout  = 10 * time.Second
)

// MaxRequestBytes bounds the estimated encoded size of one export request:
// a push with more data points is sent as several requests (a metric's
// points may be split among them), each well under the 4 MiB that gRPC
// servers, the OpenTelemetry Collector's among them, accept by default.
// A single data point larger than this (a histogram with thousands of
// long label values) is sent alone.
const MaxRequestBytes = 1 << 20

// FailureLogEvery is the least time between two log lines about failed
// pushes; the failures in between are counted in the next line.
const FailureLogEvery = time.Minute

// ScopeName is the instrumentation scope of every pushed metric.
const ScopeName = "github.com/kernel-exporter/kernel_exporter"

// Exporter sends one export request. The OTLP exporters of the
// OpenTelemetry Go SDK (otlpmetricgrpc, otlpmetrichttp) are Exporters;
// tests use their own.
type Exporter interface {
	Export(context.Context, *metricdata.ResourceMetrics) error
	Shutdown(context.Context) error
}

// Options configure a Pusher.
type Options struct {
	// Interval between pushes: MinInterval to MaxInterval (0:
	// DefaultInterval).
	Interval time.Duration
	// Timeout of a push, all its requests together (0: DefaultTimeout);
	// cut to Interval when longer.
	Timeout time.Duration
	// Exporter sends the requests; nil: NewExporter, from the
	// environment.
	Exporter Exporter
	// Resource describes the exporter; nil: NewResource.
	Resource *resource.Resource
	// Version is the exporter's version (service.version and the scope's
	// version).
	Version string
	// Registerer, when set, gets the push self-metrics.
	Registerer prometheus.Registerer
	Logger     *slog.Logger
}

// CheckOptions returns an error naming the flag when the interval or the
// timeout is out of range.
func CheckOptions(interval, timeout time.Duration) error {
	if interval < MinInterval || interval > MaxInterval {
		return fmt.Errorf("--otlp.metrics.interval %v: must be %v to %v", interval, MinInterval, MaxInterval)
	}
	if timeout <= 0 {
		return fmt.Errorf("--otlp.metrics.timeout %v: must be positive", timeout)
	}
	return nil
}

// NewExporter returns the OTLP exporter of otlpenv.Protocol("METRICS"). The exporters read
// the rest of their configuration from the standard variables:
// OTEL_EXPORTER_OTLP_[METRICS_]ENDPOINT, _HEADERS, _INSECURE,
// _CERTIFICATE, _CLIENT_CERTIFICATE, _CLIENT_KEY, _COMPRESSION and
// _TIMEOUT. The certificate and key files must first be regular files of
// at most otlpenv.MaxTLSFile (otlpenv.CheckTLSFiles: the error names the
// variable and the path). Neither exporter connects before its first export.
func NewExporter(ctx context.Context) (Exporter, string, error) {
	proto, err := otlpenv.Protocol("METRICS")
	if err != nil {
		return nil, "", err
	}
	if err := otlpenv.CheckTLSFiles("METRICS"); err != nil {
		return nil, "", err
	}
	var exp Exporter
	if proto == otlpenv.GRPC {
		exp, err = otlpmetricgrpc.New(ctx)
	} else {
		exp, err = otlpmetrichttp.New(ctx)
	}
	if err != nil {
		return nil, "", fmt.Errorf("OTLP %s metrics exporter: %w", proto, err)
	}
	return exp, proto, nil
}

// NewResource returns the resource of pushed metrics: service.name
// kernel_exporter, service.version, host.name, then the attributes of
// OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME, which override those.
func NewResource(ctx context.Context, version string) (*resource.Resource, error) {
	return resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "kernel_exporter"), attribute.String("service.version", version)),
		resource.WithHost(),
		resource.WithFromEnv())
}

// Pusher pushes the metrics of a Source and a Gatherer.
type Pusher struct {
	src      exposition.Source
	g        prometheus.Gatherer
	exp      Exporter
	res      *resource.Resource
	scope    instrumentation.Scope
	interval time.Duration
	timeout  time.Duration
	log      *slog.Logger
	start    time.Time
	now      func() time.Time

	exports  *prometheus.CounterVec
	duration prometheus.Gauge

	busy sync.Mutex // held by the push in progress

	logMu      sync.Mutex
	lastLog    time.Time
	suppressed int
	failing    bool
}

// ErrBusy is returned by Push while another push runs.
var ErrBusy = errors.New("the previous push is still running")

// New returns a Pusher of src's snapshots and g's families (the exporter's
// own metrics), with the self-metrics
//
//	kernel_exporter_otlp_exports_total{result}        pushes by result: success, failure, skipped
//	kernel_exporter_otlp_export_duration_seconds      duration of the last push (read, gather, convert, send)
//
// registered in o.Registerer. Errors: the protocol or exporter set up from
// the environment, the resource, or the registration.
func New(ctx context.Context, src exposition.Source, g prometheus.Gatherer, o Options) (*Pusher, error) {
	p := &Pusher{src: src, g: g, exp: o.Exporter, res: o.Resource, log: o.Logger,
		interval: o.Interval, timeout: o.Timeout, start: time.Now(), now: time.Now,
		scope: instrumentation.Scope{Name: ScopeName, Version: o.Version}}
	if p.interval == 0 {
		p.interval = DefaultInterval
	}
	if p.timeout == 0 {
		p.timeout = DefaultTimeout
	}
	if err := CheckOptions(p.interval, p.timeout); err != nil {
		return nil, err
	}
	p.timeout = min(p.timeout, p.interval)
	if p.log == nil {
		p.log = slog.Default()
	}
	if p.res == nil {
		r, err := NewResource(ctx, o.Version)
		if err != nil && r == nil {
			return nil, fmt.Errorf("OTLP resource: %w", err)
		}
		if err != nil {
			// A partial resource (an unparsable OTEL_RESOURCE_ATTRIBUTES
			// entry, say) is still used.
			p.log.Warn("OTLP resource: some attributes left out", "err", err)
		}
		p.res = r
	}
	p.exports = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kernel_exporter_otlp_exports_total",
		Help: "Pushes of metrics over OTLP, by result: success, failure (a request failed or timed out), skipped (due while the previous push was still running).",
	}, []string{"result"})
	for _, r := range []string{"success", "failure", "skipped"} {
		p.exports.WithLabelValues(r)
	}
	p.duration = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "kernel_exporter_otlp_export_duration_seconds",
		Help: "Duration of the last push of metrics over OTLP: map reads, conversion and every request.",
	})
	if o.Registerer != nil {
		for _, c := range []prometheus.Collector{p.exports, p.duration} {
			if err := o.Registerer.Register(c); err != nil {
				return nil, err
			}
		}
	}
	if p.exp == nil {
		exp, proto, err := NewExporter(ctx)
		if err != nil {
			return nil, err
		}
		p.exp = exp
		p.log.Info("pushing metrics over OTLP", "protocol", proto, "interval", p.interval, "timeout", p.timeout)
	}
	return p, nil
}

// Run pushes every interval until ctx is done, then shuts the exporter
// down (at most Timeout). Pushes run one after the other in Run's
// goroutine, so they never overlap; of the ticks that come during a push,
// one starts the next push at once, the others are dropped and counted as
// skipped.
func (p *Pusher) Run(ctx context.Context) {
	t := time.NewTicker(p.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), p.timeout)
			_ = p.exp.Shutdown(sctx)
			cancel()
			return
		case <-t.C:
			began := time.Now()
			_ = p.Push(ctx)
			// The ticker drops all but one of the ticks that came during
			// a long push.
			if n := missedTicks(time.Since(began), p.interval); n > 0 {
				p.exports.WithLabelValues("skipped").Add(float64(n))
			}
		}
	}
}

// missedTicks is the number of ticks of a ticker of period interval that
// a push lasting took made the ticker drop: of the ticks due during the
// push, the ticker keeps one (a push starts right after), the rest are
// lost.
func missedTicks(took, interval time.Duration) int {
	if interval <= 0 || took < 2*interval {
		return 0
	}
	return int(took/interval) - 1
}

// Push reads, converts and sends every metric once, within the timeout,
// and counts the result. It returns ErrBusy at once when another push is
// running, or the first error of its requests.
func (p *Pusher) Push(ctx context.Context) error {
	if !p.busy.TryLock() {
		p.exports.WithLabelValues("skipped").Inc()
		return ErrBusy
	}
	defer p.busy.Unlock()
	began := time.Now()
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	err := p.push(ctx)
	p.duration.Set(time.Since(began).Seconds())
	p.result(err)
	return err
}

func (p *Pusher) push(ctx context.Context) error {
	ms, gerr := p.Collect()
	var errs []error
	if gerr != nil {
		errs = append(errs, gerr)
	}
	for _, batch := range Split(ms, MaxRequestBytes) {
		rm := &metricdata.ResourceMetrics{Resource: p.res,
			ScopeMetrics: []metricdata.ScopeMetrics{{Scope: p.scope, Metrics: batch}}}
		if err := p.exp.Export(ctx, rm); err != nil {
			errs = append(errs, err)
			if ctx.Err() != nil {
				break // the timeout is spent: the other requests would fail too
			}
		}
	}
	return errors.Join(errs...)
}

// Collect reads the source, then gathers (so that the self-metrics
// describe this read, as in a scrape), and converts both: the snapshots'
// families in config order, then the gathered ones. Families whose read
// failed are left out. The error is the gatherer's; what it gathered is
// converted still.
func (p *Pusher) Collect() ([]metricdata.Metrics, error) {
	snaps := p.src.Read()
	var mfsErr error
	mfs, err := p.g.Gather()
	if err != nil {
		mfsErr = fmt.Errorf("gathering self-metrics: %w", err)
	}
	c := converter{now: p.now(), procStart: p.start}
	var ms []metricdata.Metrics
	for _, s := range snaps {
		for _, f := range s.Families {
			if m, ok := c.family(s, f); ok {
				ms = append(ms, m)
			}
		}
	}
	for _, mf := range mfs {
		if m, ok := c.gathered(mf); ok {
			ms = append(ms, m)
		}
	}
	return ms, mfsErr
}

// result counts a push and logs failures, at most one line per
// FailureLogEvery, and the first success after failures.
func (p *Pusher) result(err error) {
	p.logMu.Lock()
	defer p.logMu.Unlock()
	if err == nil {
		p.exports.WithLabelValues("success").Inc()
		if p.failing {
			p.log.Info("OTLP metrics push succeeded again", "failures_not_logged", p.suppressed)
			p.failing, p.suppressed = false, 0
		}
		return
	}
	p.exports.WithLabelValues("failure").Inc()
	p.failing = true
	now := p.now()
	if !p.lastLog.IsZero() && now.Sub(p.lastLog) < FailureLogEvery {
		p.suppressed++
		return
	}
	p.log.Error("OTLP metrics push failed", "err", err, "failures_not_logged", p.suppressed)
	p.lastLog, p.suppressed = now, 0
}

// SPDX-License-Identifier: Apache-2.0

package compare

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/kernel-exporter/kernel_exporter/internal/httpclient"
	"github.com/kernel-exporter/kernel_exporter/internal/printable"
)

// Defaults and limits of the client.
const (
	DefaultMaxSeries   = 50000
	MaxMaxSeries       = 10_000_000
	DefaultMaxBytes    = 32 << 20 // 32 MiB a response
	DefaultTimeout     = 30 * time.Second
	DefaultConcurrency = 4
)

// ErrTooLarge is returned (wrapped) when a response passes
// Options.MaxBytes.
var ErrTooLarge = errors.New("response too large")

// ErrTooManySeries is returned (wrapped) when one answer holds more than
// Options.MaxSeries series.
var ErrTooManySeries = errors.New("too many series")

// ClientOptions say how to reach Prometheus (or anything serving its HTTP
// query API: Thanos, Mimir, VictoriaMetrics).
type ClientOptions struct {
	// URL of Prometheus, as http://prometheus:9090 (a path prefix is kept).
	URL string
	// Options: authentication and TLS (package httpclient).
	httpclient.Options
	// MaxBytes bounds each response body (DefaultMaxBytes when 0).
	MaxBytes int64
	// Transport, when set, carries the requests instead of the one built
	// from the options above (tests, benchmarks).
	Transport http.RoundTripper
}

// newAPI builds the query API client: package httpclient's transport
// (auth and TLS) under one that bounds every body.
func newAPI(o ClientOptions, maxSeries int) (v1.API, error) {
	u, err := url.Parse(o.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--prometheus.url %s: want http:// or https://host[:port][/path]", printable.Quote(o.URL, 256))
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	rt := o.Transport
	if rt == nil {
		var err error
		if rt, err = httpclient.RoundTripper(o.Options, "--prometheus.", "kernel_exporter_compare"); err != nil {
			return nil, err
		}
	}
	c, err := api.NewClient(api.Config{Address: o.URL, RoundTripper: limitTransport{rt, o.MaxBytes, maxSeries}})
	if err != nil {
		return nil, err
	}
	return v1.NewAPI(c), nil
}

// limitTransport fails a response whose body passes max bytes.
type limitTransport struct {
	rt        http.RoundTripper
	max       int64
	maxSeries int
}

func (l limitTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := l.rt.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	if resp.ContentLength > l.max {
		resp.Body.Close()
		return nil, fmt.Errorf("%w: %d bytes announced, more than %d (--query.max-bytes)", ErrTooLarge, resp.ContentLength, l.max)
	}
	resp.Body = &limitBody{rc: resp.Body, left: l.max, max: l.max, maxSeries: l.maxSeries}
	return resp, nil
}

// seriesKey opens each series of a query answer as Prometheus writes it.
var seriesKey = []byte(`"metric":{`)

type limitBody struct {
	rc        io.ReadCloser
	left, max int64
	// Series are counted in the bytes as they come (occurrences of
	// seriesKey, a label named metric aside), so that an answer of too
	// many series fails before it is decoded: decoding a million takes
	// seconds and hundreds of MB.
	series, maxSeries int
	tail              []byte // the last len(seriesKey)-1 bytes read
}

// count adds the series keys in b, one straddling the previous read
// included.
func (b *limitBody) count(p []byte) {
	if b.maxSeries <= 0 {
		return
	}
	k := len(seriesKey) - 1
	if len(b.tail) > 0 {
		joint := append(append([]byte(nil), b.tail...), p[:min(len(p), k)]...)
		b.series += bytes.Count(joint, seriesKey)
	}
	b.series += bytes.Count(p, seriesKey)
	b.tail = append(b.tail, p[max(0, len(p)-k):]...)
	if len(b.tail) > k {
		b.tail = b.tail[len(b.tail)-k:]
	}
}

func (b *limitBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		var one [1]byte
		if n, _ := b.rc.Read(one[:]); n > 0 {
			return 0, fmt.Errorf("%w: more than %d bytes (--query.max-bytes)", ErrTooLarge, b.max)
		}
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return 0, fmt.Errorf("%w: more than %d bytes (--query.max-bytes)", ErrTooLarge, b.max)
	}
	b.count(p[:n])
	if b.maxSeries > 0 && b.series > b.maxSeries {
		return 0, fmt.Errorf("%w: more than %d series in one answer (--query.max-series)", ErrTooManySeries, b.maxSeries)
	}
	return n, err
}

func (b *limitBody) Close() error { return b.rc.Close() }

// querier runs instant queries with a timeout each and turns every
// failure into a short, printable error naming the query.
type querier struct {
	api     v1.API
	timeout time.Duration
}

// vector runs q at ts and returns its samples; anything but a vector is an
// error.
func (q querier) vector(ctx context.Context, query string, ts time.Time) (model.Vector, error) {
	ctx, cancel := context.WithTimeout(ctx, q.timeout)
	defer cancel()
	v, _, err := q.api.Query(ctx, query, ts, v1.WithTimeout(q.timeout))
	if err != nil {
		if ctx.Err() == context.DeadlineExceeded || errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("query %s: no answer within %v (--query.timeout)", printable.Cut(query, 200), q.timeout)
		}
		return nil, fmt.Errorf("query %s: %s", printable.Cut(query, 200), shortError(err))
	}
	vec, ok := v.(model.Vector)
	if !ok {
		return nil, fmt.Errorf("query %s: got a %s, want a vector", printable.Cut(query, 200), valueType(v))
	}
	return vec, nil
}

func valueType(v model.Value) string {
	if v == nil {
		return "null"
	}
	return v.Type().String()
}

// shortError is err's text made printable and cut: a server's error
// message or a JSON decoder's can quote the body.
func shortError(err error) string {
	var apiErr *v1.Error
	if errors.As(err, &apiErr) {
		msg := apiErr.Msg
		if apiErr.Type == v1.ErrBadResponse {
			// The JSON decoder's message goes on with the bytes around
			// the error: not the answer's content.
			if i := strings.Index(msg, ", error found in"); i >= 0 {
				msg = msg[:i] + " (not a Prometheus API answer)"
			}
		}
		return printable.Cut(fmt.Sprintf("%s: %s", apiErr.Type, msg), 300)
	}
	return printable.Cut(err.Error(), 300)
}

// SPDX-License-Identifier: Apache-2.0

package exposition

import (
	"errors"
	"log/slog"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/kernel-exporter/kernel_exporter/collector"
)

// Source gives the snapshots of a scrape: *collector.Status reads every
// config that is up.
type Source interface {
	Read() []*collector.Snapshot
}

// HandlerOptions configure Handler.
type HandlerOptions struct {
	// MaxRequests bounds the scrapes served at once; more get 503. 0 means
	// no limit. Scrapes that share an encoding (see Handler) count each.
	MaxRequests int
	// Registerer, when set, gets kernel_exporter_exposition_errors_total.
	Registerer prometheus.Registerer
	Logger     *slog.Logger
}

// Handler serves one exposition per request: the snapshots of src, read
// first, then the families of g (the exporter's own metrics, which
// describe the reads just done), in the format negotiated from Accept
// (text 0.0.4, OpenMetrics 1.0.0 or delimited protobuf) and the
// compression negotiated from Accept-Encoding (zstd, gzip or none).
//
// Scrapes that arrive while another one with the same format and
// compression is being encoded share its read and its encoding: they are
// sent the same bytes (see share). A family whose read failed is left out,
// logged and counted in kernel_exporter_exposition_errors_total{cause=
// "read"}; a failed Gather is counted with cause "gather" and what it did
// gather is still served; a write that fails (the client went away) with
// cause "write".
//
// Registering the error counter fails only when reg already holds a
// different collector under that name; Handler then returns that error.
func Handler(src Source, g prometheus.Gatherer, o HandlerOptions) (http.Handler, error) {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	errs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kernel_exporter_exposition_errors_total",
		Help: "Scrapes that left something out or could not be written, by cause: read (a map read failed), gather (an exporter self-metric failed), write (sending failed).",
	}, []string{"cause"})
	for _, c := range []string{"read", "gather", "write"} {
		errs.WithLabelValues(c)
	}
	if o.Registerer != nil {
		if err := o.Registerer.Register(errs); err != nil {
			are, ok := err.(prometheus.AlreadyRegisteredError)
			if !ok {
				return nil, err
			}
			errs = are.ExistingCollector.(*prometheus.CounterVec)
		}
	}
	h := &handler{src: src, g: g, log: log, errs: errs, flights: map[string]*broadcast{}}
	if o.MaxRequests > 0 {
		h.inFlight = make(chan struct{}, o.MaxRequests)
	}
	return h, nil
}

type handler struct {
	src      Source
	g        prometheus.Gatherer
	log      *slog.Logger
	errs     *prometheus.CounterVec
	inFlight chan struct{}

	mu      sync.Mutex
	flights map[string]*broadcast // by format and content encoding
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.inFlight != nil {
		select {
		case h.inFlight <- struct{}{}:
			defer func() { <-h.inFlight }()
		default:
			http.Error(w, "too many scrapes in flight, try again later", http.StatusServiceUnavailable)
			return
		}
	}
	format := Negotiate(r.Header)
	enc := chooseEncoding(r.Header.Get("Accept-Encoding"))
	key := string(format) + "\x00" + enc

	h.mu.Lock()
	b := h.flights[key]
	if b != nil && !b.join() {
		b = nil
	}
	if b != nil {
		h.mu.Unlock()
		setHeaders(w, format, enc)
		if err := b.follow(w); err != nil {
			h.writeFailed(err)
		}
		return
	}
	b = newBroadcast()
	h.flights[key] = b
	h.mu.Unlock()

	setHeaders(w, format, enc)
	forget := func() {
		h.mu.Lock()
		if h.flights[key] == b {
			delete(h.flights, key)
		}
		h.mu.Unlock()
	}
	// The broadcast stops taking followers when the leader's copy gets too
	// big (forget, called by the tee) or when it ends.
	err := h.encode(b.tee(w, forget), format, enc)
	forget()
	b.finish(err)
	if err != nil {
		h.writeFailed(err)
	}
}

func setHeaders(w http.ResponseWriter, format expfmt.Format, enc string) {
	w.Header().Set("Content-Type", string(format))
	if enc != "" {
		w.Header().Set("Content-Encoding", enc)
	}
	w.Header().Add("Vary", "Accept-Encoding")
}

// encode reads the snapshots, gathers, and writes the exposition to w
// through the compression enc.
func (h *handler) encode(w *teeWriter, format expfmt.Format, enc string) error {
	snaps := h.src.Read()
	for _, s := range snaps {
		for _, f := range s.Families {
			if f.Err != nil {
				h.errs.WithLabelValues("read").Inc()
				h.log.Error("map read failed: metric left out of this scrape", "config", s.Config, "metric", f.Name, "err", f.Err)
			}
		}
	}
	mfs, err := h.g.Gather()
	if err != nil {
		h.errs.WithLabelValues("gather").Inc()
		h.log.Error("gathering self-metrics failed: serving what was gathered", "err", err)
	}
	cw, _, closeFn := Compress(w, enc) // enc, a coding name, is a valid Accept-Encoding
	werr := Write(cw, format, mfs, snaps)
	return errors.Join(werr, closeFn(), w.err)
}

func (h *handler) writeFailed(err error) {
	h.errs.WithLabelValues("write").Inc()
	h.log.Debug("writing a scrape failed", "err", err)
}

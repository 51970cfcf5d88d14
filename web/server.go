package web

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/coreos/go-systemd/v22/activation"
	"github.com/mdlayher/vsock"
	"github.com/prometheus/client_golang/prometheus"
	toolkit "github.com/prometheus/exporter-toolkit/web"
	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/bpfstats"
	"github.com/kernel-exporter/kernel_exporter/collector"
	"github.com/kernel-exporter/kernel_exporter/exposition"
	"github.com/kernel-exporter/kernel_exporter/ui"
)

// Timeouts of the HTTP server. A scrape is one GET without a body, so
// reading a request is quick; writing one may take long for a config with
// many series and a slow client, hence the larger write timeout.
const (
	// ReadHeaderTimeout bounds reading a request's headers: a client that
	// sends half a request is dropped after it.
	ReadHeaderTimeout = 10 * time.Second
	// ReadTimeout bounds reading a whole request.
	ReadTimeout = 30 * time.Second
	// WriteTimeout bounds a request from the end of its headers to the end
	// of the response (a scrape of many series to a slow reader).
	WriteTimeout = 2 * time.Minute
	// IdleTimeout closes a kept-alive connection idle this long. It is
	// above the usual scrape intervals (15 s to 1 min) so that Prometheus
	// reuses its connection.
	IdleTimeout = 2 * time.Minute
	// ShutdownTimeout is how long a shutdown waits for requests in flight
	// before it closes every connection.
	ShutdownTimeout = 5 * time.Second
	// StartupWait is how long, after the server starts, a scrape waits for
	// configs that are still loading, so that the first scrape normally
	// sees them all. After it, scrapes answer at once, with the configs
	// still loading shown as such.
	StartupWait = 5 * time.Second
)

// Defaults of Options' limits.
const (
	// DefaultMaxRequests is the default of --web.max-requests (as in
	// node_exporter): scrapes served at once; more get 503. Concurrent
	// scrapes of a config share one read of its maps.
	DefaultMaxRequests = 40
	// DefaultMaxConnections is the default of --web.max-connections: open
	// connections, idle ones included. At the cap, a new client takes the
	// place of the connection idle longest (closed, counted in
	// kernel_exporter_http_connections_evicted_total); when none is idle,
	// further clients wait in the kernel's accept queue, holding no file
	// descriptor of the process, until one ends.
	DefaultMaxConnections = 512
)

// Options configure the HTTP server.
type Options struct {
	// MetricsPath is where metrics are served (see CheckMetricsPath).
	MetricsPath string
	// MaxRequests bounds concurrent scrapes; more get 503 at once. 0 means
	// no bound.
	MaxRequests int
	// MaxConnections bounds open connections (> 0); see Listen.
	MaxConnections int
	EnablePprof    bool
	Version        string
	// Loaded is closed when every config's load has ended; until then (and
	// for at most StartupWait) a scrape waits for it. Nil means no wait.
	Loaded <-chan struct{}
	Logger *slog.Logger
	// CPURates gives the landing page the BPF run time the CPU budget
	// measured in its last window ((*budget.CPU).LastRates); nil shows it
	// as not measured.
	CPURates CPURatesFunc
	// HostBPF gives the landing page the host's BPF programs and maps
	// (the host BPF collector's Summary of its top five programs); nil:
	// not shown.
	HostBPF func() bpfstats.Summary
	// Reload reloads the configs (exporter.Exporter.Reload), run by
	// POST /-/reload when EnableLifecycle (--web.enable-lifecycle) is
	// set; otherwise that path answers 403. Loaded also decides
	// /-/ready (503 until it is closed); /-/healthy is 200 while serving.
	Reload          func(context.Context) error
	EnableLifecycle bool
}

// Server is the exporter's HTTP server: the landing page, metrics and,
// when enabled, pprof, on listeners bound before any config loads.
type Server struct {
	HTTP      *http.Server
	flags     *toolkit.FlagConfig
	log       *slog.Logger
	listeners []net.Listener
	maxConns  int
	evicted   prometheus.Counter
}

// CheckMetricsPath returns an error naming the flag and value unless p is a
// clean absolute URL path other than "/" (which the landing page uses),
// made of letters, digits and "/._~-" only, not under /ui/ (the live
// page) and, with pprof enabled, not under /debug/pprof/.
func CheckMetricsPath(p string, pprofOn bool) error {
	bad := func(why string) error {
		return fmt.Errorf("--web.telemetry-path %q: %s", p, why)
	}
	switch {
	case !strings.HasPrefix(p, "/"):
		return bad("must start with /")
	case p == "/":
		return bad("/ is the landing page; give a path such as /metrics")
	case strings.HasPrefix(p, "/-/"):
		return bad("is under /-/, the health and lifecycle endpoints")
	case strings.HasPrefix(p, ui.Path):
		return bad("is under " + ui.Path + ", the live page")
	case strings.IndexFunc(p, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._~-", r))
	}) >= 0:
		return bad("only letters, digits and / . _ ~ - are allowed")
	case path.Clean(p) != strings.TrimSuffix(p, "/") && path.Clean(p) != p:
		return bad("must be a clean path (no //, . or .. elements)")
	case pprofOn && (p == "/debug/pprof" || strings.HasPrefix(p, "/debug/pprof/")):
		return bad("is under /debug/pprof/, which --web.enable-pprof serves")
	}
	return nil
}

// NewServer builds the server: its handlers (landing page, metrics of
// status and gatherer with exposition.Handler, the live page of package ui
// under ui.Path, pprof when enabled) and timeouts. It returns the
// error of CheckMetricsPath, or one for MaxRequests < 0 or
// MaxConnections < 1.
func NewServer(gatherer prometheus.Gatherer, reg prometheus.Registerer, status *collector.Status, flags *toolkit.FlagConfig, opts Options) (*Server, error) {
	if err := CheckMetricsPath(opts.MetricsPath, opts.EnablePprof); err != nil {
		return nil, err
	}
	if opts.MaxRequests < 0 {
		return nil, fmt.Errorf("--web.max-requests %d: must be 0 (no limit) or more", opts.MaxRequests)
	}
	if opts.MaxConnections < 1 {
		return nil, fmt.Errorf("--web.max-connections %d: must be 1 or more", opts.MaxConnections)
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	mux := http.NewServeMux()
	metrics, err := exposition.Handler(status, gatherer, exposition.HandlerOptions{
		MaxRequests: opts.MaxRequests,
		Registerer:  reg,
		Logger:      log,
	})
	if err != nil {
		return nil, fmt.Errorf("register kernel_exporter_exposition_errors_total: %w", err)
	}
	mux.Handle(opts.MetricsPath, waitLoaded(metrics, opts.Loaded, time.Now().Add(StartupWait)))
	mux.Handle("/", Landing(status, opts))
	mux.HandleFunc(HealthyPath, healthy)
	mux.HandleFunc(ReadyPath, ready(opts.Loaded))
	mux.HandleFunc(ReloadPath, reloadHandler(opts.Reload, opts.EnableLifecycle))
	// The live page (package ui) samples the configs only while a page
	// polls it.
	mux.Handle(ui.Path, ui.Handler(ui.NewSampler(status.Read)))
	if opts.EnablePprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		WriteTimeout:      WriteTimeout,
		IdleTimeout:       IdleTimeout,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		ConnState:         connState,
	}
	evicted := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kernel_exporter_http_connections_evicted_total",
		Help: "HTTP connections closed while idle to admit a new client at --web.max-connections.",
	})
	if reg != nil {
		if err := reg.Register(evicted); err != nil {
			are, ok := err.(prometheus.AlreadyRegisteredError)
			if !ok {
				return nil, fmt.Errorf("register kernel_exporter_http_connections_evicted_total: %w", err)
			}
			evicted = are.ExistingCollector.(prometheus.Counter)
		}
	}
	return &Server{HTTP: srv, flags: flags, log: log, maxConns: opts.MaxConnections, evicted: evicted}, nil
}

// waitLoaded holds a request until loaded is closed, the request ends or
// the deadline passes, whichever is first.
func waitLoaded(h http.Handler, loaded <-chan struct{}, deadline time.Time) http.Handler {
	if loaded == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d := time.Until(deadline); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-loaded:
			case <-r.Context().Done():
			case <-t.C:
			}
			t.Stop()
		}
		h.ServeHTTP(w, r)
	})
}

// MaxConnections returns the connection cap to use given the wanted one and
// the process's file-descriptor limit: at most half of RLIMIT_NOFILE, so
// that BPF objects, maps and links (which take descriptors too) always
// have room.
func MaxConnections(want int) int {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err == nil && rl.Cur != unix.RLIM_INFINITY {
		if half := int(min(rl.Cur/2, 1<<30)); half < want {
			return max(half, 1)
		}
	}
	return want
}

// Listen binds the listeners: the systemd socket-activated ones with
// --web.systemd-socket, else one TCP listener per --web.listen-address.
// Together they hold at most MaxConnections(Options.MaxConnections)
// connections at once, each listener an equal share: at the cap, a new client evicts the connection idle longest, or
// waits for one to end when none is idle (see limitListener). It returns
// the bind error (address in use, no permission).
func (s *Server) Listen() error {
	var ls []net.Listener
	if s.flags.WebSystemdSocket != nil && *s.flags.WebSystemdSocket {
		acts, err := activation.Listeners()
		if err != nil {
			return fmt.Errorf("systemd socket activation: %w", err)
		}
		for _, l := range acts {
			if l != nil {
				ls = append(ls, l)
			}
		}
		if len(ls) == 0 {
			return errors.New("--web.systemd-socket: no socket passed by systemd")
		}
	} else {
		if s.flags.WebListenAddresses == nil || len(*s.flags.WebListenAddresses) == 0 {
			return errors.New("no --web.listen-address given")
		}
		for _, a := range *s.flags.WebListenAddresses {
			l, err := listenOne(a)
			if err != nil {
				closeAll(ls)
				return fmt.Errorf("--web.listen-address %q: %w", a, err)
			}
			ls = append(ls, l)
		}
	}
	n := MaxConnections(s.maxConns)
	if n < s.maxConns {
		s.log.Warn("connection cap lowered to half of the file-descriptor limit", "max_connections", n, "wanted", s.maxConns)
	}
	// The cap is for all listeners together: each gets its share, so that
	// several --web.listen-address values never hold more than n.
	share := max(n/len(ls), 1)
	if share*len(ls) > n {
		s.log.Warn("more listeners than --web.max-connections: one connection each", "listeners", len(ls), "max_connections", n)
	}
	for i, l := range ls {
		ls[i] = newLimitListener(l, share, s.evicted)
	}
	s.listeners = ls
	return nil
}

// listenOne binds a TCP address, or vsock://:<port> (a virtual machine's
// socket to its host).
func listenOne(a string) (net.Listener, error) {
	if !strings.HasPrefix(a, "vsock://") {
		return net.Listen("tcp", a)
	}
	u, err := url.Parse(a)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(u.Port(), 10, 32)
	if err != nil {
		return nil, fmt.Errorf("bad vsock port %q", u.Port())
	}
	return vsock.Listen(uint32(port), nil)
}

func closeAll(ls []net.Listener) {
	for _, l := range ls {
		l.Close()
	}
}

// Serve serves on the listeners of Listen, with TLS and basic
// authentication from --web.config.file, until Shutdown. It returns
// http.ErrServerClosed after Shutdown.
func (s *Server) Serve() error {
	return toolkit.ServeMultiple(s.listeners, s.HTTP, s.flags, s.log)
}

// Shutdown stops accepting, waits up to ShutdownTimeout for requests in
// flight, then closes every connection still open.
func (s *Server) Shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	if err := s.HTTP.Shutdown(ctx); err != nil {
		s.log.Warn("requests still in flight at the shutdown deadline: closing their connections", "timeout", ShutdownTimeout)
		s.HTTP.Close()
	}
	closeAll(s.listeners)
}

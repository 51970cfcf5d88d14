// SPDX-License-Identifier: Apache-2.0

package web

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/activation"
	"github.com/mdlayher/vsock"
	"github.com/prometheus/client_golang/prometheus"
	toolkit "github.com/prometheus/exporter-toolkit/web"
	"golang.org/x/sync/errgroup"
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

// readAhead is how far net/http reads past http.Server.MaxHeaderBytes
// before it answers 431 (its bufio slop): MaxHeaderBytes is set this much
// below Options.MaxHeaderBytes so that the latter is the real bound.
const readAhead = 4096

// Defaults of Options' limits.
const (
	// DefaultMaxRequests is the default of --web.max-requests (as in
	// node_exporter): scrapes served at once; more get 503. Concurrent
	// scrapes of a config share one read of its maps.
	DefaultMaxRequests = 40
	// DefaultMaxConnections is the default of --web.max-connections: open
	// connections, idle ones included. At the cap, a new client takes the
	// place of the oldest connection that has sent no complete request,
	// else of the one idle longest (closed, counted in
	// kernel_exporter_http_connections_evicted_total); when every one is
	// serving a request, further clients wait in the kernel's accept
	// queue, holding no file descriptor of the process, until one ends.
	DefaultMaxConnections = 512
	// DefaultMaxConnectionsPerAddress is the default of
	// --web.max-connections-per-address: connections from one client
	// address (an IPv4 address, an IPv6 /64), so that one client never
	// takes every slot. A new connection over it takes the place of one
	// of that address's own, as at the global cap, or is closed at once
	// when all of them are serving requests. Prometheus keeps one
	// connection per target, a reverse proxy in front of the exporter a
	// few.
	DefaultMaxConnectionsPerAddress = 64
	// DefaultMaxHeaderBytes is the default of --web.max-header-bytes: the
	// request line and headers of one request, in bytes. Prometheus sends
	// about 600 (its Accept header, the longest legitimate one, is about
	// 350), a browser on /ui/ about 1 KiB plus its cookies. Parsed, 8 KiB
	// of the smallest header lines take about 160 KB of memory
	// (docs/security.md).
	DefaultMaxHeaderBytes = 8 << 10
	// MinMaxHeaderBytes and MaxMaxHeaderBytes bound --web.max-header-bytes.
	MinMaxHeaderBytes = 8 << 10
	MaxMaxHeaderBytes = 1 << 20
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
	// MaxConnectionsPerAddress bounds the open connections of one client
	// address (> 0); see Listen.
	MaxConnectionsPerAddress int
	// MaxHeaderBytes bounds a request's line and headers, from
	// MinMaxHeaderBytes to MaxMaxHeaderBytes bytes. Longer ones get 431.
	MaxHeaderBytes int
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
	// IdlePrograms gives the landing page, by config, the programs that
	// ran 0 times in the CPU budget's last window ((*budget.CPU).LastIdle;
	// the window is CPURates'); nil: not shown.
	IdlePrograms func() map[string][]string
	// HostBPF gives the landing page the host's BPF programs and maps
	// (the host BPF collector's Summary of its top five programs); nil:
	// not shown.
	HostBPF func() bpfstats.Summary
	// Audit gives the landing page each config's audit (package audit),
	// by config; nil: the audit is off.
	Audit func() map[string][]AuditState
	// Reload reloads the configs (exporter.Exporter.Reload), run by
	// POST /-/reload when EnableLifecycle (--web.enable-lifecycle) is
	// set; otherwise that path answers 403. Loaded also decides
	// /-/ready (503 until it is closed); /-/healthy is 200 while serving.
	Reload          func(context.Context) error
	EnableLifecycle bool
	// HealthAddress (--web.health-address), when not empty, is a
	// loopback address (127.0.0.0/8 or [::1], with a port) on which a
	// second listener serves /-/healthy and /-/ready alone, over plain
	// HTTP without the web config's authentication, for probes that
	// should carry no credentials (a kubelet's, with hostNetwork).
	HealthAddress string
	// Handlers are more handlers, by path (package profile's /profile/cpu
	// and /profile/offcpu with --profile.enable), served behind the same
	// TLS, authentication and connection limits as the metrics. A path
	// that clashes with the metrics path or another handler is an error.
	Handlers map[string]http.Handler
}

// Server is the exporter's HTTP server: the landing page, metrics and,
// when enabled, pprof, on listeners bound before any config loads.
type Server struct {
	HTTP *http.Server
	// health serves /-/healthy and /-/ready on healthAddr (HealthAddress)
	// when set; healthL is its listener.
	health     *http.Server
	healthAddr string
	healthL    net.Listener
	flags      *toolkit.FlagConfig
	log        *slog.Logger
	listeners  []net.Listener
	maxConns   int
	perAddr    int
	limits     limitMetrics
	rejected   *prometheus.CounterVec
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
// MaxConnections < 1 or MaxHeaderBytes out of range.
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
	if opts.MaxConnectionsPerAddress < 1 {
		return nil, fmt.Errorf("--web.max-connections-per-address %d: must be 1 or more", opts.MaxConnectionsPerAddress)
	}
	if opts.MaxHeaderBytes < MinMaxHeaderBytes || opts.MaxHeaderBytes > MaxMaxHeaderBytes {
		return nil, fmt.Errorf("--web.max-header-bytes %d: must be %d to %d", opts.MaxHeaderBytes, MinMaxHeaderBytes, MaxMaxHeaderBytes)
	}
	if err := CheckHealthAddress(opts.HealthAddress); err != nil {
		return nil, err
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
	// It shows the audit as the landing page does.
	sampler := ui.NewSampler(status.Read)
	if opts.Audit != nil {
		sampler.SetAudit(func() []ui.AuditData { return uiAudit(opts.Audit()) })
	}
	mux.Handle(ui.Path, ui.Handler(sampler))
	for _, p := range slices.Sorted(maps.Keys(opts.Handlers)) {
		if p == opts.MetricsPath || strings.HasPrefix(opts.MetricsPath, strings.TrimSuffix(p, "/")+"/") || p == "/" || p == ui.Path || p == HealthyPath || p == ReadyPath || p == ReloadPath {
			return nil, fmt.Errorf("handler path %s clashes with a path the server serves (--web.telemetry-path %s)", p, opts.MetricsPath)
		}
		mux.Handle(p, opts.Handlers[p])
	}
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
		MaxHeaderBytes:    opts.MaxHeaderBytes - readAhead,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		ConnState:         connState,
		ConnContext:       connContext,
	}
	evicted := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kernel_exporter_http_connections_evicted_total",
		Help: "HTTP connections closed to admit a new client at --web.max-connections or --web.max-connections-per-address, by state: new (no complete request sent yet) or idle (between requests).",
	}, []string{"state"})
	refused := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kernel_exporter_http_connections_refused_total",
		Help: "HTTP connections closed at once because their address held --web.max-connections-per-address connections, all serving requests.",
	})
	if err := register(reg, &evicted); err != nil {
		return nil, err
	}
	if err := register(reg, &refused); err != nil {
		return nil, err
	}
	rejected := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kernel_exporter_http_auth_rejected_total",
		Help: "HTTP requests with basic-auth credentials refused, by reason: wrong (401, after a bcrypt check) or rate_limited (429, the client address used its failed checks, without one).",
	}, []string{"reason"})
	if err := register(reg, &rejected); err != nil {
		return nil, err
	}
	rejected.WithLabelValues("wrong")
	rejected.WithLabelValues("rate_limited")
	limits := limitMetrics{EvictedNew: evicted.WithLabelValues("new"), EvictedIdle: evicted.WithLabelValues("idle"), Refused: refused}
	out := &Server{HTTP: srv, flags: flags, log: log, maxConns: opts.MaxConnections, perAddr: opts.MaxConnectionsPerAddress,
		limits: limits, rejected: rejected}
	if opts.HealthAddress != "" {
		hmux := http.NewServeMux()
		hmux.HandleFunc(HealthyPath, healthy)
		hmux.HandleFunc(ReadyPath, ready(opts.Loaded))
		out.healthAddr = opts.HealthAddress
		out.health = &http.Server{
			Handler:           hmux,
			ReadHeaderTimeout: ReadHeaderTimeout,
			ReadTimeout:       ReadTimeout,
			WriteTimeout:      WriteTimeout,
			IdleTimeout:       IdleTimeout,
			MaxHeaderBytes:    MinMaxHeaderBytes - readAhead,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
			ConnState:         connState,
			ConnContext:       connContext,
		}
	}
	return out, nil
}

// maxHealthConns bounds the connections of the health listener: probes
// make one at a time.
const maxHealthConns = 8

// CheckHealthAddress returns an error naming --web.health-address unless
// a is empty or a loopback IP address (127.0.0.0/8, ::1) with a port: the
// listener has no authentication, so it must not be reachable from
// another host.
func CheckHealthAddress(a string) error {
	if a == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(a)
	if err == nil {
		_, err = strconv.ParseUint(port, 10, 16)
	}
	if err != nil {
		return fmt.Errorf("--web.health-address %q: want <loopback IP>:<port>, e.g. 127.0.0.1:19436", a)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("--web.health-address %q: not a loopback IP address (127.0.0.1, [::1]): it serves without authentication", a)
	}
	return nil
}

// register registers *c with reg (nil: none), or sets *c to the collector
// already registered under its name.
func register[C prometheus.Collector](reg prometheus.Registerer, c *C) error {
	if reg == nil {
		return nil
	}
	err := reg.Register(*c)
	if are, ok := err.(prometheus.AlreadyRegisteredError); ok {
		if prev, ok := are.ExistingCollector.(C); ok {
			*c = prev
			return nil
		}
	}
	if err != nil {
		return fmt.Errorf("register the HTTP connection counters: %w", err)
	}
	return nil
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
// connections at once, and Options.MaxConnectionsPerAddress of one client
// address: at a cap, a new client takes the place of a connection that has
// sent no complete request or is idle, or waits for one to end when every
// one is serving a request (see connLimiter). It returns the bind error
// (address in use, no permission).
func (s *Server) Listen() error {
	var ls []net.Listener
	if s.flags.WebSystemdSocket != nil && *s.flags.WebSystemdSocket {
		acts, err := activation.Listeners()
		if err != nil {
			return fmt.Errorf("systemd socket activation: %w", err)
		}
		for _, l := range acts {
			if l != nil {
				if err := keepDeferAccept(l); err != nil {
					s.log.Warn("cannot set TCP_DEFER_ACCEPT on a socket passed by systemd: connections that send nothing take slots at once", "address", l.Addr(), "err", err)
				}
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
	// One limiter for all listeners: several --web.listen-address values
	// never hold more than n, nor one address more than its cap.
	lim := newConnLimiter(n, s.perAddr, s.limits)
	for i, l := range ls {
		ls[i] = lim.listen(l)
	}
	if s.health != nil {
		l, err := listenOne(s.healthAddr)
		if err != nil {
			closeAll(ls)
			return fmt.Errorf("--web.health-address %q: %w", s.healthAddr, err)
		}
		s.healthL = newConnLimiter(maxHealthConns, maxHealthConns, s.limits).listen(l)
	}
	s.listeners = ls
	return nil
}

// listenOne binds a TCP address, or vsock://:<port> (a virtual machine's
// socket to its host).
func listenOne(a string) (net.Listener, error) {
	if !strings.HasPrefix(a, "vsock://") {
		lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
			var serr error
			if err := c.Control(func(fd uintptr) { serr = deferAccept(int(fd)) }); err != nil {
				return err
			}
			return serr
		}}
		return lc.Listen(context.Background(), "tcp", a)
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

// deferAccept sets TCP_DEFER_ACCEPT on the TCP listening socket fd: the
// kernel queues a connection for accept only once its first bytes have
// come, or ReadHeaderTimeout after its handshake; until then it is a
// request in the SYN queue, and takes no slot, descriptor or accept of
// the exporter. Every HTTP client (and TLS) sends first; clients that
// connect only to close again (TCP health checks) see no difference.
func deferAccept(fd int) error {
	return unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_DEFER_ACCEPT, int(ReadHeaderTimeout/time.Second))
}

// keepDeferAccept sets TCP_DEFER_ACCEPT (see deferAccept) on a TCP
// listener passed by systemd, unless its unit set it already
// (DeferAcceptSec=). Other listeners are left as they are.
func keepDeferAccept(l net.Listener) error {
	tl, ok := l.(*net.TCPListener)
	if !ok {
		return nil
	}
	rc, err := tl.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		v, err := unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_DEFER_ACCEPT)
		if err != nil || v == 0 {
			serr = deferAccept(int(fd))
		}
	}); err != nil {
		return err
	}
	return serr
}

func closeAll(ls []net.Listener) {
	for _, l := range ls {
		l.Close()
	}
}

// Serve serves on the listeners of Listen, with the TLS, basic
// authentication and headers of --web.config.file (exporter-toolkit's
// format; see webConfig and authHandler), until Shutdown. TLS is on when
// the web config has TLS settings at start-up; each handshake then uses
// them as they are at that moment (rotated certificates are picked up),
// and HTTP/2 is offered when http_server_config.http2 (default true) is
// set both at start-up and then. It returns the error of the web config,
// or http.ErrServerClosed after Shutdown.
func (s *Server) Serve() error {
	path := ""
	if s.flags.WebConfigFile != nil {
		path = *s.flags.WebConfigFile
	}
	var (
		tlsOn, h2 bool
		src       *webConfigSource
	)
	if path != "" {
		var err error
		if src, err = newWebConfigSource(path, s.log); err != nil {
			return err
		}
		s.HTTP.Handler = newAuthHandler(s.HTTP.Handler, src, s.rejected)
		cfg, _ := src.get()
		tlsOn, h2 = cfg.tls != nil, cfg.http2
	}
	if tlsOn {
		if !h2 {
			s.HTTP.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
		}
		s.HTTP.TLSConfig = &tls.Config{GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cfg, err := src.get()
			if err != nil {
				return nil, err
			}
			if cfg.tls == nil {
				return nil, errors.New("the web config has no TLS settings any more")
			}
			c := cfg.tls.Clone()
			c.NextProtos = []string{"http/1.1"}
			if h2 && cfg.http2 {
				c.NextProtos = []string{"h2", "http/1.1"}
			}
			return c, nil
		}}
	}
	var g errgroup.Group
	if s.healthL != nil {
		s.log.Info("Listening for probes", "address", s.healthL.Addr().String(), "paths", HealthyPath+" "+ReadyPath)
		g.Go(func() error { return s.health.Serve(s.healthL) })
	}
	for _, l := range s.listeners {
		s.log.Info("Listening on", "address", l.Addr().String(), "tls", tlsOn, "http2", tlsOn && h2)
		g.Go(func() error {
			if tlsOn {
				return s.HTTP.ServeTLS(l, "", "")
			}
			return s.HTTP.Serve(l)
		})
	}
	return g.Wait()
}

// Shutdown stops accepting, waits up to ShutdownTimeout for requests in
// flight, then closes every connection still open.
func (s *Server) Shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	if s.health != nil {
		if err := s.health.Shutdown(ctx); err != nil {
			s.health.Close()
		}
	}
	if err := s.HTTP.Shutdown(ctx); err != nil {
		s.log.Warn("requests still in flight at the shutdown deadline: closing their connections", "timeout", ShutdownTimeout)
		s.HTTP.Close()
	}
	closeAll(s.listeners)
}

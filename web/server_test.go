// SPDX-License-Identifier: Apache-2.0

package web

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	toolkit "github.com/prometheus/exporter-toolkit/web"
	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/collector"
)

func opts(path string) Options {
	return Options{MetricsPath: path, MaxRequests: DefaultMaxRequests, MaxConnections: DefaultMaxConnections,
		MaxConnectionsPerAddress: DefaultMaxConnectionsPerAddress, MaxHeaderBytes: DefaultMaxHeaderBytes}
}

// TestHardening04TelemetryPath checks that a telemetry path the mux cannot
// take (no leading /, "/", a pattern with a method or wildcard) is refused
// with an error naming the flag and value, not a panic.
func TestHardening04TelemetryPath(t *testing.T) {
	for _, p := range []string{"metrics", "", "/", "GET /metrics", "/m/{x}", "/a//b", "/a/../b", "/m etrics"} {
		srv, err := NewServer(prometheus.NewRegistry(), nil, &collector.Status{}, &toolkit.FlagConfig{}, opts(p))
		if err == nil {
			t.Errorf("path %q accepted (server %v)", p, srv != nil)
			continue
		}
		if want := `--web.telemetry-path "` + p + `"`; !strings.Contains(err.Error(), want) {
			t.Errorf("path %q: error %q does not name %s", p, err, want)
		}
	}
	o := opts("/debug/pprof/metrics")
	o.EnablePprof = true
	if _, err := NewServer(prometheus.NewRegistry(), nil, &collector.Status{}, &toolkit.FlagConfig{}, o); err == nil {
		t.Errorf("a path under /debug/pprof/ accepted with pprof on")
	}
	for _, p := range []string{"/metrics", "/metrics/", "/a/b-c_d.e~f"} {
		if _, err := NewServer(prometheus.NewRegistry(), nil, &collector.Status{}, &toolkit.FlagConfig{}, opts(p)); err != nil {
			t.Errorf("path %q refused: %v", p, err)
		}
	}
}

// TestHardening08Timeouts checks the server's timeouts are all set.
func TestHardening08Timeouts(t *testing.T) {
	srv, err := NewServer(prometheus.NewRegistry(), nil, &collector.Status{}, &toolkit.FlagConfig{}, opts("/metrics"))
	if err != nil {
		t.Fatal(err)
	}
	h := srv.HTTP
	if h.ReadHeaderTimeout != 10*time.Second || h.ReadTimeout != 30*time.Second || h.WriteTimeout != 2*time.Minute || h.IdleTimeout != 2*time.Minute {
		t.Errorf("timeouts: read header %v, read %v, write %v, idle %v; want 10s, 30s, 2m, 2m", h.ReadHeaderTimeout, h.ReadTimeout, h.WriteTimeout, h.IdleTimeout)
	}
	for _, o := range []Options{{MetricsPath: "/metrics", MaxRequests: -1, MaxConnections: 1}, {MetricsPath: "/metrics", MaxConnections: 0}} {
		if _, err := NewServer(prometheus.NewRegistry(), nil, &collector.Status{}, &toolkit.FlagConfig{}, o); err == nil {
			t.Errorf("options %+v accepted", o)
		}
	}
}

// blockingGatherer holds every Gather until release is closed.
type blockingGatherer struct {
	entered chan struct{}
	release chan struct{}
}

func (g *blockingGatherer) Gather() ([]*dto.MetricFamily, error) {
	g.entered <- struct{}{}
	<-g.release
	return nil, nil
}

// TestHardening08MaxRequests checks that --web.max-requests is honoured:
// with n scrapes in flight, the next one gets 503 at once, and scrapes
// succeed again once those end. The n scrapes ask for n different formats:
// scrapes of one format would share one encoding (and one Gather).
func TestHardening08MaxRequests(t *testing.T) {
	const n = 3
	g := &blockingGatherer{entered: make(chan struct{}, n), release: make(chan struct{})}
	o := opts("/metrics")
	o.MaxRequests = n
	srv, err := NewServer(g, nil, &collector.Status{}, &toolkit.FlagConfig{}, o)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.HTTP.Handler)
	defer ts.Close()
	var wg sync.WaitGroup
	codes := make(chan int, n)
	accepts := [n]string{"text/plain", "application/openmetrics-text;version=1.0.0",
		"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited"}
	for i := range n {
		wg.Go(func() {
			req, _ := http.NewRequest("GET", ts.URL+"/metrics", nil)
			req.Header.Set("Accept", accepts[i])
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		})
	}
	for range n {
		<-g.entered
	}
	start := time.Now()
	resp, err := http.Get(ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("scrape %d with %d in flight: %s, want 503", n+1, n, resp.Status)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("the refused scrape took %v, want an answer at once", d)
	}
	t.Logf("scrape beyond --web.max-requests=%d: %s %q", n, resp.Status, strings.TrimSpace(string(body)))
	close(g.release)
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != 200 {
			t.Errorf("scrape in flight ended with %d, want 200", c)
		}
	}
	g.entered = make(chan struct{}, 1)
	resp, err = http.Get(ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("scrape after the others ended: %s, want 200", resp.Status)
	}
}

// TestStartupWait checks that a scrape during start-up waits for the loads
// (and no longer than that), and that the landing page shows loading.
func TestStartupWait(t *testing.T) {
	st := &collector.Status{}
	st.Add(&collector.State{Name: "slow", Source: "bundled", Loading: true})
	loaded := make(chan struct{})
	o := opts("/metrics")
	o.Loaded = loaded
	srv, err := NewServer(prometheus.NewRegistry(), nil, st, &toolkit.FlagConfig{}, o)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.HTTP.Handler)
	defer ts.Close()
	resp, err := http.Get(ts.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), `<td>slow</td><td><span class="loading">loading</span></td>`) {
		t.Errorf("landing page does not show slow loading:\n%s", page)
	}
	time.AfterFunc(300*time.Millisecond, func() { close(loaded) })
	start := time.Now()
	resp, err = http.Get(ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if d := time.Since(start); d < 250*time.Millisecond || d > 2*time.Second {
		t.Errorf("scrape during start-up answered after %v, want when the loads end (300ms)", d)
	}
}

// TestHardening08ConnectionCapAllListeners checks that --web.max-connections
// bounds the connections of all listeners together: two listen addresses
// with a cap of 10 share one limiter of 10 (each took 10, and K addresses
// K times the cap, up to every file descriptor), as does the per-address
// cap.
func TestHardening08ConnectionCapAllListeners(t *testing.T) {
	addrs := []string{"127.0.0.1:0", "127.0.0.1:0"}
	o := opts("/metrics")
	o.MaxConnections = 10
	o.MaxConnectionsPerAddress = 4
	srv, err := NewServer(prometheus.NewRegistry(), nil, &collector.Status{}, &toolkit.FlagConfig{WebListenAddresses: &addrs}, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	defer closeAll(srv.listeners)
	a, b := srv.listeners[0].(*limitListener).lim, srv.listeners[1].(*limitListener).lim
	if a != b || a.max != 10 || a.perAddr != 4 {
		t.Errorf("listeners take %d and %d connections (per address %d, %d), want one limiter of 10 (4)", a.max, b.max, a.perAddr, b.perAddr)
	}
}

// serveLocal starts srv (built with opts) on 127.0.0.1 with no web config
// and returns its address; the server is shut down at cleanup.
func serveLocal(t *testing.T, o Options, webConfig string) (*Server, string) {
	t.Helper()
	addrs := []string{"127.0.0.1:0"}
	srv, err := NewServer(prometheus.NewRegistry(), nil, &collector.Status{}, &toolkit.FlagConfig{WebListenAddresses: &addrs, WebConfigFile: &webConfig}, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	t.Cleanup(srv.Shutdown)
	return srv, srv.listeners[0].Addr().String()
}

// rawStatus sends req on a new connection to addr and returns the status
// line of the answer.
func rawStatus(t *testing.T, addr string, req []byte) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(req); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("read answer: %v", err)
	}
	return strings.TrimSpace(line)
}

// TestHardening25MaxHeaderBytes checks --web.max-header-bytes: a request
// whose line and headers are exactly that long is served, one byte more
// gets 431 (Go's default let 1 MiB in, which 100 clients turned into 1 GB
// of RSS); Prometheus' request is far below the default; the flag's range
// is checked.
func TestHardening25MaxHeaderBytes(t *testing.T) {
	for _, limit := range []int{DefaultMaxHeaderBytes, 64 << 10} {
		o := opts("/metrics")
		o.MaxHeaderBytes = limit
		_, addr := serveLocal(t, o, "")
		head := func(n int) []byte {
			b := []byte("GET /-/healthy HTTP/1.1\r\nHost: x\r\nX-Pad: ")
			for len(b) < n-4 {
				b = append(b, 'a')
			}
			return append(b, "\r\n\r\n"...)
		}
		if got := rawStatus(t, addr, head(limit)); got != "HTTP/1.1 200 OK" {
			t.Errorf("limit %d: a head of %d bytes got %q, want 200", limit, limit, got)
		}
		if got := rawStatus(t, addr, head(limit+1)); got != "HTTP/1.1 431 Request Header Fields Too Large" {
			t.Errorf("limit %d: a head of %d bytes got %q, want 431", limit, limit+1, got)
		}
	}
	if n := len(prometheusHead); n > DefaultMaxHeaderBytes/4 {
		t.Errorf("Prometheus' request head is %d bytes, want it well under the default %d", n, DefaultMaxHeaderBytes)
	}
	for _, v := range []int{0, MinMaxHeaderBytes - 1, MaxMaxHeaderBytes + 1} {
		o := opts("/metrics")
		o.MaxHeaderBytes = v
		if _, err := NewServer(prometheus.NewRegistry(), nil, &collector.Status{}, &toolkit.FlagConfig{}, o); err == nil || !strings.Contains(err.Error(), "--web.max-header-bytes") {
			t.Errorf("--web.max-header-bytes=%d: error %v, want one naming the flag", v, err)
		}
	}
}

// prometheusHead is the request head of a Prometheus 3 scrape with basic
// auth (its Accept header is the longest legitimate header).
const prometheusHead = "GET /metrics HTTP/1.1\r\n" +
	"Host: node-1.example.internal:19435\r\n" +
	"User-Agent: Prometheus/3.5.0\r\n" +
	"Accept: application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;escaping=allow-utf-8;q=0.5,application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.4,application/openmetrics-text;version=0.0.1;q=0.3,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.2,text/plain;version=0.0.4;q=0.1,*/*;q=0.05\r\n" +
	"Accept-Encoding: gzip\r\n" +
	"Authorization: Basic cHJvbWV0aGV1czpjb3JyZWN0LWhvcnNlLWJhdHRlcnktc3RhcGxl\r\n" +
	"X-Prometheus-Scrape-Timeout-Seconds: 10\r\n\r\n"

// TestHardening25DeferAccept checks that the listeners of
// --web.listen-address have TCP_DEFER_ACCEPT: a connection that sends
// nothing is not accepted (takes no slot), one that sends its request is
// served.
func TestHardening25DeferAccept(t *testing.T) {
	srv, addr := serveLocal(t, opts("/metrics"), "")
	lim := srv.listeners[0].(*limitListener).lim
	rc, err := srv.listeners[0].(*limitListener).Listener.(*net.TCPListener).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var v int
	rc.Control(func(fd uintptr) { v, err = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_DEFER_ACCEPT) })
	if err != nil || v == 0 {
		t.Fatalf("TCP_DEFER_ACCEPT %d, %v; want it set", v, err)
	}
	for range 5 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	time.Sleep(300 * time.Millisecond)
	lim.mu.Lock()
	open := lim.open
	lim.mu.Unlock()
	if open != 0 {
		t.Errorf("%d connections that sent nothing accepted, want none", open)
	}
	if got := rawStatus(t, addr, []byte("GET /-/healthy HTTP/1.1\r\nHost: x\r\n\r\n")); got != "HTTP/1.1 200 OK" {
		t.Errorf("a request beside them: %q", got)
	}
}

// TestHandlers mounts more handlers (package profile's, with
// --profile.enable) on the server's mux, and refuses one at the metrics
// path.
func TestHandlers(t *testing.T) {
	o := opts("/metrics")
	o.Handlers = map[string]http.Handler{"/profile/cpu": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "profile")
	})}
	srv, err := NewServer(prometheus.NewRegistry(), nil, &collector.Status{}, &toolkit.FlagConfig{}, o)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.HTTP.Handler)
	defer ts.Close()
	resp, err := http.Get(ts.URL + "/profile/cpu")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "profile" {
		t.Errorf("/profile/cpu: %d %q", resp.StatusCode, b)
	}
	o.Handlers = map[string]http.Handler{"/metrics": http.NotFoundHandler()}
	if _, err := NewServer(prometheus.NewRegistry(), nil, &collector.Status{}, &toolkit.FlagConfig{}, o); err == nil {
		t.Error("a handler at the metrics path: no error")
	}
}

// TestHealthAddress serves with basic auth and --web.health-address: the
// health listener answers /-/healthy and /-/ready without credentials
// (503 until loaded, then 200) and nothing else (the metrics are 404),
// while the main listener still wants them; an address that is not a
// loopback IP is refused.
func TestHealthAddress(t *testing.T) {
	for _, bad := range []string{"0.0.0.0:19436", ":19436", "10.1.2.3:1", "localhost:19436", "127.0.0.1", "127.0.0.1:99999"} {
		o := opts("/metrics")
		o.HealthAddress = bad
		if _, err := NewServer(prometheus.NewRegistry(), nil, &collector.Status{}, &toolkit.FlagConfig{}, o); err == nil || !strings.Contains(err.Error(), "--web.health-address") {
			t.Errorf("HealthAddress %q: %v, want an error naming --web.health-address", bad, err)
		}
	}
	o := opts("/metrics")
	o.HealthAddress = "127.0.0.1:0"
	loaded := make(chan struct{})
	o.Loaded = loaded
	srv, addr := serveLocal(t, o, promWebConfig(t, "secret"))
	health := srv.healthL.Addr().String()
	get := func(a, p string) int {
		t.Helper()
		resp, err := http.Get("http://" + a + p)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if c := get(health, ReadyPath); c != http.StatusServiceUnavailable {
		t.Errorf("health %s before loading: %d, want 503", ReadyPath, c)
	}
	close(loaded)
	for p, want := range map[string]int{HealthyPath: 200, ReadyPath: 200, "/metrics": 404, "/": 404, ReloadPath: 404} {
		if c := get(health, p); c != want {
			t.Errorf("health listener %s: %d, want %d", p, c, want)
		}
	}
	if c := get(addr, HealthyPath); c != http.StatusUnauthorized {
		t.Errorf("main listener %s without credentials: %d, want 401", HealthyPath, c)
	}
}

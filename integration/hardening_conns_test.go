// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// idleConn opens a connection to url, sends one GET / on it (without
// credentials), reads the whole response, which must have status code
// want, and returns the connection, kept alive and idle.
func idleConn(t *testing.T, url string, want int) (net.Conn, error) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return nil, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err == nil && resp.StatusCode != want {
		err = errors.New(resp.Status)
	}
	c.SetDeadline(time.Time{})
	return c, err
}

// closedByPeer reports whether the server closed c (a read gets EOF or a
// reset) within d.
func closedByPeer(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := c.Read(make([]byte, 1))
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
}

// TestHardening08IdleConnectionsEvicted checks that a client holding every
// connection of --web.max-connections idle (one request each, then kept
// alive) does not block scrapes: each new client takes the place of the
// connection idle longest. Five scrapers in a row, each on its own
// connection which it then keeps open too, each get /metrics within 2 s;
// five of the oldest idle connections are the ones closed, the process holds
// at most the cap in connections, and
// kernel_exporter_http_connections_evicted_total counts the evictions.
// Before the fix (netutil.LimitListener) the first scrape timed out.
func TestHardening08IdleConnectionsEvicted(t *testing.T) {
	idleEvicted(t, Start(t, "--programs=timers", "--web.max-connections=50"), false)
}

// scrapePassword is the password of user prom in the web config of
// TestHardening08IdleConnectionsEvictedBasicAuth; the hash is bcrypt's
// (cost 4).
const (
	scrapePassword = "scrape-secret"
	scrapeHash     = "$2a$04$pTw5EL25C.21Aow0c4M4P.pfdYVElpeSYqJKYJJPHC0DITlINfyIK"
)

// TestHardening08IdleConnectionsEvictedBasicAuth is
// TestHardening08IdleConnectionsEvicted with basic authentication on: the
// 50 idle connections got 401 (which keeps a connection alive), the
// scrapes have the password.
func TestHardening08IdleConnectionsEvictedBasicAuth(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "web.yml")
	if err := os.WriteFile(cfg, []byte("basic_auth_users:\n  prom: "+scrapeHash+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Start polls /metrics without credentials: spawn and wait for the
	// port instead.
	cmd, url, logs := spawn(t, nil, "--programs=timers", "--web.max-connections=50", "--web.config.file="+cfg)
	waitPort(t, url, logs)
	e := &Exporter{t: t, cmd: cmd, URL: url, logs: logs}
	// The file descriptors are counted from when the load has ended
	// (/-/ready), as Start waits for it.
	Eventually(t, 30*time.Second, func() bool {
		req, _ := http.NewRequest("GET", url+"/-/ready", nil)
		req.SetBasicAuth("prom", scrapePassword)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}, "not ready within 30s\n%s", logs)
	time.Sleep(500 * time.Millisecond) // the capability drop after it
	idleEvicted(t, e, true)
}

// TestHardening08IdleConnectionsEvictedSystemdSocket is
// TestHardening08IdleConnectionsEvicted with the listener passed by
// systemd-socket-activate (--web.systemd-socket), which goes through the
// same connection limiter.
func TestHardening08IdleConnectionsEvictedSystemdSocket(t *testing.T) {
	tool := probeNeedTool(t, "socket activation", "systemd-socket-activate")
	// startWrapped appends the binary and --web.listen-address=<addr>:
	// the wrapper listens on that address and execs the exporter (same
	// pid) at the first connection, passing the socket.
	script := `a=${1#--web.listen-address=}; exec "$TOOL" -l "$a" "$0" "$@"`
	t.Setenv("TOOL", tool)
	e := startWrapped(t, []string{"sh", "-c", script}, "--web.systemd-socket", "--programs=timers", "--web.max-connections=50")
	if !strings.Contains(e.Logs(), "Execing "+binary) {
		t.Fatalf("the exporter was not started by systemd-socket-activate:\n%s", e.Logs())
	}
	idleEvicted(t, e, false)
}

// idleEvicted is the body of TestHardening08IdleConnectionsEvicted, against
// an exporter started with --web.max-connections=50 and, when auth, basic
// authentication of user prom with scrapePassword.
func idleEvicted(t *testing.T, e *Exporter, auth bool) {
	const max, scrapes = 50, 5
	pid := e.cmd.Process.Pid
	// Start's polling client keeps its connection: close it so that the
	// cap holds exactly the connections opened below.
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	time.Sleep(200 * time.Millisecond)
	before := openFDs(t, pid)
	conns := make([]net.Conn, 0, max)
	for i := range max {
		want := http.StatusOK
		if auth {
			want = http.StatusUnauthorized
		}
		c, err := idleConn(t, e.URL, want)
		if err != nil {
			t.Fatalf("idle connection #%d: %v", i, err)
		}
		conns = append(conns, c)
	}
	full := openFDs(t, pid)
	t.Logf("open fds: %d before, %d with %d idle connections (cap %d)", before, full, max, max)

	var evicted float64
	for i := range scrapes {
		// Each scraper keeps its connection alive afterwards, as
		// Prometheus does, so the cap stays full of idle connections.
		client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{}}
		start := time.Now()
		req, err := http.NewRequest("GET", e.URL+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		if auth {
			req.SetBasicAuth("prom", scrapePassword)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("scrape %d with %d idle connections held: %v (after %v)", i+1, max, err, time.Since(start).Round(time.Millisecond))
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("scrape %d: %s, %v", i+1, resp.Status, err)
		}
		t.Logf("scrape %d: %s in %v", i+1, resp.Status, time.Since(start).Round(time.Millisecond))
		parser := expfmt.NewTextParser(model.UTF8Validation)
		mfs, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
		if err != nil {
			t.Fatalf("parse scrape %d: %v", i+1, err)
		}
		ms := Metrics(mfs)
		if v := ms.Value("kernel_exporter_config_up", L("config", "timers")); v != 1 {
			t.Errorf("scrape %d: config_up{timers} = %v, want 1", i+1, v)
		}
		evicted = ms.Value("kernel_exporter_http_connections_evicted_total", nil)
		if evicted != float64(i+1) {
			t.Errorf("scrape %d: connections_evicted_total = %v, want %d", i+1, evicted, i+1)
		}
		if fds := openFDs(t, pid); fds-before > max {
			t.Errorf("scrape %d: open fds %d, %d above the %d before: more than the cap %d", i+1, fds, fds-before, before, max)
		}
	}
	after := openFDs(t, pid)
	t.Logf("open fds after %d scrapes: %d (%d before any connection); evicted_total %v", scrapes, after, before, evicted)
	// The server evicts by when it saw a connection go idle, which may
	// lag the client's read of the response by a few connections (a
	// goroutine descheduled, a GC): the evicted ones are among the oldest.
	var closed []int
	for i, c := range conns {
		if closedByPeer(c, 20*time.Millisecond) {
			closed = append(closed, i)
		}
	}
	t.Logf("idle connections closed by the server (0 = opened first): %v", closed)
	if len(closed) != scrapes || closed[len(closed)-1] >= 2*scrapes {
		t.Errorf("idle connections closed: %v, want %d of the %d opened first", closed, scrapes, 2*scrapes)
	}
}

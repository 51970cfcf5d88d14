// SPDX-License-Identifier: Apache-2.0

package web

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// limited is an httptest server whose listener is a limitListener.
type limited struct {
	ts      *httptest.Server
	l       *limitListener
	m       limitMetrics
	block   chan struct{} // /block waits for it to close
	entered chan struct{} // /block sends on it first
}

// newMetrics returns the counters of a test limiter.
func newMetrics() limitMetrics {
	c := func(n string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: n, Help: "test"})
	}
	return limitMetrics{EvictedNew: c("evicted_new"), EvictedIdle: c("evicted_idle"), Refused: c("refused")}
}

// startLimited serves, on a limitListener of max connections (all of them
// allowed from one address), / (answers "ok") and /block (waits for block
// to close), over TLS when tls, with hook as the ConnState hook (nil:
// connState).
func startLimited(t *testing.T, max int, tls bool, hook func(net.Conn, http.ConnState)) *limited {
	return startLimitedPerAddr(t, max, max, tls, hook)
}

// startLimitedPerAddr is startLimited with at most perAddr connections
// from one address.
func startLimitedPerAddr(t *testing.T, max, perAddr int, tls bool, hook func(net.Conn, http.ConnState)) *limited {
	t.Helper()
	s := &limited{block: make(chan struct{}), entered: make(chan struct{}, 100), m: newMetrics()}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	mux.HandleFunc("/block", func(w http.ResponseWriter, r *http.Request) {
		s.entered <- struct{}{}
		<-s.block
		io.WriteString(w, "ok")
	})
	s.ts = httptest.NewUnstartedServer(mux)
	s.l = newConnLimiter(max, perAddr, s.m).listen(s.ts.Listener)
	s.ts.Listener = s.l
	s.ts.Config.ConnState = connState
	if hook != nil {
		s.ts.Config.ConnState = hook
	}
	s.ts.Config.ReadHeaderTimeout = 10 * time.Second
	if tls {
		s.ts.StartTLS()
	} else {
		s.ts.Start()
	}
	t.Cleanup(func() {
		select {
		case <-s.block:
		default:
			close(s.block)
		}
		s.ts.Close()
	})
	return s
}

// value returns the value of a counter.
func value(c prometheus.Counter) float64 {
	var m dto.Metric
	c.Write(&m)
	return m.GetCounter().GetValue()
}

// evictions returns the connections evicted, new and idle ones.
func (s *limited) evictions() float64 {
	return value(s.m.EvictedNew) + value(s.m.EvictedIdle)
}

// slots returns the slots taken and the connections known idle.
func (s *limited) slots() (open, idle int) {
	s.l.lim.mu.Lock()
	defer s.l.lim.mu.Unlock()
	return s.l.lim.open, s.l.lim.idle.Len()
}

// setGrace sets the limiter's grace for new connections.
func (s *limited) setGrace(d time.Duration) {
	s.l.lim.mu.Lock()
	defer s.l.lim.mu.Unlock()
	s.l.lim.grace = d
}

// fresh returns the connections that have sent no complete request.
func (s *limited) fresh() int {
	s.l.lim.mu.Lock()
	defer s.l.lim.mu.Unlock()
	return s.l.lim.fresh.Len()
}

// client is one raw HTTP/1.1 connection.
type client struct {
	net.Conn
	br *bufio.Reader
}

func (s *limited) dial(t *testing.T) *client {
	t.Helper()
	c, err := net.Dial("tcp", s.l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{Conn: c, br: bufio.NewReader(c)}
}

// send writes a GET of path.
func (c *client) send(path string) error {
	_, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
	return err
}

// read reads one response within d and returns its body.
func (c *client) read(d time.Duration) (string, error) {
	c.SetReadDeadline(time.Now().Add(d))
	defer c.SetReadDeadline(time.Time{})
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// get sends a GET of / and reads the answer within 2 s.
func (c *client) get() error {
	if err := c.send("/"); err != nil {
		return err
	}
	body, err := c.read(2 * time.Second)
	if err == nil && body != "ok" {
		err = fmt.Errorf("body %q", body)
	}
	return err
}

// closed reports whether the server closed c: a read gets EOF or a reset
// within 100 ms.
func (c *client) closed() bool {
	c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	defer c.SetReadDeadline(time.Time{})
	_, err := c.br.ReadByte()
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
}

// waitFor polls cond every 5 ms for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within 5s: %s", what)
		}
	}
}

// settled waits until every slot is free (the Accept waiting for the next
// connection holds none): first a fresh connection goes through the accept
// loop, then the slot counts are polled. A slot freed twice shows as less
// than 0, one never freed as 1 or more.
func (s *limited) settled(t *testing.T) {
	t.Helper()
	s.settledAfter(t, func() error {
		c := s.dial(t)
		defer c.Close()
		return c.get()
	})
}

// settledAfter is settled with fresh, which makes a request on a fresh
// connection and closes it.
func (s *limited) settledAfter(t *testing.T, fresh func() error) {
	t.Helper()
	// The clients' closes are seen first, so that fresh evicts nothing.
	waitFor(t, "the closed connections released", func() bool {
		open, idle := s.slots()
		return open <= 0 && idle == 0
	})
	if err := fresh(); err != nil {
		t.Fatalf("fresh connection: %v", err)
	}
	var open, idle, unsent int
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if open, idle = s.slots(); open == 0 && idle == 0 {
			if unsent = s.fresh(); unsent == 0 {
				return
			}
		}
	}
	t.Errorf("%d slots taken, %d idle, %d that sent no complete request; want none", open, idle, unsent)
}

// idleClients opens n connections, one GET each, left idle, and waits until
// the server knows them idle.
func (s *limited) idleClients(t *testing.T, n int) []*client {
	t.Helper()
	var cs []*client
	for i := range n {
		c := s.dial(t)
		if err := c.get(); err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		cs = append(cs, c)
		// One at a time, so that they go idle in this order.
		waitFor(t, fmt.Sprintf("%d connections idle", i+1), func() bool { _, idle := s.slots(); return idle == i+1 })
	}
	return cs
}

// TestLimitEvictionOrder checks that at the cap a new client evicts the
// connection idle longest (by when it last went idle, not when it was
// opened), one per new client, that the others keep working, and that
// every slot is freed exactly once.
func TestLimitEvictionOrder(t *testing.T) {
	s := startLimited(t, 3, false, nil)
	cs := s.idleClients(t, 3)
	if open, _ := s.slots(); open != 3 {
		t.Errorf("slots taken with 3 connections at cap 3: %d, want 3", open)
	}
	if s.evictions() != 0 {
		t.Errorf("evictions before the cap was passed: %v", s.evictions())
	}
	// Reuse connection 0: the order idle longest first is now 1, 2, 0.
	if err := cs[0].get(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "connection 0 idle again", func() bool { _, idle := s.slots(); return idle == 3 })
	time.Sleep(50 * time.Millisecond)
	if s.evictions() != 0 {
		t.Errorf("an idle connection was evicted with no client waiting (evictions %v)", s.evictions())
	}
	for i, victim := range []int{1, 2} {
		n := s.dial(t)
		if err := n.get(); err != nil {
			t.Fatalf("new client %d at the cap: %v", i, err)
		}
		if !cs[victim].closed() {
			t.Errorf("new client %d: connection %d (idle longest) not closed", i, victim)
		}
		if got := s.evictions(); got != float64(i+1) {
			t.Errorf("evictions after new client %d: %v, want %d", i, got, i+1)
		}
		cs = append(cs, n)
	}
	if cs[0].closed() {
		t.Errorf("connection 0 (idle most recently) closed")
	}
	if err := cs[0].get(); err != nil {
		t.Errorf("connection 0 after the evictions: %v", err)
	}
	// Every client closes: every slot is free. A slot freed twice would
	// show here.
	for _, c := range cs {
		c.Close()
	}
	s.settled(t)
}

// TestLimitNoEvictionOfBusyConnections checks that connections serving a
// request are never evicted: a new client waits, unserved, until one of
// them ends; then it is served.
func TestLimitNoEvictionOfBusyConnections(t *testing.T) {
	s := startLimited(t, 2, false, nil)
	a, b := s.dialFrom(t, "127.0.0.1"), s.dialFrom(t, "127.0.0.2")
	for _, c := range []*client{a, b} {
		if err := c.send("/block"); err != nil {
			t.Fatal(err)
		}
		<-s.entered
	}
	c := s.dialFrom(t, "127.0.0.3")
	if err := c.send("/"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.read(300 * time.Millisecond); err == nil {
		t.Fatalf("a third client was served with both connections busy at cap 2")
	}
	if s.evictions() != 0 || a.closed() || b.closed() {
		t.Fatalf("a busy connection was evicted (evictions %v)", s.evictions())
	}
	// The requests in flight end: their connections go idle, and the
	// waiting client takes the place of one.
	close(s.block)
	for _, x := range []*client{a, b} {
		if body, err := x.read(2 * time.Second); err != nil || body != "ok" {
			t.Errorf("request in flight: %q, %v; want ok", body, err)
		}
	}
	if body, err := c.read(2 * time.Second); err != nil || body != "ok" {
		t.Errorf("waiting client, once a connection went idle: %q, %v; want ok", body, err)
	}
	if got := value(s.m.EvictedIdle); got != 1 || !a.closed() && !b.closed() {
		t.Errorf("idle connections evicted: %v, want 1", got)
	}
}

// TestLimitEvictionOrderNew checks the order of eviction at the cap, once
// every connection is past grace: first the one that sent nothing (opened
// last), then the one that sent part of a request, then the one idle
// longest (opened first); each is counted by state.
func TestLimitEvictionOrderNew(t *testing.T) {
	s := startLimited(t, 3, false, nil)
	s.setGrace(100 * time.Millisecond)
	idle := s.idleClients(t, 1)[0]
	partial := s.dial(t)
	if _, err := partial.Write([]byte("GET / HTTP/1.1\r\n")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the partial request read", func() bool { open, _ := s.slots(); return open == 2 })
	time.Sleep(50 * time.Millisecond) // its first bytes read
	silent := s.dial(t)
	waitFor(t, "3 slots taken", func() bool { open, _ := s.slots(); return open == 3 })
	time.Sleep(150 * time.Millisecond) // all past the grace
	for i, want := range []struct {
		victim     *client
		name       string
		new, idles float64
	}{{silent, "silent", 1, 0}, {partial, "partial", 2, 0}, {idle, "idle", 2, 1}} {
		n := s.dial(t)
		if err := n.get(); err != nil {
			t.Fatalf("new client %d at the cap: %v", i, err)
		}
		if !want.victim.closed() {
			t.Errorf("new client %d: the %s connection not closed", i, want.name)
		}
		if got, gotIdle := value(s.m.EvictedNew), value(s.m.EvictedIdle); got != want.new || gotIdle != want.idles {
			t.Errorf("new client %d: evicted new %v, idle %v; want %v, %v", i, got, gotIdle, want.new, want.idles)
		}
		// The new client's connection now idles, newest of all.
		waitFor(t, "the new client idle", func() bool { _, idle := s.slots(); return idle >= 1 })
		defer n.Close()
	}
}

// TestLimitYoungSending checks that connections younger than grace that
// are sending their first request are never closed for a new client: at
// the per-address cap the new one is refused; at the global cap it waits
// until they pass grace, then takes the place of the oldest.
func TestLimitYoungSending(t *testing.T) {
	s := startLimitedPerAddr(t, 4, 2, false, nil)
	s.setGrace(time.Minute)
	var sending []*client
	for range 2 {
		c := s.dialFrom(t, "127.0.0.1")
		c.Write([]byte("GET "))
		sending = append(sending, c)
	}
	waitFor(t, "2 connections", func() bool { open, _ := s.slots(); return open == 2 })
	time.Sleep(50 * time.Millisecond) // their bytes read
	third := s.dialFrom(t, "127.0.0.1")
	third.send("/")
	if !third.closed() || value(s.m.Refused) != 1 {
		t.Errorf("a 3rd client of 127.0.0.1 at its cap of 2 sending connections: not refused (refused %v)", value(s.m.Refused))
	}
	if sending[0].closed() || sending[1].closed() {
		t.Errorf("a connection sending its request, younger than grace, was closed")
	}

	g := startLimited(t, 2, false, nil)
	g.setGrace(500 * time.Millisecond)
	sending = sending[:0]
	for _, from := range []string{"127.0.0.2", "127.0.0.3"} {
		c := g.dialFrom(t, from)
		c.Write([]byte("GET "))
		sending = append(sending, c)
	}
	waitFor(t, "2 connections", func() bool { open, _ := g.slots(); return open == 2 })
	start := time.Now()
	c := g.dialFrom(t, "127.0.0.4")
	if err := c.send("/"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.read(200 * time.Millisecond); err == nil {
		t.Errorf("a client at the global cap was served at once, in place of a connection younger than grace")
	}
	if body, err := c.read(2 * time.Second); err != nil || body != "ok" {
		t.Errorf("the waiting client, once the grace passed: %q, %v", body, err)
	}
	t.Logf("served after %v (grace 500ms)", time.Since(start).Round(time.Millisecond))
	if !sending[0].closed() || sending[1].closed() || value(g.m.EvictedNew) != 1 {
		t.Errorf("closed %v %v, evicted new %v; want the oldest sending connection only", sending[0].closed(), sending[1].closed(), value(g.m.EvictedNew))
	}
}

// TestLimitSilentFlood opens 50 silent connections at cap 8, then a client
// that sends a request: it is served at once (its request waits when it
// is accepted, or comes a moment later), the silent ones having been
// refused or having evicted each other meanwhile.
func TestLimitSilentFlood(t *testing.T) {
	for _, perAddr := range []int{8, 4} {
		s := startLimitedPerAddr(t, 8, perAddr, false, nil)
		var flood []*client
		for range 50 {
			flood = append(flood, s.dial(t))
		}
		waitFor(t, "the flood accepted", func() bool {
			return value(s.m.EvictedNew)+value(s.m.Refused) >= 50-float64(perAddr)
		})
		start := time.Now()
		c := s.dial(t)
		if err := c.get(); err != nil {
			t.Fatalf("per address %d: client after 50 silent connections at cap 8: %v", perAddr, err)
		}
		t.Logf("per address %d: served in %v; silent connections: %v evicted, %v refused", perAddr, time.Since(start).Round(time.Millisecond), value(s.m.EvictedNew), value(s.m.Refused))
		if open, _ := s.slots(); open > perAddr {
			t.Errorf("%d slots taken at cap %d", open, perAddr)
		}
		if got := value(s.m.EvictedNew); got < 1 {
			t.Errorf("evicted new %v: the client took no silent connection's place", got)
		}
		// More silent connections (they may evict the client's, now
		// idle), then a new client: served too.
		for range 20 {
			s.dial(t)
		}
		time.Sleep(100 * time.Millisecond)
		if err := s.dial(t).get(); err != nil {
			t.Errorf("per address %d: a client after 20 more silent connections: %v", perAddr, err)
		}
	}
}

// dialFrom dials s from the loopback address from (127.0.0.x).
func (s *limited) dialFrom(t *testing.T, from string) *client {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", s.l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{Conn: c, br: bufio.NewReader(c)}
}

// TestLimitPerAddress checks the per-address cap: at 3 connections of
// 127.0.0.1 serving requests, a 4th from that address is refused at once
// while one from 127.0.0.2 is served; at 3 silent ones, a 4th takes the
// place of the oldest of that address, never of another address's.
func TestLimitPerAddress(t *testing.T) {
	s := startLimitedPerAddr(t, 10, 3, false, nil)
	var busy []*client
	for range 3 {
		c := s.dialFrom(t, "127.0.0.1")
		if err := c.send("/block"); err != nil {
			t.Fatal(err)
		}
		<-s.entered
		busy = append(busy, c)
	}
	over := s.dialFrom(t, "127.0.0.1")
	over.send("/")
	if !over.closed() {
		t.Errorf("a 4th connection of 127.0.0.1 with 3 serving requests was not closed")
	}
	waitFor(t, "the refusal counted", func() bool { return value(s.m.Refused) == 1 })
	if err := s.dialFrom(t, "127.0.0.2").get(); err != nil {
		t.Errorf("client of 127.0.0.2 while 127.0.0.1 is at its cap: %v", err)
	}
	close(s.block)
	for _, c := range busy {
		c.read(2 * time.Second)
		c.Close()
	}
	waitFor(t, "the busy connections released", func() bool { open, _ := s.slots(); return open <= 1 })

	other := s.dialFrom(t, "127.0.0.3") // silent, oldest of all
	var silent []*client
	for range 3 {
		silent = append(silent, s.dialFrom(t, "127.0.0.1"))
		time.Sleep(20 * time.Millisecond)
	}
	waitFor(t, "5 fresh connections", func() bool { return s.fresh() == 4 })
	if err := s.dialFrom(t, "127.0.0.1").get(); err != nil {
		t.Fatalf("client of 127.0.0.1 at 3 silent connections: %v", err)
	}
	if !silent[0].closed() || silent[1].closed() || silent[2].closed() || other.closed() {
		t.Errorf("closed: 127.0.0.1's %v %v %v, 127.0.0.3's %v; want 127.0.0.1's oldest only", silent[0].closed(), silent[1].closed(), silent[2].closed(), other.closed())
	}
}

// TestAddrKey checks the per-address key: IPv4 addresses, IPv4-mapped
// ones alike, IPv6 by /64.
func TestAddrKey(t *testing.T) {
	for _, c := range []struct {
		ip, want string
	}{
		{"192.0.2.7", "192.0.2.7"},
		{"::ffff:192.0.2.7", "192.0.2.7"},
		{"2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"},
		{"2001:db8:1:2:ffff::1", "2001:db8:1:2::/64"},
		{"::1", "::/64"},
	} {
		if got := addrKey(&net.TCPAddr{IP: net.ParseIP(c.ip), Port: 9}); got != c.want {
			t.Errorf("addrKey(%s) = %q, want %q", c.ip, got, c.want)
		}
	}
}

// TestLimitTLS checks that eviction works under TLS (the server's hook sees
// a *tls.Conn wrapping the limitedConn).
func TestLimitTLS(t *testing.T) {
	s := startLimited(t, 2, true, nil)
	var clients []*http.Client
	for i := range 3 {
		cl := *s.ts.Client()
		cl.Transport = cl.Transport.(*http.Transport).Clone()
		cl.Timeout = 2 * time.Second
		resp, err := cl.Get(s.ts.URL + "/")
		if err != nil {
			t.Fatalf("TLS client %d at cap 2: %v", i, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		clients = append(clients, &cl)
		if i < 2 {
			waitFor(t, "TLS connection idle", func() bool { _, idle := s.slots(); return idle == i+1 })
		}
	}
	if s.evictions() != 1 {
		t.Errorf("evictions with 3 TLS clients at cap 2: %v, want 1", s.evictions())
	}
	for _, cl := range clients {
		cl.CloseIdleConnections()
	}
	s.settledAfter(t, func() error {
		cl := *s.ts.Client()
		tr := cl.Transport.(*http.Transport).Clone()
		cl.Transport = tr
		defer tr.CloseIdleConnections()
		resp, err := cl.Get(s.ts.URL + "/")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		return err
	})
}

// TestLimitCloseWhileWaiting checks that closing the listener ends an
// Accept waiting for a slot (none idle) or for a client (some idle).
func TestLimitCloseWhileWaiting(t *testing.T) {
	for _, idle := range []bool{false, true} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		l := newConnLimiter(1, 1, limitMetrics{}).listen(ln)
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		sc, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer sc.Close()
		if idle {
			connState(sc, http.StateIdle)
		}
		done := make(chan error, 1)
		go func() {
			c, err := l.Accept()
			if c != nil {
				c.Close()
			}
			done <- err
		}()
		time.Sleep(100 * time.Millisecond)
		start := time.Now()
		l.Close()
		select {
		case err := <-done:
			if !errors.Is(err, net.ErrClosed) {
				t.Errorf("idle %v: Accept after Close: %v, want net.ErrClosed", idle, err)
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("idle %v: Accept returned %v after Close", idle, d)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("idle %v: Accept still waiting 5s after Close", idle)
		}
	}
}

// TestLimitConcurrent opens and closes connections from many goroutines at
// cap 8, in every way (the client closes before a request, after one, or
// mid-response; the server closes on Connection: close; idle ones are
// evicted), and checks the slots taken never pass the cap, the server
// never holds more connections than the cap plus those it is closing
// after an eviction, and every slot is freed exactly once at the end.
func TestLimitConcurrent(t *testing.T) {
	const max, workers, rounds = 8, 32, 40
	var serverOpen, serverMax atomic.Int64
	s := startLimited(t, max, false, func(c net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			n := serverOpen.Add(1)
			for m := serverMax.Load(); n > m && !serverMax.CompareAndSwap(m, n); m = serverMax.Load() {
			}
		case http.StateClosed, http.StateHijacked:
			serverOpen.Add(-1)
		}
		connState(c, st)
	})
	stop := make(chan struct{})
	var overCap atomic.Int64
	var mon sync.WaitGroup
	mon.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if open, _ := s.slots(); open > max {
				overCap.Add(1)
			}
			time.Sleep(time.Millisecond)
		}
	})
	var ok, failed, reused atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			var held []net.Conn
			defer func() {
				for _, c := range held {
					c.Close()
				}
			}()
			for range rounds {
				c, err := net.DialTimeout("tcp", s.l.Addr().String(), 2*time.Second)
				if err != nil {
					failed.Add(1)
					continue
				}
				c.SetDeadline(time.Now().Add(3 * time.Second))
				cl := &client{Conn: c, br: bufio.NewReader(c)}
				if len(held) > 0 && rng.IntN(4) == 0 {
					// Reuse a kept connection: it may have
					// been evicted meanwhile (then it fails).
					h := held[len(held)-1]
					held = held[:len(held)-1]
					hc := &client{Conn: h, br: bufio.NewReader(h)}
					h.SetDeadline(time.Now().Add(3 * time.Second))
					if hc.get() == nil {
						ok.Add(1)
						reused.Add(1)
						held = append(held, h)
					} else {
						failed.Add(1)
						h.Close()
					}
				}
				switch rng.IntN(5) {
				case 0: // close before any request
					c.Close()
					continue
				case 1: // the server closes after the response
					fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
				case 2: // close without reading the response
					cl.send("/")
					c.Close()
					continue
				default: // one request, then keep it idle or close it
					cl.send("/")
				}
				if body, err := cl.read(3 * time.Second); err == nil && body == "ok" {
					ok.Add(1)
				} else {
					failed.Add(1)
				}
				if rng.IntN(2) == 0 {
					c.Close()
				} else {
					held = append(held, c)
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	mon.Wait()
	t.Logf("%d workers × %d rounds at cap %d: %d requests answered (%d on a kept connection), %d failed (evicted, refused or waiting); evicted %v new, %v idle; %v refused; at most %d connections open in the server",
		workers, rounds, max, ok.Load(), reused.Load(), failed.Load(), value(s.m.EvictedNew), value(s.m.EvictedIdle), value(s.m.Refused), serverMax.Load())
	if overCap.Load() > 0 {
		t.Errorf("slots taken above the cap %d in %d samples", max, overCap.Load())
	}
	if ok.Load() < workers*rounds/4 {
		t.Errorf("only %d requests answered", ok.Load())
	}
	if s.evictions() == 0 {
		t.Errorf("no eviction: the test did not fill the cap")
	}
	// An evicted connection's goroutine may report StateClosed after the
	// new one's StateNew: allow one per worker racing, no more.
	if m := serverMax.Load(); m > max+workers {
		t.Errorf("server held %d connections at once at cap %d", m, max)
	}
	waitFor(t, "the server closed every connection", func() bool { return serverOpen.Load() == 0 })
	s.settled(t)
}

// unpollable hides the listener's SyscallConn, as vsock's listener has none.
type unpollable struct{ net.Listener }

// TestLimitUnpollableListener checks a listener whose descriptor cannot be
// polled (vsock): at the cap with two idle connections, a new client takes
// the place of one; with two silent ones (just accepted), a client whose
// request comes 50 ms after its connection is waited for (the listener is
// not polled for other clients) and takes the place of one.
func TestLimitUnpollableListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := newMetrics()
	s := &limited{l: newConnLimiter(2, 2, m).listen(unpollable{ln}), m: m}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }), ConnState: connState}
	go srv.Serve(s.l)
	t.Cleanup(func() { srv.Close() })
	cs := s.idleClients(t, 2)
	n := s.dial(t)
	if err := n.get(); err != nil {
		t.Errorf("new client at the cap: %v", err)
	}
	if !cs[0].closed() || value(m.EvictedIdle) != 1 {
		t.Errorf("the connection idle longest not evicted (evicted idle %v)", value(m.EvictedIdle))
	}
	for _, c := range append(cs, n) {
		c.Close()
	}
	waitFor(t, "every slot free", func() bool { open, _ := s.slots(); return open == 0 })
	s.dial(t) // silent
	s.dial(t)
	waitFor(t, "two slots taken", func() bool { open, _ := s.slots(); return open == 2 })
	late := s.dial(t)
	time.Sleep(50 * time.Millisecond)
	if err := late.get(); err != nil {
		t.Errorf("client sending 50 ms after connecting, at the cap with silent connections: %v", err)
	}
	if value(m.EvictedNew) != 1 {
		t.Errorf("evicted new %v, want 1", value(m.EvictedNew))
	}
	if open, _ := s.slots(); open > 2 {
		t.Errorf("%d slots taken at cap 2", open)
	}
}

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
	evicted prometheus.Counter
	block   chan struct{} // /block waits for it to close
	entered chan struct{} // /block sends on it first
}

// startLimited serves, on a limitListener of max connections, / (answers
// "ok") and /block (waits for block to close), over TLS when tls, with
// hook as the ConnState hook (nil: connState).
func startLimited(t *testing.T, max int, tls bool, hook func(net.Conn, http.ConnState)) *limited {
	t.Helper()
	s := &limited{block: make(chan struct{}), entered: make(chan struct{}, 100)}
	s.evicted = prometheus.NewCounter(prometheus.CounterOpts{Name: "evicted_total", Help: "test"})
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	mux.HandleFunc("/block", func(w http.ResponseWriter, r *http.Request) {
		s.entered <- struct{}{}
		<-s.block
		io.WriteString(w, "ok")
	})
	s.ts = httptest.NewUnstartedServer(mux)
	s.l = newLimitListener(s.ts.Listener, max, s.evicted)
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

func (s *limited) evictions() float64 {
	var m dto.Metric
	s.evicted.Write(&m)
	return m.GetCounter().GetValue()
}

// slots returns the slots taken and the connections known idle.
func (s *limited) slots() (open, idle int) {
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	return s.l.open, s.l.idle.Len()
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

// settled waits until every slot is free but the one the Accept waiting
// for the next connection holds: first a fresh connection makes the
// accept loop take a slot again (while the cap was reached it waited for a
// client without one), then the slot counts are polled. A slot freed twice
// shows as 0 (or less), one never freed as 2 or more.
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
		return open <= 1 && idle == 0
	})
	if err := fresh(); err != nil {
		t.Fatalf("fresh connection: %v", err)
	}
	var open, idle int
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if open, idle = s.slots(); open == 1 && idle == 0 {
			return
		}
	}
	t.Errorf("%d slots taken, %d idle; want 1 (the Accept waiting for the next connection), 0", open, idle)
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
	}
	waitFor(t, fmt.Sprintf("%d connections idle", n), func() bool { _, idle := s.slots(); return idle == n })
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
	// Every client closes: one slot stays taken, by the Accept waiting
	// for the next connection. A slot freed twice would show here.
	for _, c := range cs {
		c.Close()
	}
	s.settled(t)
}

// TestLimitNoEvictionOfBusyConnections checks that connections serving a
// request, or that sent no complete request yet, are never evicted: a new
// client waits, unserved, until one of them ends; then it is served.
func TestLimitNoEvictionOfBusyConnections(t *testing.T) {
	s := startLimited(t, 2, false, nil)
	a, b := s.dial(t), s.dial(t)
	if err := a.send("/block"); err != nil {
		t.Fatal(err)
	}
	<-s.entered
	// b has sent half a request: a new connection.
	if _, err := b.Write([]byte("GET / HTTP/1.1\r\n")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "2 slots taken", func() bool { open, _ := s.slots(); return open == 2 })
	c := s.dial(t)
	if err := c.send("/"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.read(300 * time.Millisecond); err == nil {
		t.Fatalf("a third client was served with both connections busy at cap 2")
	}
	if s.evictions() != 0 || a.closed() || b.closed() {
		t.Fatalf("a busy connection was evicted (evictions %v)", s.evictions())
	}
	// The request in flight ends: its connection goes idle, and the
	// waiting client takes its place.
	close(s.block)
	if body, err := a.read(2 * time.Second); err != nil || body != "ok" {
		t.Errorf("request in flight: %q, %v; want ok", body, err)
	}
	if body, err := c.read(2 * time.Second); err != nil || body != "ok" {
		t.Errorf("waiting client, once a connection went idle: %q, %v; want ok", body, err)
	}
	if !a.closed() || s.evictions() != 1 {
		t.Errorf("the idle connection was not the one evicted (evictions %v)", s.evictions())
	}
	// b completes its request: it was never cut.
	if _, err := b.Write([]byte("Host: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	if body, err := b.read(2 * time.Second); err != nil || body != "ok" {
		t.Errorf("the half-sent request: %q, %v; want ok", body, err)
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
		l := newLimitListener(ln, 1, nil)
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
	t.Logf("%d workers × %d rounds at cap %d: %d requests answered (%d on a kept connection), %d failed (evicted or waiting); %v evictions; at most %d connections open in the server",
		workers, rounds, max, ok.Load(), reused.Load(), failed.Load(), s.evictions(), serverMax.Load())
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

// TestLimitUnpollableListener checks the fallback for a listener whose
// descriptor cannot be polled (vsock): at the cap with a connection idle,
// that one is evicted at once (before a client comes), so a new client is
// served, and the cap holds.
func TestLimitUnpollableListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ev := prometheus.NewCounter(prometheus.CounterOpts{Name: "evicted_total", Help: "test"})
	s := &limited{l: newLimitListener(unpollable{ln}, 2, ev), evicted: ev}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }), ConnState: connState}
	go srv.Serve(s.l)
	t.Cleanup(func() { srv.Close() })
	var cs []*client
	for i := range 2 {
		c := s.dial(t)
		if err := c.get(); err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		cs = append(cs, c)
	}
	waitFor(t, "an idle connection evicted ahead of a client", func() bool { return s.evictions() == 1 })
	// Which one: the server marks a connection idle a moment after the
	// client has read its response, so either may have been the idle one
	// at the time. Exactly one is closed.
	var gone []int
	waitFor(t, "the evicted connection closed", func() bool {
		gone = gone[:0]
		for i, c := range cs {
			if c.closed() {
				gone = append(gone, i)
			}
		}
		return len(gone) > 0
	})
	if len(gone) != 1 {
		t.Errorf("evicted ahead: connections %v closed, want one", gone)
	}
	n := s.dial(t)
	if err := n.get(); err != nil {
		t.Errorf("new client: %v", err)
	}
	if open, _ := s.slots(); open > 2 {
		t.Errorf("%d slots taken at cap 2", open)
	}
}

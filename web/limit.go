// SPDX-License-Identifier: Apache-2.0

package web

import (
	"container/list"
	"context"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mdlayher/vsock"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"
)

// connLimiter bounds the connections of a server's listeners together: at
// most max at once, and at most perAddr from one client address (see
// addrKey). Its listeners (limitListener) accept a client as soon as one
// waits, then admit it, or close it at once (refuse it).
//
// A client is admitted while both caps have room. Over either, a
// connection is closed to admit it (one of the client's own address when
// that address is at its cap), the first there is in this order:
//
//  1. the oldest connection accepted at least grace (1 s) ago that has
//     sent nothing yet (http.StateNew, no byte read or waiting);
//  2. the oldest connection accepted at least grace ago that has sent only
//     part of its first request (a request line, some headers, part of a
//     TLS handshake);
//  3. the connection idle longest (between requests, http.StateIdle);
//  4. only for a client whose first bytes are there: the oldest connection
//     accepted less than grace ago that has sent nothing. A client that
//     has sent nothing yet is given up to 200 ms to send them, unless
//     another client waits to be accepted; then it is refused.
//
// A connection accepted less than grace ago that is sending its first
// request (a request comes within a round trip of its connection) is
// never closed: the client waits for it to be served or to pass grace, or
// at the per-address cap is refused. So clients over the cap take the
// place of idle connections, not of each other; connections that send
// nothing take the place only of idle ones and of ones silent for a
// second; and a scraper finds a place even among a flood of silent
// connections from its own address (loopback, one NAT), since its request
// is there when it is accepted, or comes a moment later.
//
// When no connection may be closed, because every connection serves a
// request or has just started sending one: at the per-address cap while
// other addresses may still come in, the client is refused; otherwise
// Accept waits for a connection to end, go idle or pass grace, holding
// that one client while further ones wait in the kernel's accept queue
// (as netutil.LimitListener does). The process never holds more than max
// admitted connections, plus one client per listener being decided.
//
// Connection states come from the server's ConnState hook (connState).
type connLimiter struct {
	max, perAddr int
	grace        time.Duration      // see the order above
	evictedNew   prometheus.Counter // nil: not counted
	evictedIdle  prometheus.Counter
	refused      prometheus.Counter

	mu      sync.Mutex
	open    int            // connections admitted and not yet released
	byAddr  map[string]int // of them, per addrKey
	fresh   list.List      // of *limitedConn with no complete request yet, oldest first
	idle    list.List      // of *limitedConn, idle longest first
	changed chan struct{}  // closed (and replaced) when a slot frees or a connection may be evicted
}

// freshGrace is how long after it was accepted a connection that has sent
// no complete request counts as just arrived (see connLimiter).
const freshGrace = time.Second

// limitMetrics are a connLimiter's counters; nil ones are not counted.
type limitMetrics struct {
	EvictedNew, EvictedIdle, Refused prometheus.Counter
}

// newConnLimiter returns a limiter of max (>= 1) connections, at most
// perAddr (>= 1) of them from one address.
func newConnLimiter(max, perAddr int, m limitMetrics) *connLimiter {
	return &connLimiter{max: max, perAddr: min(perAddr, max), grace: freshGrace, evictedNew: m.EvictedNew, evictedIdle: m.EvictedIdle, refused: m.Refused,
		byAddr: map[string]int{}, changed: make(chan struct{})}
}

// limitListener is a listener whose connections count against a
// connLimiter. The server serving it must have connState as its ConnState
// hook, else no connection is known idle or past its first request: all
// count as sending nothing.
type limitListener struct {
	net.Listener
	lim  *connLimiter
	done chan struct{} // closed by Close
	once sync.Once
}

// limitedConn is a connection accepted by a limitListener: it holds one
// slot until Close or http.StateClosed, or until it is evicted.
type limitedConn struct {
	net.Conn
	lim      *connLimiter
	key      string      // addrKey of the client
	sent     atomic.Bool // a byte was read, or was waiting at accept
	accepted time.Time
	// Guarded by lim.mu.
	in       *list.List    // lim.fresh, lim.idle or nil (serving a request)
	elem     *list.Element // in in
	released bool          // its slot was freed (or handed to a new connection)
}

// listen wraps l to take its connections' slots from c.
func (c *connLimiter) listen(l net.Listener) *limitListener {
	return &limitListener{Listener: l, lim: c, done: make(chan struct{})}
}

// addrKey is the client address a connection counts against for the
// per-address cap: the IPv4 address, the /64 prefix of an IPv6 address
// (what one host is usually given), the context id of a vsock peer, or
// the network name for other sockets (all Unix-socket clients are one).
func addrKey(a net.Addr) string {
	switch a := a.(type) {
	case *net.TCPAddr:
		if ip4 := a.IP.To4(); ip4 != nil {
			return ip4.String()
		}
		return a.IP.Mask(net.CIDRMask(64, 128)).String() + "/64"
	case *vsock.Addr:
		return "vsock:" + strconv.FormatUint(uint64(a.ContextID), 10)
	case nil:
		return ""
	}
	return a.Network()
}

// Accept waits for a client, accepts it, and admits it or closes it as
// connLimiter says. After Close it returns net.ErrClosed (wrapped) or the
// listener's error.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		lc := &limitedConn{Conn: c, lim: l.lim, key: addrKey(c.RemoteAddr()), accepted: time.Now()}
		// A connection that cannot be polled gets the benefit of the
		// doubt: it counts as sending.
		lc.sent.Store(readable(c) != 0)
		ok, err := l.admit(lc)
		if err != nil {
			c.Close()
			return nil, err
		}
		if ok {
			return lc, nil
		}
		c.Close()
		if l.lim.refused != nil {
			l.lim.refused.Inc()
		}
	}
}

// admit gives lc a slot, closing another connection if need be (see
// connLimiter), or waits for one while every connection serves a request. It returns false when lc is refused, and an error
// once the listener is closed.
func (l *limitListener) admit(lc *limitedConn) (bool, error) {
	lim := l.lim
	for {
		lim.mu.Lock()
		// With perAddr at max, the per-address cap is the global
		// one: no other address could come in.
		perAddr := lim.byAddr[lc.key] >= lim.perAddr && lim.perAddr < lim.max
		if !perAddr && lim.open < lim.max {
			lim.addLocked(lc)
			lim.mu.Unlock()
			return true, nil
		}
		victim, block, ripe := lim.victimLocked(lc.key, perAddr, lc.sent.Load())
		if victim != nil {
			lim.addLocked(lc)
			lim.mu.Unlock()
			lim.evict(victim)
			return true, nil
		}
		if block == blockedSilent {
			// New silent connections stand in its way: it may
			// take the place of one once it sends.
			lim.mu.Unlock()
			if !l.awaitFirstBytes(lc) {
				return false, nil
			}
			lc.sent.Store(true)
			continue
		}
		if perAddr && (lim.open < lim.max || lim.fresh.Len()+lim.idle.Len() > 0) {
			// Its address is at its cap, every connection of it
			// busy, while others may still come in.
			lim.mu.Unlock()
			return false, nil
		}
		// Every connection serves a request, or has just started
		// sending one: wait for one to end, go idle, or pass grace.
		ch := lim.changed
		lim.mu.Unlock()
		var timer *time.Timer
		var ripeC <-chan time.Time
		if block == blockedSending {
			timer = time.NewTimer(time.Until(ripe))
			ripeC = timer.C
		}
		select {
		case <-ch:
		case <-ripeC:
		case <-l.done:
			return false, l.closedErr()
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// Why victimLocked found no connection to close.
const (
	blockedBusy    = iota // every connection serves a request
	blockedSilent         // connections younger than grace that have sent nothing stand in the way of a client that has not either
	blockedSending        // connections younger than grace that are sending their first request
)

// addLocked admits lc: it takes a slot and joins the fresh list. c.mu is
// held.
func (c *connLimiter) addLocked(lc *limitedConn) {
	c.open++
	c.byAddr[lc.key]++
	lc.in = &c.fresh
	lc.elem = c.fresh.PushBack(lc)
}

// victimLocked picks the connection to close for a new one (see
// connLimiter): of address key when byKey, else of any; of class 4 only
// when sent (the new client's bytes are there). It frees the victim's
// slot, takes it off its list and returns it; or it returns nil and why
// (blockedBusy, blockedSilent, blockedSending), with, for blockedSending,
// when the oldest of those connections passes grace. c.mu is held.
func (c *connLimiter) victimLocked(key string, byKey, sent bool) (victim *limitedConn, block int, ripe time.Time) {
	const (
		oldSilent = iota
		oldPartial
		idle
		youngSilent
		youngPartial
		classes
	)
	var best [classes]*limitedConn
	cut := time.Now().Add(-c.grace)
	// Oldest first in each list: the first of each class is its victim.
	// Whether a connection has sent something is asked of the socket
	// too, for a request not read yet; the first silent one ends the
	// scan (any older one has sent something).
	for e := c.fresh.Front(); e != nil; e = e.Next() {
		lc := e.Value.(*limitedConn)
		if byKey && lc.key != key {
			continue
		}
		silent := !lc.sent.Load()
		if silent && readable(lc.Conn) != 0 {
			lc.sent.Store(true)
			silent = false
		}
		class := oldSilent
		if !silent {
			class = oldPartial
		}
		if lc.accepted.After(cut) {
			class += youngSilent - oldSilent
		}
		if best[class] == nil {
			best[class] = lc
		}
		if silent {
			break
		}
	}
	for e := c.idle.Front(); e != nil && best[idle] == nil; e = e.Next() {
		if lc := e.Value.(*limitedConn); !byKey || lc.key == key {
			best[idle] = lc
		}
	}
	var v *limitedConn
	for class := range youngPartial {
		if v == nil && (class < youngSilent || sent) {
			v = best[class]
		}
	}
	switch {
	case v != nil:
	case best[youngSilent] != nil:
		return nil, blockedSilent, time.Time{}
	case best[youngPartial] != nil:
		return nil, blockedSending, best[youngPartial].accepted.Add(c.grace)
	default:
		return nil, blockedBusy, time.Time{}
	}
	v.in.Remove(v.elem)
	v.elem = nil
	v.released = true
	c.open--
	c.byAddr[v.key]--
	if c.byAddr[v.key] == 0 {
		delete(c.byAddr, v.key)
	}
	c.broadcastLocked()
	return v, 0, time.Time{}
}

// evict closes v, taken by victimLocked, and counts it. v.in tells which
// list it was on.
func (c *connLimiter) evict(v *limitedConn) {
	v.Conn.Close()
	ctr := c.evictedNew
	if v.in == &c.idle {
		ctr = c.evictedIdle
	}
	if ctr != nil {
		ctr.Inc()
	}
}

// readable tells whether bytes (or an end of file) wait to be read on c,
// without waiting: 1 yes, 0 no, -1 when c cannot be polled.
func readable(c net.Conn) int {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return -1
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return -1
	}
	n := -1
	if err := rc.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, _ = unix.Poll(fds, 0)
	}); err != nil {
		return -1
	}
	return min(max(n, 0), 1)
}

// firstBytesWait is how long a new client that has sent nothing, and that
// only connections younger than grace stand in the way of, is given to
// send its first bytes while no other client waits to be accepted.
const firstBytesWait = 200 * time.Millisecond

// awaitFirstBytes waits up to firstBytesWait for bytes from lc, and
// reports whether they came. It gives up as soon as another client waits
// to be accepted, or the listener is closed: one flood connection after
// another is thus refused at once, while a lone client's request, a moment
// behind its connection, is waited for.
func (l *limitListener) awaitFirstBytes(lc *limitedConn) bool {
	cc, ok := lc.Conn.(syscall.Conn)
	if !ok {
		return true
	}
	crc, err := cc.SyscallConn()
	if err != nil {
		return true
	}
	var lrc syscall.RawConn
	if lsc, ok := l.Listener.(syscall.Conn); ok {
		lrc, _ = lsc.SyscallConn()
	}
	got := false
	poll := func(lfd int32) {
		_ = crc.Control(func(cfd uintptr) {
			fds := []unix.PollFd{{Fd: int32(cfd), Events: unix.POLLIN}, {Fd: lfd, Events: unix.POLLIN}}
			for deadline := time.Now().Add(firstBytesWait); ; {
				left := time.Until(deadline)
				if left <= 0 {
					return
				}
				n, err := unix.Poll(fds, int(min(left, pollInterval)/time.Millisecond)+1)
				if err == unix.EINTR {
					continue
				}
				if err != nil || fds[0].Revents != 0 {
					got = err == nil
					return
				}
				if n > 0 {
					return // another client waits
				}
				select {
				case <-l.done:
					return
				default:
				}
			}
		})
	}
	if lrc == nil || lrc.Control(func(lfd uintptr) { poll(int32(lfd)) }) != nil {
		poll(-1) // a negative descriptor is ignored by poll(2)
	}
	return got
}

// pollInterval is how often awaitFirstBytes checks for Close.
const pollInterval = 50 * time.Millisecond

func (l *limitListener) closedErr() error {
	return &net.OpError{Op: "accept", Net: l.Addr().Network(), Addr: l.Addr(), Err: net.ErrClosed}
}

// Close closes the listener and ends a waiting Accept. Open connections
// stay open (the server closes them).
func (l *limitListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// broadcastLocked wakes every Accept waiting in acquire. c.mu is held.
func (c *connLimiter) broadcastLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// Read reads from the connection, noting that the client has sent
// something.
func (c *limitedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 && !c.sent.Load() {
		c.sent.Store(true)
	}
	return n, err
}

// Close closes the connection and frees its slot (once).
func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}

// release frees the slot of c unless it was freed or handed over already.
func (c *limitedConn) release() {
	lim := c.lim
	lim.mu.Lock()
	defer lim.mu.Unlock()
	if c.released {
		return
	}
	c.released = true
	if c.elem != nil {
		c.in.Remove(c.elem)
		c.elem = nil
	}
	lim.byAddr[c.key]--
	if lim.byAddr[c.key] == 0 {
		delete(lim.byAddr, c.key)
	}
	lim.open--
	lim.broadcastLocked()
}

// setState records a state change of c reported by the server.
func (c *limitedConn) setState(s http.ConnState) {
	if s == http.StateClosed {
		// The server closed it (or saw the client do so, or its
		// IdleTimeout passed): the descriptor is closed.
		c.release()
		return
	}
	lim := c.lim
	lim.mu.Lock()
	defer lim.mu.Unlock()
	if c.released {
		return
	}
	var to *list.List
	switch s {
	case http.StateNew:
		to = &lim.fresh
	case http.StateIdle:
		to = &lim.idle
	}
	// Active (a complete request was read) or hijacked (the handler owns
	// it now; its slot is freed when the handler closes it): on no list.
	if c.in == to {
		return
	}
	if c.elem != nil {
		c.in.Remove(c.elem)
		c.elem = nil
	}
	c.in = to
	if to != nil {
		c.elem = to.PushBack(c)
		lim.broadcastLocked()
	}
}

// connState is the http.Server ConnState hook that tells limitListeners
// the state of their connections. It finds the limitedConn under TLS
// (tls.Conn.NetConn) and ignores connections of other listeners.
func connState(c net.Conn, s http.ConnState) {
	if lc := findLimited(c); lc != nil {
		lc.setState(s)
	}
}

// findLimited returns the limitedConn c is or wraps, or nil.
func findLimited(c net.Conn) *limitedConn {
	for c != nil {
		if lc, ok := c.(*limitedConn); ok {
			return lc
		}
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return nil
		}
		c = u.NetConn()
	}
	return nil
}

// clientKey is the context key of a request's client address key.
type clientKey struct{}

// connContext is the http.Server ConnContext hook: it records the client's
// addrKey for the handlers (see ClientKey).
func connContext(ctx context.Context, c net.Conn) context.Context {
	if lc := findLimited(c); lc != nil {
		return context.WithValue(ctx, clientKey{}, lc.key)
	}
	return context.WithValue(ctx, clientKey{}, addrKey(c.RemoteAddr()))
}

// ClientKey returns the client address of r as the per-address limits
// count it (see addrKey).
func ClientKey(r *http.Request) string {
	if k, ok := r.Context().Value(clientKey{}).(string); ok {
		return k
	}
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		if ip := net.ParseIP(host); ip != nil {
			return addrKey(&net.TCPAddr{IP: ip})
		}
	}
	return r.RemoteAddr
}

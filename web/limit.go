// SPDX-License-Identifier: Apache-2.0

package web

import (
	"container/list"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"
)

// limitListener accepts at most max connections at once. When a client
// connects while max are open, the connection that has been idle (between
// requests, http.StateIdle) the longest is closed to admit it; only when
// none is idle does Accept wait, as netutil.LimitListener does, for one to
// end, the client waiting meanwhile in the kernel's accept queue. So one
// client holding every connection idle cannot lock the others out, and the
// process never holds more than max accepted connections (file
// descriptors).
//
// Connections in http.StateNew (no complete request yet) are bounded by
// ReadHeaderTimeout and active ones are serving: neither is evicted.
// Connection states come from the server's ConnState hook (connState).
type limitListener struct {
	net.Listener
	max     int
	evicted prometheus.Counter // nil: not counted
	done    chan struct{}      // closed by Close
	once    sync.Once

	mu      sync.Mutex
	open    int           // slots taken: connections accepted, not yet released
	idle    list.List     // of *limitedConn, idle longest first
	changed chan struct{} // closed (and replaced) when a slot frees or a connection goes idle
}

// limitedConn is a connection accepted by a limitListener: it holds one
// slot until Close or http.StateClosed, or until it is evicted.
type limitedConn struct {
	net.Conn
	l *limitListener
	// Guarded by l.mu.
	elem     *list.Element // in l.idle while idle
	released bool          // its slot was freed (or handed to a new connection)
}

// newLimitListener wraps l to hold at most max (>= 1) connections, counting
// evictions in evicted (nil: not counted). The server serving it must have
// connState as its ConnState hook, else no connection is known idle and
// the listener behaves like netutil.LimitListener.
func newLimitListener(l net.Listener, max int, evicted prometheus.Counter) *limitListener {
	return &limitListener{Listener: l, max: max, evicted: evicted, done: make(chan struct{}), changed: make(chan struct{})}
}

// Accept waits for a slot (see limitListener), then for a connection.
// After Close it returns net.ErrClosed (wrapped) or the listener's error.
func (l *limitListener) Accept() (net.Conn, error) {
	if err := l.acquire(); err != nil {
		return nil, err
	}
	c, err := l.Listener.Accept()
	if err != nil {
		l.mu.Lock()
		l.open--
		l.broadcastLocked()
		l.mu.Unlock()
		return nil, err
	}
	return &limitedConn{Conn: c, l: l}, nil
}

// acquire takes a slot: a free one, or that of the connection idle longest
// once a client is waiting to be accepted, or it waits for one of these.
// It returns an error once the listener is closed.
func (l *limitListener) acquire() error {
	for {
		l.mu.Lock()
		if l.open < l.max {
			l.open++
			l.mu.Unlock()
			return nil
		}
		if l.idle.Len() == 0 {
			ch := l.changed
			l.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-l.done:
				return l.closedErr()
			}
		}
		l.mu.Unlock()
		// Evict only for a client that is there: an idle connection
		// (Prometheus's own, kept alive between scrapes) stays open
		// until someone needs its slot.
		// On a poll error, evict now; Accept reports the error, if any.
		_ = l.waitPending()
		select {
		case <-l.done:
			return l.closedErr()
		default:
		}
		l.mu.Lock()
		if l.open < l.max {
			l.open++
			l.mu.Unlock()
			return nil
		}
		front := l.idle.Front()
		if front == nil {
			// Every idle connection went active meanwhile.
			l.mu.Unlock()
			continue
		}
		victim := front.Value.(*limitedConn)
		l.idle.Remove(front)
		victim.elem = nil
		victim.released = true // its slot passes to the new connection
		l.mu.Unlock()
		victim.Conn.Close()
		if l.evicted != nil {
			l.evicted.Inc()
		}
		return nil
	}
}

// pollInterval is how often waitPending checks for Close.
const pollInterval = 100 * time.Millisecond

// waitPending waits until a client waits to be accepted, or the listener
// is closed, for listeners whose descriptor can be polled (TCP and Unix
// ones, also those passed by systemd). For others (vsock) it returns at
// once: the connection idle longest is then evicted just before the Accept
// that waits for the next client. It returns the error of the poll.
//
// The poll runs inside RawConn.Control (a listener's RawConn has no Read),
// which keeps the descriptor from being closed under it; Close waits for
// it, at most pollInterval.
func (l *limitListener) waitPending() error {
	sc, ok := l.Listener.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	var perr error
	err = rc.Control(func(fd uintptr) {
		for {
			select {
			case <-l.done:
				return
			default:
			}
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			n, err := unix.Poll(fds, int(pollInterval/time.Millisecond))
			switch {
			case err == unix.EINTR:
			case err != nil:
				perr = err
				return
			case n > 0:
				return
			}
		}
	})
	if err != nil {
		return err
	}
	return perr
}

func (l *limitListener) closedErr() error {
	return &net.OpError{Op: "accept", Net: l.Addr().Network(), Addr: l.Addr(), Err: net.ErrClosed}
}

// Close closes the listener and ends a waiting Accept. Open connections
// stay open (the server closes them).
func (l *limitListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// broadcastLocked wakes every Accept waiting in acquire. l.mu is held.
func (l *limitListener) broadcastLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// Close closes the connection and frees its slot (once).
func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}

// release frees the slot of c unless it was freed or handed over already.
func (c *limitedConn) release() {
	l := c.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.released {
		return
	}
	c.released = true
	if c.elem != nil {
		l.idle.Remove(c.elem)
		c.elem = nil
	}
	l.open--
	l.broadcastLocked()
}

// setState records a state change of c reported by the server.
func (c *limitedConn) setState(s http.ConnState) {
	if s == http.StateClosed {
		// The server closed it (or saw the client do so, or its
		// IdleTimeout passed): the descriptor is closed.
		c.release()
		return
	}
	l := c.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.released {
		return
	}
	switch s {
	case http.StateIdle:
		if c.elem == nil {
			c.elem = l.idle.PushBack(c)
			l.broadcastLocked()
		}
	default:
		// New, active, or hijacked (the handler owns it now; its slot
		// is freed when the handler closes it).
		if c.elem != nil {
			l.idle.Remove(c.elem)
			c.elem = nil
		}
	}
}

// connState is the http.Server ConnState hook that tells limitListeners
// which of their connections are idle. It finds the limitedConn under TLS
// (tls.Conn.NetConn) and ignores connections of other listeners.
func connState(c net.Conn, s http.ConnState) {
	for c != nil {
		if lc, ok := c.(*limitedConn); ok {
			lc.setState(s)
			return
		}
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return
		}
		c = u.NetConn()
	}
}

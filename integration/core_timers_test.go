// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"io"
	"net"
	"testing"
	"time"
)

// tcpPingPong opens conns TCP connections to a listener on 127.0.0.1, and
// on each does rounds 1-byte request/response exchanges before closing.
func tcpPingPong(t *testing.T, conns, rounds int) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	b := make([]byte, 1)
	for i := range conns {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatalf("dial #%d: %v", i, err)
		}
		for r := range rounds {
			b[0] = byte(r)
			if _, err := c.Write(b); err != nil {
				t.Fatalf("conn %d write: %v", i, err)
			}
			if _, err := io.ReadFull(c, b); err != nil {
				t.Fatalf("conn %d read: %v", i, err)
			}
		}
		c.Close()
	}
}

// TestTimerStarts runs a loopback TCP workload, 200 connections with 10
// one-byte ping-pongs each, and checks the timer-start counts of two TCP
// timer functions moved by at least one per connection.
//
// Lower bounds, from how the kernel arms these timers: timer:timer_start
// fires whenever mod_timer enqueues a timer, which it always does for a
// timer that is not pending (re-arming a pending timer into the same wheel
// bucket is skipped without an event, so only first arms are certain).
//   - reqsk_timer_handler: every SYN received by the listener creates a
//     request socket and arms its SYN-ACK retransmit timer, a fresh timer:
//     exactly one start per connection.
//   - tcp_write_timer: every connect() sends a SYN and arms the new
//     socket's retransmit timer, also fresh: at least one start per
//     connection (data sends re-arm it, but not always with an event).
//
// Measured on the development VM (Linux 6.18): reqsk_timer_handler +200,
// tcp_write_timer +1000..+1008, tcp_keepalive_timer +~1000 (Go enables
// keepalive), tcp_delack_timer +~410. Other traffic only adds.
func TestTimerStarts(t *testing.T) {
	const (
		metric = "kernel_timer_starts_total"
		conns  = 200
		rounds = 10
	)
	e := Start(t, "--programs=timers")
	before := e.Scrape()
	tcpPingPong(t, conns, rounds)
	for _, fn := range []string{"reqsk_timer_handler", "tcp_write_timer"} {
		var d float64
		Eventually(t, 5*time.Second, func() bool {
			d = e.Scrape().Value(metric, L("function", fn)) - before.Value(metric, L("function", fn))
			return d >= conns
		}, "%s{function=%q} moved by %v after %d loopback connections, want >= %d", metric, fn, d, conns, conns)
		t.Logf("%s{function=%q}: +%v for %d connections × %d round trips", metric, fn, d, conns, rounds)
	}
}

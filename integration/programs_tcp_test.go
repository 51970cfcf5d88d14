// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// tcpInfo returns TCP_INFO of socket fd.
func tcpInfo(fd int) (*unix.TCPInfo, error) {
	ti, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
	if err != nil {
		return nil, fmt.Errorf("getsockopt TCP_INFO: %w", err)
	}
	return ti, nil
}

// connFD returns the file descriptor of a net.Conn or net.Listener.
func connFD(t *testing.T, c syscall.Conn) int {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var fd int
	if err := rc.Control(func(f uintptr) { fd = int(f) }); err != nil {
		t.Fatal(err)
	}
	return fd
}

// waitTCPInfo polls TCP_INFO of fd every 20 ms until cond holds, for up to
// d, and returns the last value.
func waitTCPInfo(t *testing.T, fd int, d time.Duration, cond func(*unix.TCPInfo) bool, what string) *unix.TCPInfo {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ti, err := tcpInfo(fd)
		if err != nil {
			t.Fatal(err)
		}
		if cond(ti) {
			return ti
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v (state %d, total_retrans %d, unacked %d)", what, d, ti.State, ti.Total_retrans, ti.Unacked)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestProgramTCPRetransmits makes TCP retransmit in a private network
// namespace, on an established connection and on a handshake, and checks
// tcp_retransmits counted exactly the retransmits the sockets themselves
// report (tcpi_total_retrans), under the service port and TCP state:
//
//   - established: a client connected to port p sends data while an
//     iptables rule drops everything to p; once it has retransmitted at
//     least twice the rule is removed and the data gets through, after
//     which it retransmits no more.
//   - handshake: a connect() to port q, whose SYNs are dropped, retransmits
//     its SYN after 1 s (and next at 3 s); it is closed after the first.
//
// The ports are random service ports (below 32768) of the namespace; with
// no other connection on the machine using them, the counts are exact.
func TestProgramTCPRetransmits(t *testing.T) {
	const metric = "kernel_tcp_retransmits_total"
	p := 20000 + rand.IntN(10000)
	q := p + 1
	ns := newNetns(t)
	var ln net.Listener
	var client net.Conn
	var synFD int
	inNetns(t, ns, func() error {
		var err error
		if ln, err = net.Listen("tcp4", "127.0.0.1:"+strconv.Itoa(p)); err != nil {
			return err
		}
		if client, err = net.Dial("tcp4", ln.Addr().String()); err != nil {
			return err
		}
		if synFD, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0); err != nil {
			return err
		}
		return nil
	})
	defer ln.Close()
	defer client.Close()
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	synClosed := false
	defer func() {
		if !synClosed {
			unix.Close(synFD)
		}
	}()
	for _, port := range []int{p, q} {
		nsCmd(t, ns, "iptables", "-w", "-A", "INPUT", "-p", "tcp", "--dport", strconv.Itoa(port), "-j", "DROP")
	}

	e := Start(t, "--programs=tcp_retransmits")
	before := e.Scrape()
	if v := before.Value("kernel_exporter_config_up", L("config", "tcp_retransmits")); v != 1 {
		t.Fatalf("config_up{config=tcp_retransmits} = %v, want 1\n%s", v, e.Logs())
	}

	if err := unix.Connect(synFD, loopback4(q)); !errors.Is(err, unix.EINPROGRESS) {
		t.Fatalf("non-blocking connect to port %d: %v, want EINPROGRESS", q, err)
	}
	clientFD := connFD(t, client.(*net.TCPConn))
	if _, err := client.Write(make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	waitTCPInfo(t, clientFD, 5*time.Second, func(ti *unix.TCPInfo) bool { return ti.Total_retrans >= 2 }, "two data retransmits")
	nsCmd(t, ns, "iptables", "-w", "-D", "INPUT", "-p", "tcp", "--dport", strconv.Itoa(p), "-j", "DROP")
	if _, err := server.Read(make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	dataInfo := waitTCPInfo(t, clientFD, 5*time.Second, func(ti *unix.TCPInfo) bool { return ti.Unacked == 0 }, "retransmitted data acknowledged")

	// The SYN is retransmitted 1 s after connect(), then 3 s after.
	synInfo := waitTCPInfo(t, synFD, 5*time.Second, func(ti *unix.TCPInfo) bool { return ti.Total_retrans >= 1 }, "SYN retransmit")
	if synInfo.State != uint8(2) { // TCP_SYN_SENT
		t.Fatalf("connecting socket in state %d, want SYN_SENT (2)", synInfo.State)
	}
	unix.Close(synFD)
	synClosed = true

	after := e.Scrape()
	for _, c := range []struct {
		port, state string
		want        uint32
	}{
		{strconv.Itoa(p), "ESTABLISHED", dataInfo.Total_retrans},
		{strconv.Itoa(q), "SYN_SENT", synInfo.Total_retrans},
	} {
		l := L("port", c.port, "state", c.state, "result", "sent")
		d := after.Value(metric, l) - before.Value(metric, l)
		t.Logf("%s{port=%s,state=%s,result=sent} +%v; the socket reports %d retransmits", metric, c.port, c.state, d, c.want)
		if d != float64(c.want) {
			t.Errorf("%s{port=%s,state=%s,result=sent} moved by %v, want exactly %d (tcpi_total_retrans)\n%s",
				metric, c.port, c.state, d, c.want, after.seriesDump(metric))
		}
	}
	// The client's ephemeral port never becomes a label.
	clientPort := client.LocalAddr().(*net.TCPAddr).Port
	if after.Series(metric, L("port", strconv.Itoa(clientPort))) != 0 {
		t.Errorf("ephemeral port %d is a label value\n%s", clientPort, after.seriesDump(metric))
	}
}

// TestProgramTCPStates opens k connections to a listener and makes m
// connects to a closed port, in a private network namespace, and checks the
// state transitions and handshake-time histograms of tcp_states:
//
//	per accepted connection: client SYN_SENT→ESTABLISHED, server child
//	LISTEN→SYN_RECV→ESTABLISHED; then the client closes first:
//	ESTABLISHED→FIN_WAIT1 on the client, ESTABLISHED→CLOSE_WAIT and
//	CLOSE_WAIT→LAST_ACK on the server;
//	per refused connect (RST): SYN_SENT→CLOSE.
//
// The program sees every TCP socket of the machine (including the test's
// own HTTP connections to the exporter), so each count is a lower bound:
// at least what we caused.
func TestProgramTCPStates(t *testing.T) {
	const (
		k       = 20
		m       = 10
		metric  = "kernel_tcp_state_transitions_total"
		synSent = "kernel_tcp_syn_sent_seconds"
		synRecv = "kernel_tcp_syn_recv_seconds"
	)
	ns := newNetns(t)
	e := Start(t, "--programs=tcp_states")
	before := e.Scrape()
	if v := before.Value("kernel_exporter_config_up", L("config", "tcp_states")); v != 1 {
		t.Fatalf("config_up{config=tcp_states} = %v, want 1\n%s", v, e.Logs())
	}

	inNetns(t, ns, func() error {
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			return err
		}
		defer ln.Close()
		for i := range k {
			c, err := net.Dial("tcp4", ln.Addr().String())
			if err != nil {
				return fmt.Errorf("dial #%d: %w", i, err)
			}
			s, err := ln.Accept()
			if err != nil {
				return fmt.Errorf("accept #%d: %w", i, err)
			}
			c.Close()
			// Wait for the client's FIN, then close: CLOSE_WAIT→LAST_ACK.
			if _, err := s.Read(make([]byte, 1)); err == nil {
				return fmt.Errorf("conn #%d: read data, want EOF", i)
			}
			s.Close()
		}
		for i := range m {
			if c, err := net.Dial("tcp4", "127.0.0.1:9"); err == nil {
				c.Close()
				return fmt.Errorf("connect #%d to closed port 9 succeeded", i)
			}
		}
		return nil
	})

	var after Metrics
	tr := func(ms Metrics, from, to string) float64 {
		return ms.Value(metric, L("from", from, "to", to)) - before.Value(metric, L("from", from, "to", to))
	}
	want := []struct {
		from, to string
		atLeast  float64
	}{
		{"SYN_SENT", "ESTABLISHED", k},
		{"LISTEN", "SYN_RECV", k},
		{"SYN_RECV", "ESTABLISHED", k},
		{"ESTABLISHED", "FIN_WAIT1", k},
		{"ESTABLISHED", "CLOSE_WAIT", k},
		{"CLOSE_WAIT", "LAST_ACK", k},
		{"SYN_SENT", "CLOSE", m},
	}
	// The last ACKs of the closes are processed in softirq context right
	// after our close() calls; poll briefly rather than race them.
	missing := func() string {
		s := ""
		for _, w := range want {
			if d := tr(after, w.from, w.to); d < w.atLeast {
				s += fmt.Sprintf("  %s→%s +%v, want >= %v\n", w.from, w.to, d, w.atLeast)
			}
		}
		return s
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		after = e.Scrape()
		if missing() == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("transitions below their lower bounds after 5 s:\n%s%s", missing(), after.seriesDump(metric))
		}
	}
	for _, w := range want {
		t.Logf("%s{from=%s,to=%s} +%v (caused: %v)", metric, w.from, w.to, tr(after, w.from, w.to), w.atLeast)
	}
	// A closed socket goes to TIME_WAIT as a separate timewait socket: the
	// tracepoint never reports a transition to TIME_WAIT.
	if after.Series(metric, L("to", "TIME_WAIT")) != 0 {
		t.Errorf("a transition to TIME_WAIT was reported\n%s", after.seriesDump(metric))
	}

	for _, h := range []struct {
		name, to string
		atLeast  uint64
	}{
		{synSent, "ESTABLISHED", k},
		{synSent, "CLOSE", m},
		{synRecv, "ESTABLISHED", k},
	} {
		c1, s1, _ := after.Hist(h.name, L("to", h.to), 1)
		c0, s0, _ := before.Hist(h.name, L("to", h.to), 1)
		n, sum := c1-c0, s1-s0
		t.Logf("%s{to=%s}: +%d observations, mean %.1f µs", h.name, h.to, n, sum/float64(n)*1e6)
		if n < h.atLeast {
			t.Errorf("%s{to=%s} count moved by %d, want >= %d\n%s", h.name, h.to, n, h.atLeast, after.seriesDump(h.name))
		}
		// Loopback handshakes take microseconds; only retransmitted SYNs
		// (1 s and more) would push the mean near a second.
		if n > 0 && sum/float64(n) > 0.5 {
			t.Errorf("%s{to=%s} mean %v s, want < 0.5 s on loopback", h.name, h.to, sum/float64(n))
		}
	}
}

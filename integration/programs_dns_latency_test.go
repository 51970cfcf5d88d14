// SPDX-License-Identifier: Apache-2.0

package integration

import (
	encbin "encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// dnsQuery is a query for "kx.test. IN A" with id and RD set.
func dnsQuery(id uint16) []byte {
	q := make([]byte, 12, 32)
	encbin.BigEndian.PutUint16(q[0:], id)
	q[2] = 0x01                          // RD
	encbin.BigEndian.PutUint16(q[4:], 1) // QDCOUNT
	q = append(q, 2, 'k', 'x', 4, 't', 'e', 's', 't', 0)
	return append(q, 0, 1, 0, 1) // QTYPE A, QCLASS IN
}

// serveDNS answers every query read from fd after delay, each in its own
// goroutine: the same id and question, QR set, no answer, and rcode
// NXDOMAIN (3) for odd ids, NOERROR (0) for even ones. It returns when fd
// is shut down.
func serveDNS(fd int, delay time.Duration, wg *sync.WaitGroup) {
	defer wg.Done()
	buf := make([]byte, 512)
	for {
		n, from, err := unix.Recvfrom(fd, buf, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n == 0 || from == nil {
			return
		}
		if n < 12 {
			continue
		}
		resp := append([]byte(nil), buf[:n]...)
		resp[2] |= 0x80 // QR
		resp[3] = 0x80  // RA, rcode 0
		if encbin.BigEndian.Uint16(resp)&1 == 1 {
			resp[3] |= 3 // NXDOMAIN
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(delay)
			unix.Sendto(fd, resp, 0, from)
		}()
	}
}

// TestProgramDNSLatency runs a tiny DNS server on 127.0.0.1:53 in a
// private network namespace that answers after 300 ms, NOERROR to even
// ids and NXDOMAIN to odd ones, and sends it 8 + 8 queries at once from
// 16 UDP sockets (half with sendto/recvfrom, half with write/read on a
// connected socket), and 2 + 2 more to the same server on [::1]:53. The
// latency histogram must have exactly 10 of each rcode in the buckets (2^28, 2^31] ns = (268 ms, 2.1 s] (the upper end
// leaves room for the matrix's emulated guest, where 16 concurrent
// queries take up to 0.8 s): DNS traffic of the rest of the machine,
// counted under the same rcodes, is not that slow in practice; everything
// else is checked as a lower bound.
func TestProgramDNSLatency(t *testing.T) {
	checkDNSLatency(t, nil)
}

// TestMatrixDNSLatency is TestProgramDNSLatency as a row of the kernel
// matrix (make test-kernels runs only TestMatrix* tests).
func TestMatrixDNSLatency(t *testing.T) {
	r := matrixReport(t, "dns_latency", "default")
	r.result = "moved: " + checkDNSLatency(t, r)
}

// checkDNSLatency runs TestProgramDNSLatency's workload and checks; with r
// set it records the attach kinds there. It returns a summary.
func checkDNSLatency(t *testing.T, r *matrixRow) string {
	t.Helper()
	const (
		n       = 8 // IPv4 queries of each kind
		n6      = 4 // IPv6 queries, half of each rcode
		delay   = 300 * time.Millisecond
		hist    = "kernel_dns_query_latency_seconds"
		queries = "kernel_dns_queries_total"
		loLE    = 0.268435456 // 2^28 ns
		hiLE    = 2.147483648 // 2^31 ns
	)
	ns := newThreadNetns(t)
	var server, server6 int
	clients := make([]int, 2*n+n6)
	err := ns.Run(func() (err error) {
		if server, err = udpSocket(t, loopback4(53)); err != nil {
			return err
		}
		if server6, err = udpSocket(t, loopback6(53)); err != nil {
			return err
		}
		for i := range clients {
			bind := loopback4(0)
			if i >= 2*n {
				bind = loopback6(0)
			}
			if clients[i], err = udpSocket(t, bind); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var srv sync.WaitGroup
	srv.Add(2)
	go serveDNS(server, delay, &srv)
	go serveDNS(server6, delay, &srv)
	t.Cleanup(func() {
		unix.Shutdown(server, unix.SHUT_RDWR)
		unix.Shutdown(server6, unix.SHUT_RDWR)
		srv.Wait()
	})

	e := Start(t, "--programs=dns_latency")
	if r != nil {
		checkChoice(t, e, "dns_latency", "tracepoint", r)
	}
	before := e.Scrape()
	if v := before.Value("kernel_exporter_config_up", L("config", "dns_latency")); v != 1 {
		t.Fatalf("config_up{config=dns_latency} = %v, want 1\n%s", v, e.Logs())
	}

	errc := make(chan error, len(clients))
	start := time.Now()
	for i, fd := range clients {
		go func() {
			id := uint16(0x4000 + i) // even: NOERROR, odd: NXDOMAIN
			buf := make([]byte, 512)
			var got int
			var err error
			if i < n || i >= 2*n {
				to := loopback4(53)
				if i >= 2*n {
					to = loopback6(53)
				}
				if err = unix.Sendto(fd, dnsQuery(id), 0, to); err == nil {
					got, _, err = unixRecvfrom(fd, buf)
				}
			} else {
				if err = unix.Connect(fd, loopback4(53)); err == nil {
					if _, err = unix.Write(fd, dnsQuery(id)); err == nil {
						got, err = unix.Read(fd, buf)
					}
				}
			}
			if err == nil && (got < 12 || encbin.BigEndian.Uint16(buf) != id) {
				err = fmt.Errorf("bad answer of %d bytes", got)
			}
			if err != nil {
				err = fmt.Errorf("query %#x: %w", id, err)
			}
			errc <- err
		}()
	}
	for range clients {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d queries answered in %v", len(clients), time.Since(start))
	after := e.Scrape()

	var summary []string
	for _, rcode := range []string{"NOERROR", "NXDOMAIN"} {
		lbl := L("rcode", rcode)
		c0, s0, lo0 := before.Hist(hist, lbl, loLE)
		_, _, hi0 := before.Hist(hist, lbl, hiLE)
		c1, s1, lo1 := after.Hist(hist, lbl, loLE)
		_, _, hi1 := after.Hist(hist, lbl, hiLE)
		if lo1 < 0 || hi1 < 0 {
			t.Fatalf("%s{rcode=%s}: no buckets le=%v and le=%v\n%s", hist, rcode, loLE, hiLE, after.seriesDump(hist))
		}
		band := (hi1 - max(hi0, 0)) - (lo1 - max(lo0, 0))
		t.Logf("%s{rcode=%s}: count +%d, sum +%.3fs, %d in (%v, %v]", hist, rcode, c1-c0, s1-s0, band, loLE, hiLE)
		summary = append(summary, fmt.Sprintf("%s %d (%d in 0.27-2.1 s)", rcode, c1-c0, band))
		const each = n + n6/2
		if band != each {
			t.Errorf("%s{rcode=%s}: %d observations in (%vs, %vs], want exactly %d\n%s", hist, rcode, band, loLE, hiLE, each, after.seriesDump(hist))
		}
		if c1-c0 < each || s1-s0 < each*delay.Seconds() {
			t.Errorf("%s{rcode=%s}: count +%d, sum +%vs; want >= %d and >= %vs", hist, rcode, c1-c0, s1-s0, each, each*delay.Seconds())
		}
	}
	for _, q := range []struct {
		family string
		want   int
	}{{"inet", 2 * n}, {"inet6", n6}} {
		if d := after.Value(queries, L("family", q.family)) - before.Value(queries, L("family", q.family)); d < float64(q.want) {
			t.Errorf("%s{family=%s} moved by %v, want >= %d\n%s", queries, q.family, d, q.want, after.seriesDump(queries))
		}
	}
	return strings.Join(summary, ", ")
}

// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestProgramRcvqueueFull fills three kinds of receive buffers in a private
// network namespace and checks the rcvqueue_full counters against the
// sockets' own drop counts (SO_MEMINFO):
//
//   - an ICMP "ping" socket with a minimal receive buffer that never reads
//     gets n echo replies: all but the first few are refused by the generic
//     socket receive path, each firing sock:sock_rcvqueue_full;
//   - a UDP socket on a random service port with a minimal receive buffer
//     gets n datagrams: each refused one fires udp:udp_fail_queue_rcv_skb
//     with ENOMEM, and is counted under that port: exactly the socket's
//     drops, as no other socket of the machine uses that port;
//   - a UDP socket with a large receive buffer (SO_RCVBUFFORCE) gets n
//     datagrams while net.ipv4.udp_mem is lowered for a moment to 64 pages:
//     UDP's memory accounting refuses them (sock:sock_exceed_buf_limit,
//     protocol udp, kind receive). udp_mem is a machine-wide setting; the
//     old value is restored right after the burst, and at cleanup.
//
// The ping and udp_mem counts are labeled by protocol only and include any
// other such event on the machine, so they are lower bounds.
func TestProgramRcvqueueFull(t *testing.T) {
	const (
		n         = 300
		rcvq      = "kernel_socket_rcvqueue_full_total"
		limit     = "kernel_socket_buffer_limit_exceeded_total"
		udpErrors = "kernel_udp_receive_errors_total"
	)
	ns := newNetns(t)
	// Unprivileged ICMP sockets are off by default; allow them for root's
	// group in this namespace only.
	nsCmd(t, ns, "sh", "-c", "echo 0 0 > /proc/sys/net/ipv4/ping_group_range")
	var ping, udpTx, udpSmall, udpBig int
	inNetns(t, ns, func() (err error) {
		if ping, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMP); err != nil {
			return err
		}
		t.Cleanup(func() { unix.Close(ping) })
		if err = unix.SetsockoptInt(ping, unix.SOL_SOCKET, unix.SO_RCVBUF, 1); err != nil {
			return err
		}
		if udpTx, err = udpSocket(t, loopback4(0)); err != nil {
			return err
		}
		if udpSmall, err = udpSocket(t, loopback4(20000+rand.IntN(10000))); err != nil {
			return err
		}
		if err = unix.SetsockoptInt(udpSmall, unix.SOL_SOCKET, unix.SO_RCVBUF, 1); err != nil {
			return err
		}
		if udpBig, err = udpSocket(t, loopback4(0)); err != nil {
			return err
		}
		return unix.SetsockoptInt(udpBig, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 32<<20)
	})
	smallPort, _ := localPort(udpSmall)
	bigPort, _ := localPort(udpBig)

	e := Start(t, "--programs=rcvqueue_full")
	before := e.Scrape()
	if v := before.Value("kernel_exporter_config_up", L("config", "rcvqueue_full")); v != 1 {
		t.Fatalf("config_up{config=rcvqueue_full} = %v, want 1\n%s", v, e.Logs())
	}

	// Echo requests: type 8, code 0; the kernel fills in id and checksum.
	echo := append([]byte{8, 0, 0, 0, 0, 0, 0, 0}, make([]byte, 56)...)
	for i := range n {
		echo[7] = byte(i)
		if err := unix.Sendto(ping, echo, 0, loopback4(0)); err != nil {
			t.Fatalf("ping #%d: %v", i, err)
		}
	}
	if err := sendN(udpTx, loopback4(smallPort), n, 1000); err != nil {
		t.Fatal(err)
	}
	udpMemBurst(t, func() {
		if err := sendN(udpTx, loopback4(bigPort), n*10, 1400); err != nil {
			t.Fatal(err)
		}
	})
	after := e.Scrape()

	drops := func(fd int) uint32 {
		d, err := socketDrops(fd)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	pingDrops, smallDrops, bigDrops := drops(ping), drops(udpSmall), drops(udpBig)
	t.Logf("socket drops: ping %d, small UDP %d, udp_mem %d", pingDrops, smallDrops, bigDrops)
	for _, c := range []struct {
		what string
		n    uint32
	}{{"ping", pingDrops}, {"small UDP", smallDrops}} {
		if c.n < n-5 {
			t.Fatalf("%s socket dropped %d of %d packets, want nearly all", c.what, c.n, n)
		}
	}

	delta := func(name string, l map[string]string) float64 { return after.Value(name, l) - before.Value(name, l) }
	if d := delta(rcvq, L("family", "inet", "protocol", "icmp")); d < float64(pingDrops) {
		t.Errorf("%s{family=inet,protocol=icmp} moved by %v, want >= %d\n%s", rcvq, d, pingDrops, after.seriesDump(rcvq))
	} else {
		t.Logf("%s{family=inet,protocol=icmp} +%v", rcvq, d)
	}
	if d := delta(udpErrors, L("port", strconv.Itoa(smallPort), "errno", "ENOMEM")); d != float64(smallDrops) {
		t.Errorf("%s{port=%d,errno=ENOMEM} moved by %v, want exactly %d\n%s", udpErrors, smallPort, d, smallDrops, after.seriesDump(udpErrors))
	} else {
		t.Logf("%s{port=%d,errno=ENOMEM} +%v", udpErrors, smallPort, d)
	}
	// Each refused allocation is one event and one dropped datagram (the
	// 32 MiB buffer itself never fills: 3000 datagrams take about 10 MB).
	if bigDrops < 1 {
		t.Fatalf("no datagram was dropped while udp_mem was 64 pages")
	}
	d := delta(limit, L("protocol", "udp", "kind", "receive"))
	t.Logf("%s{protocol=udp,kind=receive} +%v", limit, d)
	if d < float64(bigDrops) {
		t.Errorf("%s{protocol=udp,kind=receive} moved by %v, want >= %d\n%s", limit, d, bigDrops, after.seriesDump(limit))
	}
}

// udpMemBurst runs fn with net.ipv4.udp_mem lowered to 16 32 64 pages
// (machine-wide), and restores the old value right after, or at cleanup
// if fn fails the test.
func udpMemBurst(t *testing.T, fn func()) {
	t.Helper()
	const file = "/proc/sys/net/ipv4/udp_mem"
	old, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	restored := false
	restore := func() {
		if restored {
			return
		}
		restored = true
		if err := os.WriteFile(file, old, 0o644); err != nil {
			t.Errorf("restore %s to %q: %v", file, strings.TrimSpace(string(old)), err)
		}
	}
	t.Cleanup(restore)
	if err := os.WriteFile(file, []byte("16 32 64"), 0o644); err != nil {
		t.Fatal(err)
	}
	fn()
	restore()
}

// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"fmt"
	"regexp"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// TestProgramPacketDrops makes the kernel drop packets for three reasons
// inside a private network namespace and checks packet_drops counted them
// under the right reason and protocol:
//
//   - NO_SOCKET: n UDP datagrams to a port nothing listens on, over
//     127.0.0.1 (ipv4) and ::1 (ipv6). Each is freed with that reason by
//     the UDP receive path.
//   - NETFILTER_DROP: n datagrams to a bound port that an iptables rule in
//     the namespace drops at INPUT. The rule's own packet counter says how
//     many it dropped (n).
//   - SOCKET_RCVBUFF: n datagrams of 1000 bytes to a socket whose receive
//     buffer is at its minimum and which never reads. The socket's drop
//     count (SO_MEMINFO) says how many found the buffer full: all but the
//     first one or two.
//
// The program sees the whole machine, not only the namespace, so each
// assertion is a lower bound equal to the number of packets we know were
// dropped: anything else on the machine can only add to it.
func TestProgramPacketDrops(t *testing.T) {
	const (
		n      = 200
		metric = "kernel_packet_drops_total"
	)
	ns := newNetns(t)
	var sender4, sender6, nfSink, rcvbufSink int
	inNetns(t, ns, func() error {
		var err error
		if sender4, err = udpSocket(t, loopback4(0)); err != nil {
			return err
		}
		if sender6, err = udpSocket(t, loopback6(0)); err != nil {
			return fmt.Errorf("IPv6 on loopback: %w", err)
		}
		if nfSink, err = udpSocket(t, loopback4(0)); err != nil {
			return err
		}
		if rcvbufSink, err = udpSocket(t, loopback4(0)); err != nil {
			return err
		}
		// Asks for 1 byte: the kernel raises it to its minimum (~4.5 KB).
		return unix.SetsockoptInt(rcvbufSink, unix.SOL_SOCKET, unix.SO_RCVBUF, 1)
	})
	nfPort, err := localPort(nfSink)
	if err != nil {
		t.Fatal(err)
	}
	rcvbufPort, err := localPort(rcvbufSink)
	if err != nil {
		t.Fatal(err)
	}
	nsCmd(t, ns, "iptables", "-w", "-A", "INPUT", "-p", "udp", "--dport", strconv.Itoa(nfPort), "-j", "DROP")

	e := Start(t, "--programs=packet_drops")
	before := e.Scrape()
	if v := before.Value("kernel_exporter_config_up", L("config", "packet_drops")); v != 1 {
		t.Fatalf("config_up{config=packet_drops} = %v, want 1\n%s", v, e.Logs())
	}
	// Port 9 (discard): nothing listens on it in a new namespace.
	if err := sendN(sender4, loopback4(9), n, 10); err != nil {
		t.Fatal(err)
	}
	if err := sendN(sender6, loopback6(9), n, 10); err != nil {
		t.Fatal(err)
	}
	if err := sendN(sender4, loopback4(nfPort), n, 10); err != nil {
		t.Fatal(err)
	}
	if err := sendN(sender4, loopback4(rcvbufPort), n, 1000); err != nil {
		t.Fatal(err)
	}
	after := e.Scrape()

	nfDropped := iptablesPackets(t, ns, "INPUT", nfPort)
	if nfDropped != n {
		t.Fatalf("iptables rule dropped %d packets, want %d", nfDropped, n)
	}
	rcvbufDropped, err := socketDrops(rcvbufSink)
	if err != nil {
		t.Fatal(err)
	}
	if rcvbufDropped < n-5 {
		t.Fatalf("the small-buffer socket dropped only %d of %d datagrams", rcvbufDropped, n)
	}

	for _, c := range []struct {
		reason, protocol string
		atLeast          float64
	}{
		{"NO_SOCKET", "ipv4", n},
		{"NO_SOCKET", "ipv6", n},
		{"NETFILTER_DROP", "ipv4", float64(nfDropped)},
		{"SOCKET_RCVBUFF", "ipv4", float64(rcvbufDropped)},
	} {
		l := L("reason", c.reason, "protocol", c.protocol)
		d := after.Value(metric, l) - before.Value(metric, l)
		t.Logf("%s{reason=%q,protocol=%q} +%v (known drops: %v)", metric, c.reason, c.protocol, d, c.atLeast)
		if d < c.atLeast {
			t.Errorf("%s{reason=%q,protocol=%q} moved by %v, want >= %v\n%s",
				metric, c.reason, c.protocol, d, c.atLeast, after.seriesDump(metric))
		}
	}
	// Frees of packets that were not dropped (CONSUMED) are never counted.
	if after.Series(metric, L("reason", "CONSUMED")) != 0 || after.Series(metric, L("reason", "NOT_DROPPED_YET")) != 0 {
		t.Errorf("consumed packets were counted as drops\n%s", after.seriesDump(metric))
	}
}

// iptablesPackets returns the packet count of the first rule of chain in
// namespace ns that matches destination port.
func iptablesPackets(t *testing.T, ns, chain string, port int) int {
	t.Helper()
	out := nsCmd(t, ns, "iptables", "-w", "-L", chain, "-n", "-v", "-x")
	re := regexp.MustCompile(`(?m)^\s*(\d+)\s+\d+\s+DROP\b.*dpt:` + strconv.Itoa(port) + `\b`)
	m := re.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no DROP rule for port %d in chain %s:\n%s", port, chain, out)
	}
	v, _ := strconv.Atoi(m[1])
	return v
}

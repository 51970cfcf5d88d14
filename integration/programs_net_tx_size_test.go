// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// vethPair connects two new network namespaces with a veth pair, 192.0.2.1
// (in a) and 192.0.2.2 (in b), both ends with MTU mtu bytes. It returns the
// namespaces, the name of a's end and its ifindex.
//
// The pair is created in the host namespace and then moved, so that a's
// end keeps an ifindex allocated there: no interface of the host has it,
// and the exporter (which names devices in its own namespace) shows it as
// that number, which cannot be confused with a host interface's traffic.
func vethPair(t *testing.T, mtu int) (a, b, dev string, ifindex int) {
	t.Helper()
	a, b = newNetns(t), newNetns(t)
	suffix := randomName(t, "")[:6]
	dev, peer := "kxa"+suffix, "kxb"+suffix
	mustCmd(t, "ip", "link", "add", dev, "type", "veth", "peer", "name", peer)
	idx, err := os.ReadFile("/sys/class/net/" + dev + "/ifindex")
	if err != nil {
		mustCmd(t, "ip", "link", "del", dev)
		t.Fatal(err)
	}
	mustCmd(t, "ip", "link", "set", dev, "netns", a)
	mustCmd(t, "ip", "link", "set", peer, "netns", b)
	ifindex, _ = strconv.Atoi(strings.TrimSpace(string(idx)))
	if got := strings.TrimSpace(nsCmd(t, a, "cat", "/sys/class/net/"+dev+"/ifindex")); got != strconv.Itoa(ifindex) {
		t.Fatalf("%s changed ifindex from %d to %s when moved", dev, ifindex, got)
	}
	for _, c := range []struct{ ns, dev, addr string }{{a, dev, "192.0.2.1/24"}, {b, peer, "192.0.2.2/24"}} {
		mustCmd(t, "ip", "-n", c.ns, "link", "set", c.dev, "mtu", strconv.Itoa(mtu), "up")
		mustCmd(t, "ip", "-n", c.ns, "addr", "add", c.addr, "dev", c.dev)
	}
	return a, b, dev, ifindex
}

// bulkSend sends size bytes over a new TCP connection from namespace a to a
// listener on 192.0.2.2 in namespace b, and returns once all of it arrived.
func bulkSend(t *testing.T, a, b string, size int) {
	t.Helper()
	var ln net.Listener
	inNetns(t, b, func() (err error) {
		ln, err = net.Listen("tcp4", "192.0.2.2:0")
		return err
	})
	defer ln.Close()
	got := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- err
			return
		}
		defer c.Close()
		n, err := io.Copy(io.Discard, c)
		if err == nil && n != int64(size) {
			err = fmt.Errorf("received %d bytes, want %d", n, size)
		}
		got <- err
	}()
	inNetns(t, a, func() error {
		c, err := net.Dial("tcp4", ln.Addr().String())
		if err != nil {
			return err
		}
		buf := make([]byte, 1<<20)
		for sent := 0; sent < size; sent += len(buf) {
			if _, err := c.Write(buf[:min(len(buf), size-sent)]); err != nil {
				c.Close()
				return err
			}
		}
		return c.Close()
	})
	if err := <-got; err != nil {
		t.Fatalf("bulk receive: %v", err)
	}
}

// TestProgramNetTxSize sends 32 MiB over TCP through a veth pair twice, with
// segmentation offload on (the veth default) and then off on the sending
// end, and checks what net_tx_size saw on that device:
//
//   - offload on: TCP hands the device GSO skbs far larger than the MTU;
//     many observations are above 16 KiB and carry several segments.
//   - offload off (ethtool -K tso off gso off, MTU 1500): not one skb is
//     above 2048 bytes and none carries more than one segment, and since
//     each carries at most MTU-40 = 1460 bytes of payload, there are at
//     least 32 MiB / 1460 of them.
func TestProgramNetTxSize(t *testing.T) {
	const (
		size     = 32 << 20
		sizeHist = "kernel_net_tx_packet_size_bytes"
		segsHist = "kernel_net_tx_gso_segments"
	)
	a, b, dev, ifindex := vethPair(t, 1500)
	e := Start(t, "--programs=net_tx_size")
	label := L("device", strconv.Itoa(ifindex))
	hist := func(ms Metrics, name string, le float64) (uint64, int64) {
		c, _, at := ms.Hist(name, label, le)
		return c, at
	}

	before := e.Scrape()
	if v := before.Value("kernel_exporter_config_up", L("config", "net_tx_size")); v != 1 {
		t.Fatalf("config_up{config=net_tx_size} = %v, want 1\n%s", v, e.Logs())
	}
	bulkSend(t, a, b, size)
	on := e.Scrape()
	nsCmd(t, a, "ethtool", "-K", dev, "tso", "off", "gso", "off")
	bulkSend(t, a, b, size)
	off := e.Scrape()

	// Offload on.
	c0, _ := hist(before, sizeHist, 16384)
	c1, at1 := hist(on, sizeHist, 16384)
	onCount, onAbove16k := c1-c0, int64(c1)-at1 // before has no series of this new device
	s1, segAt1 := hist(on, segsHist, 1)
	onMultiSeg := int64(s1) - segAt1
	t.Logf("offload on:  %d skbs on %s (ifindex %d), %d above 16 KiB, %d with more than one segment", onCount, dev, ifindex, onAbove16k, onMultiSeg)
	// 32 MiB in skbs of up to 64 KiB is at least 512 skbs if all were
	// large; require a quarter of that, which no MTU-sized traffic can give.
	if onAbove16k < size/(64<<10)/4 {
		t.Errorf("offload on: %d skbs above 16 KiB, want >= %d\n%s", onAbove16k, size/(64<<10)/4, on.seriesDump(sizeHist))
	}
	if onMultiSeg < size/(64<<10)/4 {
		t.Errorf("offload on: %d skbs with more than one GSO segment, want >= %d", onMultiSeg, size/(64<<10)/4)
	}

	// Offload off.
	c2, at2 := hist(off, sizeHist, 2048)
	_, at1le2k := hist(on, sizeHist, 2048)
	offCount, offUpTo2k := c2-c1, at2-at1le2k
	s2, segAt2 := hist(off, segsHist, 1)
	offSegs, offSegsUpTo1 := s2-s1, segAt2-segAt1
	t.Logf("offload off: %d skbs, %d of them <= 2048 bytes, %d with at most one segment", offCount, offUpTo2k, offSegsUpTo1)
	if int64(offCount) != offUpTo2k {
		t.Errorf("offload off: %d skbs, only %d <= 2048 bytes: no skb may exceed the MTU\n%s", offCount, offUpTo2k, off.seriesDump(sizeHist))
	}
	if int64(offSegs) != offSegsUpTo1 {
		t.Errorf("offload off: %d skbs, only %d with at most one GSO segment", offSegs, offSegsUpTo1)
	}
	if minSkbs := uint64(size / 1460); offCount < minSkbs {
		t.Errorf("offload off: %d skbs for %d bytes, want >= %d (MTU-sized)", offCount, size, minSkbs)
	}
}

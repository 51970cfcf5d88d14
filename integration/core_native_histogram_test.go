// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Prometheus 2.42 (the Debian 12 package) and native histograms, as
// measured against it:
//
//   - With --enable-feature=native-histograms it asks for the protobuf
//     format, and of a histogram that has native fields it stores only the
//     native histogram: no _bucket, _count or _sum series. It has no
//     scrape_classic_histograms (its config parser rejects the key), so the
//     classic side is checked on a second server without the flag, which
//     asks for text and stores the classic series.
//   - histogram_count, histogram_sum, histogram_fraction and
//     histogram_quantile exist; histogram_count returns nothing for a float
//     series, so a value from it proves the series is native.
//   - histogram_quantile interpolates linearly within a bucket for both
//     kinds, and takes 0 as the lower end of the zero bucket (no negative
//     buckets) as it does for the lowest classic bucket: on the same
//     observations, native and classic quantiles are equal to the last
//     digit. Later versions interpolate native buckets exponentially
//     (x·2^f rather than x·(1+f) at fraction f of a bucket (x, 2x]), which
//     differs from linear by up to 6.2%.

// nativeQuantileTolerance is how far (relative) the native and the classic
// quantile of the same observations may differ: rounding only, since 2.42
// interpolates both linearly between the same bounds.
const nativeQuantileTolerance = 1e-9

// packetMix is a share of the datagrams a test sends: n datagrams of
// payload bytes, each an skb of payload+42 bytes at the device (Ethernet
// 14, IPv4 20, UDP 8 bytes of headers), which lies in the power-of-two
// bucket (upper/2, upper].
type packetMix struct {
	payload, n int
	upper      float64
}

// txMix is the traffic of TestPrometheusNativeHistograms: 60% of skbs of
// 142 bytes, 32% of 1042 and 8% of 10042, so that the 0.5, 0.9 and 0.99
// quantiles are in three different buckets and each at least 0.01 (20
// datagrams) away from a bucket edge, which the few other packets of the
// device (ARP, IPv6 neighbour discovery, all below 128 bytes) cannot cross.
var txMix = []packetMix{{100, 1200, 256}, {1000, 640, 2048}, {10000, 160, 16384}}

// mixUpper returns the upper bound of the bucket holding quantile q of
// mix: that of the first share whose cumulative fraction exceeds q.
func mixUpper(mix []packetMix, q float64) float64 {
	total, cum := 0, 0
	for _, m := range mix {
		total += m.n
	}
	for _, m := range mix {
		cum += m.n
		if float64(cum) > q*float64(total) {
			return m.upper
		}
	}
	return math.Inf(1)
}

// TestPrometheusNativeHistograms has two real Prometheus servers scrape
// the exporter running net_tx_size, one with native histograms enabled and
// one without, while UDP datagrams of three known sizes go through a veth
// device that carries nothing else (loopback would also carry the scrapes
// and any other test's traffic). It checks that the first stores
// kernel_net_tx_packet_size_bytes as a native histogram and the second as
// classic buckets, that both count the same skbs (at least those sent),
// and that histogram_quantile at 0.5, 0.9 and 0.99 gives the same value on
// both, in the power-of-two bucket the datagram sizes imply.
func TestPrometheusNativeHistograms(t *testing.T) {
	a, b, _, ifindex := vethPair(t, 16000)
	// Stops IPv6 neighbour discovery on the device: after the datagrams
	// nothing else moves its histogram while the servers are compared.
	inNetns(t, a, func() error { return sysctl("net.ipv6.conf.all.disable_ipv6", "1") })
	e := Start(t, "--programs=net_tx_size")
	target := strings.TrimPrefix(e.URL, "http://")
	native := startPrometheus(t, target, "--enable-feature=native-histograms")
	classic := startPrometheus(t, target)

	sent := sendMix(t, a, b, txMix)
	t.Logf("sent %d datagrams through ifindex %d", sent, ifindex)
	compareNativeClassic(t, native, classic, "kernel_net_tx_packet_size_bytes",
		fmt.Sprintf(`device="%d"`, ifindex), sent, sent+20, txMix)
}

// sendMix sends the datagrams of mix, interleaved, from namespace a to a
// UDP listener on 192.0.2.2 in namespace b, and returns how many it sent.
// A first datagram (of mix[0]'s size, counted) resolves the neighbour so
// that none of the others waits in (or is dropped from) its queue.
func sendMix(t *testing.T, a, b string, mix []packetMix) int {
	t.Helper()
	var ln net.PacketConn
	inNetns(t, b, func() (err error) {
		ln, err = net.ListenPacket("udp4", "192.0.2.2:0")
		return err
	})
	defer ln.Close()
	first := make(chan struct{})
	go func() {
		buf := make([]byte, 1<<16)
		for i := 0; ; i++ {
			if _, _, err := ln.ReadFrom(buf); err != nil {
				return
			}
			if i == 0 {
				close(first)
			}
		}
	}()
	var c net.Conn
	inNetns(t, a, func() (err error) {
		c, err = net.Dial("udp4", ln.LocalAddr().String())
		return err
	})
	defer c.Close()
	buf := make([]byte, 1<<16)
	if _, err := c.Write(buf[:mix[0].payload]); err != nil {
		t.Fatalf("send first datagram: %v", err)
	}
	select {
	case <-first:
	case <-time.After(10 * time.Second):
		t.Fatal("first datagram not received within 10s")
	}
	sent := 1
	left := make([]int, len(mix))
	for i, m := range mix {
		left[i] = m.n
	}
	left[0]--
	for more := true; more; {
		more = false
		for i, m := range mix {
			if left[i] == 0 {
				continue
			}
			if _, err := c.Write(buf[:m.payload]); err != nil {
				t.Fatalf("send datagram %d (%d bytes): %v", sent, m.payload, err)
			}
			left[i]--
			sent++
			more = true
		}
		if sent%100 < len(mix) {
			time.Sleep(time.Millisecond) // let the listener keep up
		}
	}
	return sent
}

// compareNativeClassic waits until native (a Prometheus with native
// histograms enabled) and classic (one without) hold the same count, in
// [minCount, maxCount], of histogram name's series selected by sel, then
// checks that native holds it as a native histogram and that
// histogram_quantile at 0.5, 0.9 and 0.99 agrees between the two within
// nativeQuantileTolerance and lies in the bucket mix implies.
func compareNativeClassic(t *testing.T, native, classic, name, sel string, minCount, maxCount int, mix []packetMix) {
	t.Helper()
	quantiles := []float64{0.5, 0.9, 0.99}
	one := func(base, query string) (float64, bool) {
		vs, err := promQuery(base, query)
		if err != nil {
			t.Fatalf("%v", err)
		}
		if len(vs) > 1 {
			t.Fatalf("%s: %d series, want 1: %v", query, len(vs), vs)
		}
		if len(vs) == 0 {
			return 0, false
		}
		return vs[0], true
	}
	nativeCount := fmt.Sprintf("histogram_count(%s{%s})", name, sel)
	classicCount := fmt.Sprintf("%s_count{%s}", name, sel)
	counts := func() (n, c float64, nok, cok bool) {
		n, nok = one(native, nativeCount)
		c, cok = one(classic, classicCount)
		return
	}
	start, lastLog := time.Now(), time.Now()
	var nq, cq []float64
	for {
		n, c, nok, cok := counts()
		if _, classicThere := one(native, classicCount); classicThere && cok && c >= float64(minCount) {
			t.Fatalf("the server with native histograms stored %s as classic series (%s exists, %s = %v): the exporter sent no native histogram fields", name, classicCount, nativeCount, n)
		}
		if nok && cok && n == c && n >= float64(minCount) {
			nq, cq = nq[:0], cq[:0]
			for _, q := range quantiles {
				v, _ := one(native, fmt.Sprintf("histogram_quantile(%v, %s{%s})", q, name, sel))
				nq = append(nq, v)
				v, _ = one(classic, fmt.Sprintf("histogram_quantile(%v, sum by (le) (%s_bucket{%s}))", q, name, sel))
				cq = append(cq, v)
			}
			// Counts unchanged across the quantile queries: both
			// servers' last scrapes saw the same observations.
			if n2, c2, _, _ := counts(); n2 == n && c2 == c {
				t.Logf("after %v: %s = %s = %v", time.Since(start).Round(time.Millisecond), nativeCount, classicCount, n)
				if n > float64(maxCount) {
					t.Errorf("count %v, want at most %d (sent %d and a few packets of the device's own)", n, maxCount, minCount)
				}
				break
			}
		}
		if time.Since(start) > 40*time.Second {
			t.Fatalf("no agreeing counts >= %d within 40s: native %s = %v (found %v), classic %s = %v (found %v)", minCount, nativeCount, n, nok, classicCount, c, cok)
		}
		if time.Since(lastLog) >= 10*time.Second {
			t.Logf("waiting: native %s = %v (found %v), classic %s = %v (found %v)", nativeCount, n, nok, classicCount, c, cok)
			lastLog = time.Now()
		}
		time.Sleep(500 * time.Millisecond)
	}
	for i, q := range quantiles {
		upper := mixUpper(mix, q)
		for _, r := range []struct {
			kind string
			v    float64
		}{{"native", nq[i]}, {"classic", cq[i]}} {
			if !(r.v > upper/2 && r.v <= upper) { // false for NaN too
				t.Errorf("%s quantile %v = %v, want in (%v, %v]", r.kind, q, r.v, upper/2, upper)
			}
		}
		if d := math.Abs(nq[i] - cq[i]); !(d <= nativeQuantileTolerance*math.Abs(cq[i])) {
			t.Errorf("quantile %v: native %v, classic %v: differ by %v, more than %v relative", q, nq[i], cq[i], d, nativeQuantileTolerance)
		}
		t.Logf("quantile %v: native %v, classic %v (bucket (%v, %v])", q, strconv.FormatFloat(nq[i], 'g', -1, 64), strconv.FormatFloat(cq[i], 'g', -1, 64), upper/2, upper)
	}
}

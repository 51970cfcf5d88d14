// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"fmt"
	"runtime"
	"testing"
)

// TestMatrixSoftirqRaise checks the softirq_raise program against the
// kernel's own counts during 2000 loopback UDP datagrams, which raise and
// run NET_RX softirqs. It runs on this kernel and in the kernel matrix VM
// (busybox: no "ip netns"), so the traffic goes over the loopback of the
// namespace the test runs in; other traffic there only adds NET_RX runs
// to both sides of the bounds below. Every NET_RX handler run
// needs a raise (a set pending bit) after the previous run on its CPU, and
// every raise of NET_RX goes through irq:softirq_raise, so between two
// scrapes (windows as in TestProgramSoftirq: P3/P4 inside, P1/P2 around):
//
//	raises(NET_RX)  >= (P4-P3) - cpus
//	latency observations(NET_RX) within [(P4-P3) - cpus, (P2-P1) + cpus]
//	latency observations <= raises + cpus
//
// and the latency sum moved by a positive amount whose mean is below 1 s.
func TestMatrixSoftirqRaise(t *testing.T) {
	const (
		raises  = "kernel_softirq_raises_total"
		latency = "kernel_softirq_raise_latency_seconds"
		n       = 2000
	)
	r := matrixReport(t, "softirq_raise", "default")
	cpus := uint64(runtime.NumCPU())
	tx, err := udpSocket(t, loopback4(0))
	if err != nil {
		t.Fatal(err)
	}
	rx, err := udpSocket(t, loopback4(0))
	if err != nil {
		t.Fatal(err)
	}
	rxPort, err := localPort(rx)
	if err != nil {
		t.Fatal(err)
	}
	e := Start(t, "--programs=softirq_raise")
	if v := e.Scrape().Value("kernel_exporter_config_up", L("config", "softirq_raise")); v != 1 {
		t.Fatalf("config_up{config=softirq_raise} = %v, want 1\n%s", v, e.Logs())
	}
	r.attach = "tp_btf (2 programs)"

	a, b, p1, p2, p3, p4 := softirqWindows(t, e, tx, rx, rxPort, n)

	for _, vec := range softirqVectors {
		ra := uint64(a.Value(raises, L("vector", vec)))
		rb := uint64(b.Value(raises, L("vector", vec)))
		ca, sa, _ := a.Hist(latency, L("vector", vec), 1)
		cb, sb, _ := b.Hist(latency, L("vector", vec), 1)
		if rb-ra > 0 || cb-ca > 0 || vec == "NET_RX" {
			t.Logf("%-8s raises +%d, latency observations +%d (mean %.2f µs); /proc/softirqs +%d inside, +%d around",
				vec, rb-ra, cb-ca, (sb-sa)/float64(max(cb-ca, 1))*1e6, p4[vec]-p3[vec], p2[vec]-p1[vec])
		}
		if cb < ca || rb < ra || sb < sa {
			t.Errorf("%s: counts went backwards: raises %d -> %d, latency count %d -> %d, sum %g -> %g", vec, ra, rb, ca, cb, sa, sb)
			continue
		}
		// Latency is observed only at an entry after a seen raise.
		if cb-ca > rb-ra+cpus {
			t.Errorf("%s{vector=%s} count moved by %d, more than the raises (+%d) + %d", latency, vec, cb-ca, rb-ra, cpus)
		}
		if cb-ca > p2[vec]-p1[vec]+cpus {
			t.Errorf("%s{vector=%s} count moved by %d, more than /proc/softirqs (+%d) + %d", latency, vec, cb-ca, p2[vec]-p1[vec], cpus)
		}
		if cb > ca && (sb-sa <= 0 || (sb-sa)/float64(cb-ca) >= 1) {
			t.Errorf("%s{vector=%s}: sum moved by %g s over %d observations, want a positive mean below 1 s", latency, vec, sb-sa, cb-ca)
		}
	}

	inner := p4["NET_RX"] - p3["NET_RX"]
	if inner < 1 {
		t.Fatalf("loopback traffic ran no NET_RX softirq (/proc/softirqs +%d)", inner)
	}
	lo := uint64(0)
	if inner > cpus {
		lo = inner - cpus
	}
	ra := uint64(a.Value(raises, L("vector", "NET_RX")))
	rb := uint64(b.Value(raises, L("vector", "NET_RX")))
	if rb-ra < lo {
		t.Errorf("%s{vector=NET_RX} moved by %d, want >= %d (NET_RX runs inside the scrapes - cpus)", raises, rb-ra, lo)
	}
	ca, _, _ := a.Hist(latency, L("vector", "NET_RX"), 1)
	cb, _, _ := b.Hist(latency, L("vector", "NET_RX"), 1)
	if cb-ca < lo || cb-ca < 1 {
		t.Errorf("%s{vector=NET_RX} count moved by %d, want >= max(1, %d)", latency, cb-ca, lo)
	}
	_, sa, _ := a.Hist(latency, L("vector", "NET_RX"), 1)
	_, sb, _ := b.Hist(latency, L("vector", "NET_RX"), 1)
	r.result = fmt.Sprintf("moved: NET_RX +%d raises, +%d waits (mean %.2f us), /proc/softirqs +%d", rb-ra, cb-ca, (sb-sa)/float64(max(cb-ca, 1))*1e6, inner)
}

// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// softirqVectors are the softirq names of /proc/softirqs, which are also
// the softirq program's vector labels.
var softirqVectors = []string{"HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU"}

// procSoftirqs returns the per-vector softirq counts of /proc/softirqs,
// summed over CPUs.
func procSoftirqs(t *testing.T) map[string]uint64 {
	t.Helper()
	out, err := readProcSoftirqs()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// readProcSoftirqs is procSoftirqs returning its error (for goroutines
// other than the test's).
func readProcSoftirqs() (map[string]uint64, error) {
	data, err := os.ReadFile("/proc/softirqs")
	if err != nil {
		return nil, err
	}
	out := map[string]uint64{}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || !strings.HasSuffix(f[0], ":") {
			continue
		}
		var sum uint64
		for _, v := range f[1:] {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("/proc/softirqs: %q: %w", line, err)
			}
			sum += n
		}
		out[strings.TrimSuffix(f[0], ":")] = sum
	}
	return out, nil
}

// TestProgramSoftirq checks the softirq program's per-vector counts against
// the kernel's own: /proc/softirqs counts each handler run right where
// irq:softirq_entry fires, so the number of softirq_duration_seconds
// observations between two scrapes must lie between the /proc/softirqs
// deltas of a window inside and a window around them:
//
//	P1  scrape A  P3  [loopback UDP traffic]  P4  scrape B  P2
//	(P4-P3) - cpus  <=  B-A  <=  (P2-P1) + cpus
//
// (the program counts a run at its exit, /proc/softirqs at its entry; at
// most one run per CPU is in between at any instant). The traffic, 2000
// UDP datagrams over loopback in a private namespace, makes the NET_RX
// window non-empty. (Raise-to-entry latency is softirq_raise's:
// TestMatrixSoftirqRaise.)
func TestProgramSoftirq(t *testing.T) {
	const (
		duration = "kernel_softirq_duration_seconds"
		n        = 2000
	)
	cpus := uint64(runtime.NumCPU())
	ns := newNetns(t)
	var tx, rx int
	inNetns(t, ns, func() (err error) {
		if tx, err = udpSocket(t, loopback4(0)); err != nil {
			return err
		}
		rx, err = udpSocket(t, loopback4(0))
		return err
	})
	rxPort, err := localPort(rx)
	if err != nil {
		t.Fatal(err)
	}
	e := Start(t, "--programs=softirq")

	if v := e.Scrape().Value("kernel_exporter_config_up", L("config", "softirq")); v != 1 {
		t.Fatalf("config_up{config=softirq} = %v, want 1\n%s", v, e.Logs())
	}
	a, b, p1, p2, p3, p4 := softirqWindows(t, e, tx, rx, rxPort, n)

	count := func(ms Metrics, name, vec string) (uint64, float64) {
		c, s, _ := ms.Hist(name, L("vector", vec), 1)
		return c, s
	}
	for _, vec := range softirqVectors {
		ca, _ := count(a, duration, vec)
		cb, sb := count(b, duration, vec)
		got := cb - ca
		inner, outer := p4[vec]-p3[vec], p2[vec]-p1[vec]
		lo := uint64(0)
		if inner > cpus {
			lo = inner - cpus
		}
		if vec == "NET_RX" || got > 0 {
			t.Logf("%-8s duration observations +%d; /proc/softirqs +%d inside, +%d around; mean %.2f µs", vec, got, inner, outer, sb/float64(max(cb, 1))*1e6)
		}
		if got < lo || got > outer+cpus {
			t.Errorf("%s{vector=%s} count moved by %d, want within [%d, %d] (/proc/softirqs)", duration, vec, got, lo, outer+cpus)
		}
	}
	if inner := p4["NET_RX"] - p3["NET_RX"]; inner < 1 {
		t.Fatalf("loopback traffic ran no NET_RX softirq (/proc/softirqs +%d)", inner)
	}
}

// softirqWindows sends n UDP datagrams from socket tx to rx (bound to
// rxPort on loopback), receiving each, between two scrapes a and b of e,
// and reads /proc/softirqs around and inside them:
//
//	p1  scrape a  p3  [traffic]  p4  scrape b  p2
func softirqWindows(t *testing.T, e *Exporter, tx, rx, rxPort, n int) (a, b Metrics, p1, p2, p3, p4 map[string]uint64) {
	t.Helper()
	p1 = procSoftirqs(t)
	a = e.Scrape()
	p3 = procSoftirqs(t)
	buf := make([]byte, 100)
	for i := range n {
		if err := sendN(tx, loopback4(rxPort), 1, 100); err != nil {
			t.Fatal(err)
		}
		if _, _, err := unixRecvfrom(rx, buf); err != nil {
			t.Fatalf("receive #%d: %v", i, err)
		}
	}
	p4 = procSoftirqs(t)
	b = e.Scrape()
	p2 = procSoftirqs(t)
	return a, b, p1, p2, p3, p4
}

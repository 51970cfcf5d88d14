// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"errors"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/internal/otelcoltest"
)

// TestOTLPMetrics runs the exporter with --otlp.metrics against a real
// OpenTelemetry Collector, over gRPC and over HTTP/protobuf, with the
// bundled syscalls and net_tx_size programs, triggers kernel events and
// checks what the collector received:
//
//   - a counter: n kill(self, 1000) calls, each failing with EINVAL (an
//     invalid signal: a pair that other tests on the machine do not make,
//     as the syscalls program counts for every process), make
//     kernel_syscall_errors_total{syscall=kill,errno=EINVAL} a cumulative
//     monotonic Sum that moved by exactly n, equal to a scrape's value;
//   - an exp2 histogram with multiplier 1 (kernel_net_tx_packet_size_bytes):
//     an exponential histogram of scale 0 whose buckets are the scrape's
//     buckets at index k-1 for le=2^k. n UDP datagrams of 1000 bytes leave
//     through a veth device as 1042-byte skbs (+ 8 UDP, 20 IPv4, 14
//     Ethernet): its index 10 bucket, (1024, 2048], moved by exactly n;
//   - an exp2zero histogram (kernel_net_tx_gso_segments): the le=0 bucket
//     (skbs not marked for segmentation: every datagram) is the zero count;
//   - an exp2 histogram with multiplier 1e-9 (runqlat's): explicit bounds,
//     the scrape's le bounds, buckets that add up to the count;
//   - the resource (service.name from OTEL_SERVICE_NAME, host.name,
//     OTEL_RESOURCE_ATTRIBUTES), start times at the config's load, and the
//     push self-metric counting successes.
//
// The device carries only the test's traffic (IPv6 is off in its
// namespace, so no neighbour discovery), so once the datagrams are sent a
// push and a scrape read the same values.
func TestOTLPMetrics(t *testing.T) {
	for _, proto := range []string{"grpc", "http/protobuf"} {
		t.Run(proto, func(t *testing.T) { testOTLPMetrics(t, proto) })
	}
}

func testOTLPMetrics(t *testing.T, proto string) {
	const (
		n        = 200
		errs     = "kernel_syscall_errors_total"
		sizeHist = "kernel_net_tx_packet_size_bytes"
		segsHist = "kernel_net_tx_gso_segments"
		runqlat  = "kernel_run_queue_latency_seconds"
	)
	col := otelcoltest.Start(t)
	if col == nil {
		return
	}
	endpoint := col.Endpoint(otelcoltest.HTTP)
	if proto == "grpc" {
		endpoint = col.Endpoint(otelcoltest.GRPC)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", proto)
	t.Setenv("OTEL_SERVICE_NAME", "kx-otlp-test")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=integration")

	a, b, dev, ifindex := vethPair(t, 1500)
	nsCmd(t, a, "sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1")
	// A permanent neighbour entry: no ARP on the device, whose datagrams
	// leave at once rather than after a resolution.
	peer := "kxb" + strings.TrimPrefix(dev, "kxa")
	mac := strings.TrimSpace(nsCmd(t, b, "cat", "/sys/class/net/"+peer+"/address"))
	nsCmd(t, a, "ip", "neigh", "replace", "192.0.2.2", "lladdr", mac, "dev", dev, "nud", "permanent")
	// A bound socket takes the datagrams (or drops them when full), so
	// that no ICMP port unreachable makes a send fail.
	var sink net.PacketConn
	inNetns(t, b, func() (err error) {
		sink, err = net.ListenPacket("udp4", "192.0.2.2:0")
		return err
	})
	defer sink.Close()
	// send sends count datagrams of 1000 bytes from a to the sink.
	send := func(count int) {
		inNetns(t, a, func() error {
			c, err := net.Dial("udp4", sink.LocalAddr().String())
			if err != nil {
				return err
			}
			defer c.Close()
			buf := make([]byte, 1000)
			for range count {
				if _, err := c.Write(buf); err != nil {
					return err
				}
			}
			return nil
		})
	}
	device := L("device", strconv.Itoa(ifindex))

	loaded := time.Now()
	e := Start(t, "--programs=syscalls,net_tx_size,runqlat", "--otlp.metrics", "--otlp.metrics.interval=1s")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("exporter log:\n%s", e.Logs())
			if b, err := os.ReadFile(filepath.Join(col.Dir, "collector.log")); err == nil {
				t.Logf("collector log:\n%s", b[max(0, len(b)-8192):])
			}
		}
	})
	before := e.Scrape()
	for _, c := range []string{"syscalls", "net_tx_size", "runqlat"} {
		if v := before.Value("kernel_exporter_config_up", L("config", c)); v != 1 {
			t.Fatalf("config_up{config=%s} = %v, want 1\n%s", c, v, e.Logs())
		}
	}

	einval := L("syscall", "kill", "errno", "EINVAL")
	for i := range n {
		if err := unix.Kill(os.Getpid(), 1000); !errors.Is(err, unix.EINVAL) {
			t.Fatalf("kill(self, 1000) #%d = %v, want EINVAL", i, err)
		}
	}
	send(n)
	sent := time.Now()
	after := e.Scrape()
	if d := after.Value(errs, einval) - before.Value(errs, einval); d != n {
		t.Fatalf("scrape: %s{kill,EINVAL} moved by %v, want %d", errs, d, n)
	}
	_, _, at1024 := after.Hist(sizeHist, device, 1024)
	_, _, at2048 := after.Hist(sizeHist, device, 2048)
	_, _, was1024 := before.Hist(sizeHist, device, 1024)
	_, _, was2048 := before.Hist(sizeHist, device, 2048)
	if d := (at2048 - at1024) - (max(was2048, 0) - max(was1024, 0)); d != n {
		t.Fatalf("scrape: %s{device=%d} (1024, 2048] moved by %d, want %d\n%s", sizeHist, ifindex, d, n, after.seriesDump(sizeHist))
	}

	// A push that read the maps after the datagrams were sent.
	var data *otelcoltest.Data
	pushedAfter := func(name string, attrs map[string]string) *otelcoltest.Point {
		m := data.Metric(name)
		if m == nil {
			return nil
		}
		for i := range m.Points {
			p := &m.Points[i]
			if p.Time.After(sent) && attrsMatch(p.Attributes, attrs) {
				return p
			}
		}
		return nil
	}
	data = col.Wait(t, 30*time.Second, "push after the events", func(d *otelcoltest.Data) bool {
		data = d
		return pushedAfter(errs, einval) != nil && pushedAfter(sizeHist, device) != nil && pushedAfter(segsHist, device) != nil
	})
	again := e.Scrape()

	// The counter.
	m := data.Metric(errs)
	if m.Type != "Sum" || !m.IsMonotonic || m.Temporality != "Cumulative" {
		t.Errorf("%s: %s monotonic=%v %s, want a cumulative monotonic Sum", errs, m.Type, m.IsMonotonic, m.Temporality)
	}
	p := pushedAfter(errs, einval)
	if d := p.Value - before.Value(errs, einval); d != n {
		t.Errorf("OTLP %s{kill,EINVAL} = %v, moved by %v since the first scrape, want %d", errs, p.Value, d, n)
	}
	if p.Value != again.Value(errs, einval) {
		t.Errorf("OTLP %s{kill,EINVAL} = %v, scrape %v: want equal", errs, p.Value, again.Value(errs, einval))
	}
	if p.Start.Before(loaded.Add(-time.Second)) || p.Start.After(sent) {
		t.Errorf("start time %v, want the config's load, between %v and %v", p.Start, loaded, sent)
	}

	t.Logf("%s{kill,EINVAL}: %v (scrapes: %v before, %v after)", errs, p.Value, before.Value(errs, einval), again.Value(errs, einval))

	// The exp2 histogram: exponential, scale 0, the scrape's buckets.
	m = data.Metric(sizeHist)
	if m.Type != "ExponentialHistogram" || m.Temporality != "Cumulative" {
		t.Fatalf("%s: %s %s, want a cumulative ExponentialHistogram", sizeHist, m.Type, m.Temporality)
	}
	p = pushedAfter(sizeHist, device)
	sm := scrapedHist(t, again, sizeHist, device)
	if p.Scale != 0 || p.ZeroCount != 0 || p.PositiveOffset != -1 {
		t.Errorf("%s: scale %d, zero count %d, offset %d; want 0, 0, -1 (le=1 is index -1)", sizeHist, p.Scale, p.ZeroCount, p.PositiveOffset)
	}
	if want := perBucket(sm); !slices.Equal(p.PositiveBuckets, trimZeros(want)) {
		t.Errorf("%s: OTLP buckets %v, scrape per bucket (le=1, 2, 4, ...) %v", sizeHist, p.PositiveBuckets, want)
	}
	if idx := 10 - int(p.PositiveOffset); idx >= len(p.PositiveBuckets) || int64(p.PositiveBuckets[idx])-(max(was2048, 0)-max(was1024, 0)) != n {
		t.Errorf("%s: index 10 (1024, 2048] bucket of %v did not move by %d", sizeHist, p.PositiveBuckets, n)
	}
	t.Logf("%s{device=%d}: scale %d offset %d buckets %v count %d sum %v", sizeHist, ifindex, p.Scale, p.PositiveOffset, p.PositiveBuckets, p.Count, p.Sum)
	if p.Count != sm.GetSampleCount() || p.Sum != sm.GetSampleSum() {
		t.Errorf("%s: OTLP count %d sum %v, scrape %d %v", sizeHist, p.Count, p.Sum, sm.GetSampleCount(), sm.GetSampleSum())
	}

	// The exp2zero histogram: le=0 is the zero count.
	p = pushedAfter(segsHist, device)
	sm = scrapedHist(t, again, segsHist, device)
	if m := data.Metric(segsHist); m.Type != "ExponentialHistogram" {
		t.Fatalf("%s: %s, want ExponentialHistogram", segsHist, m.Type)
	}
	per := perBucket(sm)
	if p.ZeroCount != per[0] || p.ZeroCount < n || p.Count != sm.GetSampleCount() {
		t.Errorf("%s: zero count %d count %d; scrape le=0 %d count %d, want equal and >= %d", segsHist, p.ZeroCount, p.Count, per[0], sm.GetSampleCount(), n)
	}
	// (The debug exporter prints no offset when there are no buckets.)
	if (len(p.PositiveBuckets) > 0 && p.PositiveOffset != -1) || !slices.Equal(p.PositiveBuckets, trimZeros(per[1:])) {
		t.Errorf("%s: offset %d buckets %v; want -1 and the scrape's le=1, 2, ... %v", segsHist, p.PositiveOffset, p.PositiveBuckets, per[1:])
	}

	// A histogram whose bounds are not powers of two: explicit bounds.
	m = data.Metric(runqlat)
	if m == nil || m.Type != "Histogram" || m.Temporality != "Cumulative" || len(m.Points) != 1 {
		t.Fatalf("%s: %+v, want a cumulative Histogram of one point", runqlat, m)
	}
	p = &m.Points[0]
	var bounds []float64
	for _, b := range scrapedHist(t, again, runqlat, nil).GetBucket() {
		if !math.IsInf(b.GetUpperBound(), 1) {
			bounds = append(bounds, b.GetUpperBound())
		}
	}
	var total uint64
	for _, c := range p.BucketCounts {
		total += c
	}
	// The debug exporter prints bounds with 6 decimals.
	near := func(a, b float64) bool { return math.Abs(a-b) <= 5e-7 }
	if !slices.EqualFunc(p.Bounds, bounds, near) || len(p.BucketCounts) != len(bounds)+1 || total != p.Count || p.Count == 0 {
		t.Errorf("%s: bounds %v counts %v count %d; want the scrape's bounds %v (to 6 decimals), counts adding up to a count > 0", runqlat, p.Bounds, p.BucketCounts, p.Count, bounds)
	}

	// Resource, self-metrics.
	res := m.Resource
	if res["service.name"] != "kx-otlp-test" || res["deployment.environment"] != "integration" || res["host.name"] == "" {
		t.Errorf("resource %v: want service.name kx-otlp-test, deployment.environment integration, host.name", res)
	}
	if s := data.Metric("kernel_exporter_otlp_exports_total"); s == nil {
		t.Error("no kernel_exporter_otlp_exports_total pushed")
	}
	if v := again.Value("kernel_exporter_otlp_exports_total", L("result", "success")); v < 1 {
		t.Errorf("kernel_exporter_otlp_exports_total{result=success} = %v, want >= 1\n%s", v, e.Logs())
	}
	if v := again.Value("kernel_exporter_otlp_exports_total", L("result", "failure")); v != 0 {
		t.Errorf("kernel_exporter_otlp_exports_total{result=failure} = %v, want 0\n%s", v, e.Logs())
	}
}

func attrsMatch(got, want map[string]string) bool {
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// scrapedHist returns the one histogram series of name matching want.
func scrapedHist(t *testing.T, ms Metrics, name string, want map[string]string) *dto.Histogram {
	t.Helper()
	for _, m := range ms[name].GetMetric() {
		if matches(m, want) {
			return m.GetHistogram()
		}
	}
	t.Fatalf("scrape: no %s %v", name, want)
	return nil
}

// perBucket is a classic histogram's count per bucket, +Inf last.
func perBucket(h *dto.Histogram) []uint64 {
	var out []uint64
	prev := uint64(0)
	for _, b := range h.GetBucket() {
		if math.IsInf(b.GetUpperBound(), 1) {
			continue
		}
		out = append(out, b.GetCumulativeCount()-prev)
		prev = b.GetCumulativeCount()
	}
	return append(out, h.GetSampleCount()-prev)
}

func trimZeros(c []uint64) []uint64 {
	for len(c) > 0 && c[len(c)-1] == 0 {
		c = c[:len(c)-1]
	}
	return c
}

// SPDX-License-Identifier: Apache-2.0

package compare

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The fleet: 10 jessie and 10 stretch hosts over one hour, a sample every
// 30 s. Stretch starts tcp_write_timer 12 times as often and its run queue
// latency is 4 times as long (the same distribution two exp2 buckets up);
// one jessie host has 50 times the net_rx softirqs and one stretch host 40
// times the clone calls. From the half hour on, every host retransmits
// on timeouts 5 times as often.
var (
	fleetStart = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	fleetEnd   = fleetStart.Add(time.Hour)
)

const (
	fleetStep       = 30 * time.Second
	fleetHostsInSet = 10
)

type fleetCounter struct {
	metric, label string
	values        map[string]float64 // label value: rate per second per host
}

var fleetCounters = []fleetCounter{
	{"kernel_timer_starts_total", "function", map[string]float64{"tcp_write_timer": 5, "tcp_delack_timer": 20, "delayed_work_timer_fn": 50, "process_timeout": 100, "hrtimer_wakeup": 200, "it_real_fn": 1, "tcp_keepalive_timer": 2, "blk_rq_timed_out_timer": 0.5}},
	{"kernel_syscalls_total", "syscall", map[string]float64{"read": 1000, "write": 800, "openat": 300, "close": 300, "futex": 500, "epoll_wait": 400, "sendto": 100, "recvfrom": 100, "mmap": 50, "clone": 5}},
	{"kernel_softirqs_total", "vec", map[string]float64{"timer": 1000, "net_rx": 500, "net_tx": 50, "sched": 300, "rcu": 600}},
	{"kernel_tcp_retransmits_total", "kind", map[string]float64{"timeout": 2, "fast": 3}},
}

// fleetLater is when every host starts retransmitting on timeouts 5 times
// as often: the change the two-window comparison finds.
var fleetLater = fleetStart.Add(30 * time.Minute)

type fleetHistogram struct {
	metric string
	rate   float64 // events per second per host
	center int     // log2 of the le of the middle bucket
}

var fleetHistograms = []fleetHistogram{
	{"kernel_runqueue_latency_seconds", 200, -10},
	{"kernel_block_latency_seconds", 50, -12},
}

// fleetWeights spread a histogram's events over the buckets center-3 to
// center+3.
var fleetWeights = []float64{1, 4, 10, 16, 10, 4, 1}

type fleetHost struct {
	instance, os string
	scale        float64 // the host's load, 0.8 to 1.16
}

func fleetHosts() []fleetHost {
	var hosts []fleetHost
	for i := 0; i < 2*fleetHostsInSet; i++ {
		os := "jessie"
		j := i
		if i >= fleetHostsInSet {
			os = "stretch"
			j = (i * 3) % fleetHostsInSet // the same loads, in another order
		}
		hosts = append(hosts, fleetHost{fmt.Sprintf("host-%02d:19435", i), os, 0.8 + 0.04*float64(j)})
	}
	return hosts
}

// factor is the injected change of one counter series of a host.
func (h fleetHost) factor(metric, value string) float64 {
	switch {
	case h.os == "stretch" && value == "tcp_write_timer":
		return 12
	case h.instance == "host-03:19435" && value == "net_rx":
		return 50
	case h.instance == "host-15:19435" && value == "clone":
		return 40
	}
	return 1
}

// writeFleet writes the fleet as OpenMetrics text for promtool tsdb
// create-blocks-from openmetrics.
func writeFleet(t testing.TB, path string) {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	rnd := rand.New(rand.NewPCG(1, 2))
	noise := func() float64 { return 0.9 + 0.2*rnd.Float64() }
	steps := int(fleetEnd.Sub(fleetStart) / fleetStep)
	secs := fleetStep.Seconds()
	for _, c := range fleetCounters {
		fmt.Fprintf(w, "# TYPE %s counter\n", strings.TrimSuffix(c.metric, "_total"))
		for _, h := range fleetHosts() {
			for _, v := range slices.Sorted(maps.Keys(c.values)) { // the same noise each run
				rate := c.values[v]
				total := 1000.0
				for s := 0; s <= steps; s++ {
					ts := fleetStart.Add(time.Duration(s) * fleetStep).Unix()
					fmt.Fprintf(w, "%s{instance=%q,job=\"kernel\",os=%q,%s=%q} %.0f %d\n", c.metric, h.instance, h.os, c.label, v, total, ts)
					later := 1.0
					if v == "timeout" && !fleetStart.Add(time.Duration(s)*fleetStep).Before(fleetLater) {
						later = 5
					}
					total += math.Round(rate * later * h.scale * h.factor(c.metric, v) * secs * noise())
				}
			}
		}
	}
	for _, hg := range fleetHistograms {
		fmt.Fprintf(w, "# TYPE %s histogram\n", hg.metric)
		for _, h := range fleetHosts() {
			center := hg.center
			if h.os == "stretch" && hg.metric == "kernel_runqueue_latency_seconds" {
				center += 2
			}
			counts := make([]float64, 22) // le 2^-20 .. 2^0, +Inf
			sum := 0.0
			for s := 0; s <= steps; s++ {
				ts := fleetStart.Add(time.Duration(s) * fleetStep).Unix()
				cum := 0.0
				for k := 0; k < 22; k++ {
					le := "+Inf"
					if k < 21 {
						le = fmt.Sprintf("%g", math.Ldexp(1, k-20))
					}
					cum += counts[k]
					fmt.Fprintf(w, "%s_bucket{instance=%q,job=\"kernel\",os=%q,le=%q} %.0f %d\n", hg.metric, h.instance, h.os, le, cum, ts)
				}
				fmt.Fprintf(w, "%s_count{instance=%q,job=\"kernel\",os=%q} %.0f %d\n", hg.metric, h.instance, h.os, cum, ts)
				fmt.Fprintf(w, "%s_sum{instance=%q,job=\"kernel\",os=%q} %g %d\n", hg.metric, h.instance, h.os, sum, ts)
				for o, wt := range fleetWeights {
					k := center + o - 3 + 20
					n := math.Round(hg.rate * h.scale * secs * wt / 46 * noise())
					counts[k] += n
					sum += n * math.Ldexp(0.75, k-20)
				}
			}
		}
	}
	fmt.Fprintln(w, "# EOF")
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// needBinary finds a binary from make test-deps: a missing one fails the
// test in CI and skips it elsewhere.
func needBinary(t testing.TB, name string) string {
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s not found (make test-deps installs it): %v", name, err)
		}
		t.Skipf("%s not found (make test-deps installs it)", name)
	}
	return p
}

// startFleetPrometheus backfills the fleet with promtool and starts
// Prometheus on a loopback port over it; it returns its URL.
func startFleetPrometheus(t *testing.T) string {
	promtool, prometheus := needBinary(t, "promtool"), needBinary(t, "prometheus")
	dir := t.TempDir()
	om := filepath.Join(dir, "fleet.om")
	writeFleet(t, om)
	data := filepath.Join(dir, "data")
	if out, err := exec.Command(promtool, "tsdb", "create-blocks-from", "openmetrics", om, data).CombinedOutput(); err != nil {
		t.Fatalf("promtool: %v\n%s", err, out)
	}
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte("global: {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(prometheus, "--config.file="+cfg, "--storage.tsdb.path="+data, "--storage.tsdb.retention.time=100y",
		"--web.listen-address="+addr, "--log.level=warn")
	log, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("prometheus log:\n%s", b)
		}
	})
	url := "http://" + addr
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return url
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus at %s not ready in 30 s: %v", url, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestFleet backfills the fleet into a real Prometheus and checks that
// compare ranks the two injected changes first, with their factors, and
// the single-host spikes far below.
func TestFleet(t *testing.T) {
	url := startFleetPrometheus(t)
	jessie, _ := ParseSelector(`{os="jessie"}`)
	stretch, _ := ParseSelector(`{os="stretch"}`)
	res, err := Run(context.Background(), Options{
		Client: ClientOptions{URL: url},
		Base:   Side{Selector: jessie, Start: fleetStart, End: fleetEnd},
		New:    Side{Selector: stretch, Start: fleetStart, End: fleetEnd},
	})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := Write(&out, res, FormatTable, 0); err != nil {
		t.Fatal(err)
	}
	t.Logf("compare:\n%s", out.String())
	if res.Base.Hosts != 10 || res.New.Hosts != 10 {
		t.Errorf("hosts: base %d, new %d; want 10 and 10", res.Base.Hosts, res.New.Hosts)
	}
	// 25 counter series and 2 histograms of 22 buckets a host.
	if want := 20 * (25 + 2*22); res.Series != want {
		t.Errorf("series fetched: %d, want %d", res.Series, want)
	}
	checkFleetRanking(t, res)

	// One set over two windows: the stretch hosts' first half hour
	// against their second.
	res, err = Run(context.Background(), Options{
		Client: ClientOptions{URL: url},
		Base:   Side{Selector: stretch, Start: fleetStart, End: fleetLater},
		New:    Side{Selector: stretch, Start: fleetLater, End: fleetEnd},
	})
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := Write(&out, res, FormatTable, 5); err != nil {
		t.Fatal(err)
	}
	t.Logf("compare over two windows:\n%s", out.String())
	r := res.Rows[0]
	if r.Signal != `kernel_tcp_retransmits_total{job="kernel",kind="timeout"}` || math.Abs(float64(r.Factor)/5-1) > 0.1 || r.Agree != 10 || r.Delta != 1 {
		t.Errorf("two windows: first row %s, factor %.3g, %d/%d agree, delta %v; want the timeout retransmits, 5 ±10%%, 10/10, 1", r.Signal, float64(r.Factor), r.Agree, r.NewHosts, r.Delta)
	}
	if strings.Contains(r.PromQL, " or ") {
		t.Errorf("two windows of one selector: PromQL %q, want one query", r.PromQL)
	}
	for _, r := range res.Rows[1:] {
		if r.Score > 0.2 {
			t.Errorf("two windows: %s (%s) score %.3g, want at most 0.2 (unchanged)", r.Signal, r.Kind, r.Score)
		}
	}
}

// checkFleetRanking checks the rows of the fleet's comparison.
func checkFleetRanking(t *testing.T, res *Result) {
	t.Helper()
	if len(res.Rows) < 4 {
		t.Fatalf("%d rows, want the fleet's", len(res.Rows))
	}
	top := []struct {
		signal, kind string
		factor       float64
	}{
		{`kernel_timer_starts_total{function="tcp_write_timer",job="kernel"}`, KindCounter, 12},
		{`kernel_runqueue_latency_seconds{job="kernel"}`, KindHistogram, 4},
	}
	for i, w := range top {
		r := res.Rows[i]
		if r.Signal != w.signal || r.Kind != w.kind {
			t.Errorf("row %d: %s (%s), want %s (%s)", i+1, r.Signal, r.Kind, w.signal, w.kind)
			continue
		}
		if f := float64(r.Factor); math.Abs(f/w.factor-1) > 0.1 {
			t.Errorf("row %d %s: factor %.3g, want %v ±10%%", i+1, r.Signal, f, w.factor)
		}
		if r.Agree != 10 || r.NewHosts != 10 || r.BaseHosts != 10 || r.Delta != 1 {
			t.Errorf("row %d %s: %d/%d hosts agree (base %d), delta %v; want 10/10 (10), 1", i+1, r.Signal, r.Agree, r.NewHosts, r.BaseHosts, r.Delta)
		}
	}
	if r := res.Rows[1]; r.KS == nil || *r.KS < 0.5 {
		t.Errorf("%s: KS %v, want at least 0.5 (the distribution moved two buckets)", r.Signal, r.KS)
	}
	for i, r := range res.Rows {
		switch r.Signal {
		case `kernel_softirqs_total{job="kernel",vec="net_rx"}`, `kernel_syscalls_total{job="kernel",syscall="clone"}`:
			if i < len(top) || r.Score > 0.2 || math.Abs(float64(r.Factor)-1) > 0.1 || r.Agree > 2 {
				t.Errorf("single-host spike %s: rank %d, score %.3g, factor %.3g, %d hosts agree; want below the injected changes, score <= 0.2, factor 1 ±10%%, at most 2 hosts (the spike's and one by noise)", r.Signal, i+1, r.Score, float64(r.Factor), r.Agree)
			}
		}
	}
	// Everything but the two injected changes is unchanged.
	for _, r := range res.Rows[len(top):] {
		if r.Score > 0.2 {
			t.Errorf("%s (%s): score %.3g, want at most 0.2 (unchanged)", r.Signal, r.Kind, r.Score)
		}
	}
}

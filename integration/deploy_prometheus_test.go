// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/deploy"
)

// deployNoEvent lists the expressions that cannot return data in this test
// although their program is up: the test does not cause their event. The
// metric names in them are still checked against programs/*.yaml and the
// self-metrics.
var deployNoEvent = map[string]string{
	"grafana/kernel_exporter.json: panel Budget trips (1h)":     "no config goes over a budget",
	"grafana/kernel_exporter.json: panel TCP retransmits":       "loopback TCP loses no segment, so nothing is retransmitted",
	"grafana/kernel_exporter.json: panel OOM kills":             "no OOM kill is caused",
	"prometheus/alerts.yml: alert KernelListenOverflowDrops":    "on 6.18 a SYN to a full accept queue is consumed, not a kfree_skb drop (docs/programs.md, packet_drops)",
	"prometheus/alerts.yml: alert KernelExporterBudgetExceeded": "no config goes over a budget",
}

// deployNoEventMetrics does for the PromQL of the docs what deployNoEvent
// does for the deployed files, by metric (a doc's line numbers move): an
// expression reading one of these metrics need not return data.
var deployNoEventMetrics = map[string]string{
	"kernel_oom_kills_total":                     "no OOM kill is caused",
	"kernel_direct_reclaim_seconds_sum":          "the test causes no direct reclaim",
	"kernel_direct_reclaim_seconds_count":        "the test causes no direct reclaim",
	"kernel_direct_reclaim_seconds_bucket":       "the test causes no direct reclaim",
	"kernel_tcp_retransmits_total":               "loopback TCP loses no segment, so nothing is retransmitted",
	"kernel_tcp_window_scale_mismatches_total":   "no peer announces a window scale it does not use",
	"kernel_tcp_collapse_latency_seconds_count":  "no receive queue is collapsed",
	"kernel_tcp_collapse_latency_seconds_sum":    "no receive queue is collapsed",
	"kernel_tcp_syncookies_sent_total":           "no SYN queue overflows",
	"kernel_socket_buffer_limit_exceeded_total":  "no protocol memory limit (tcp_mem, udp_mem) is reached",
	"kernel_inet_hash_connect_ports_checked_sum": "port_exhaustion's search-length groups need fentry or kprobes",
}

// TestDeployExprsReturnData runs the exporter with the programs the
// dashboard and the rules read, has a real Prometheus scrape it every
// second and evaluate recording.yml and alerts.yml (group intervals
// lowered to 1 s), causes block I/O, loopback TCP connections, execs and
// UDP receive-buffer drops, and evaluates every dashboard expression
// ($__rate_interval = 1m) and every rule's expression (an alert's left
// side) through /api/v1/query. Each must return a non-empty result, except
// those of a program that is down on this kernel and those listed in
// deployNoEvent; for both, every metric in the expression must be one a
// program's YAML defines or a self-metric. It does the same for every
// expression of the ```promql blocks of README.md and docs/*.md (those
// reading native histograms against a second Prometheus that stores
// them), with every bundled program running.
func TestDeployExprsReturnData(t *testing.T) {
	dash, err := deploy.DashboardExprs()
	if err != nil {
		t.Fatal(err)
	}
	rules, err := deploy.RuleExprs()
	if err != nil {
		t.Fatal(err)
	}
	docs, err := deploy.DocExprs("..")
	if err != nil {
		t.Fatal(err)
	}
	progs, err := deploy.ProgramMetrics()
	if err != nil {
		t.Fatal(err)
	}
	// recorded maps a recording rule's name to the metrics it reads.
	recorded := map[string][]string{}
	for _, r := range rules {
		if name, ok := strings.CutPrefix(r.Source, "prometheus/recording.yml: record "); ok {
			recorded[name] = deploy.Metrics(r.Query)
		}
	}

	// Rule files with their 1 m group interval lowered to 1 s.
	dir := t.TempDir()
	var ruleFiles []string
	for _, f := range deploy.RuleFiles {
		b, err := os.ReadFile(filepath.Join("..", "deploy", f))
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, filepath.Base(f))
		if err := os.WriteFile(out, []byte(strings.ReplaceAll(string(b), "interval: 1m", "interval: 1s")), 0o644); err != nil {
			t.Fatal(err)
		}
		ruleFiles = append(ruleFiles, out)
	}

	ioDir := ioTempDir(t)
	dns := deployCgroupAndDNS(t)
	e := Start(t, "--programs=all", "--audit.interval=2s")
	base := startPrometheusRules(t, strings.TrimPrefix(e.URL, "http://"), ruleFiles)
	native := startPrometheus(t, strings.TrimPrefix(e.URL, "http://"), "--enable-feature=native-histograms")
	// connect() failing with EADDRNOTAVAIL (port_exhaustion), once: port
	// exhaustion in a private network namespace.
	exhaustPorts(t, 2, 2)
	server := func(x deploy.Expr) string {
		if x.Native {
			return native
		}
		return base
	}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); deployWorkload(ctx, t, ioDir, dns) }()
	defer func() { cancel(); wg.Wait() }()

	all := slices.Concat(dash, rules, docs)
	for i := range all {
		all[i].Data = deploy.Substitute(all[i].Data, "1m")
	}
	got := map[int]int{} // expression index -> series returned
	errs := map[int]error{}
	expected := func(i int) bool {
		if noEventReason(all[i], recorded) != "" {
			return false
		}
		return len(downPrograms(t, base, progs, recorded, all[i].Data)) == 0
	}
	// Poll until every expected expression has data, for at most 90 s;
	// the report below names those that never had.
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(time.Second) {
		done := true
		for i, x := range all {
			if got[i] > 0 {
				continue
			}
			vals, err := promQuery(server(x), x.Data)
			errs[i] = err
			got[i] = len(vals)
			if got[i] == 0 && expected(i) {
				done = false
			}
		}
		if done || time.Now().After(deadline) {
			break
		}
	}

	for i, x := range all {
		switch {
		case errs[i] != nil:
			t.Errorf("%s: %s: %v", x.Source, x.Data, errs[i])
		case got[i] > 0 && noEventReason(x, recorded) != "":
			// The event can still happen (a retransmit on a loaded
			// machine): data is fine, only its absence is excused.
			t.Logf("DATA    %-70s %d series (although %s): %s", x.Source, got[i], noEventReason(x, recorded), x.Data)
		case got[i] > 0:
			t.Logf("DATA    %-70s %d series: %s", x.Source, got[i], x.Data)
		default:
			why := noEventReason(x, recorded)
			if down := downPrograms(t, base, progs, recorded, x.Data); len(down) > 0 {
				why = "program down on this kernel: " + strings.Join(down, ", ")
			}
			if why == "" {
				t.Errorf("NO DATA %s: %s", x.Source, x.Data)
				continue
			}
			for _, m := range deployBaseMetrics(x.Data, recorded) {
				if x.Native && progs[m+"_bucket"] != "" {
					continue
				}
				if progs[m] == "" && !slices.Contains(deploy.SelfMetrics, m) {
					t.Errorf("%s: metric %s is not defined by any program's YAML nor a self-metric", x.Source, m)
				}
			}
			t.Logf("NO DATA %-70s (%s; metrics %v defined): %s", x.Source, why, deployBaseMetrics(x.Data, recorded), x.Data)
		}
	}
}

// deployNoEventMatch does the same by a part of the expression.
var deployNoEventMatch = map[string]string{
	`comm="nginx"`: "no process named nginx runs in the test",
	`kernel_cpu_profile_samples_total{function="tcp_write_timer"}`: "cpu_profile samples at 19 Hz per CPU and tcp_write_timer runs for microseconds at a time: a sample lands in it only on a host busy with TCP timers",
}

// noEventReason says why x need not return data although its programs are
// up (deployNoEvent, deployNoEventMetrics), or "".
func noEventReason(x deploy.Expr, recorded map[string][]string) string {
	if why := deployNoEvent[x.Source]; why != "" {
		return why
	}
	for _, m := range deployBaseMetrics(x.Data, recorded) {
		if why := deployNoEventMetrics[m]; why != "" {
			return why
		}
	}
	for part, why := range deployNoEventMatch {
		if strings.Contains(x.Data, part) {
			return why
		}
	}
	return ""
}

// deployBaseMetrics returns the scraped metrics q reads, with recorded
// series replaced by the metrics of their recording rule.
func deployBaseMetrics(q string, recorded map[string][]string) []string {
	var out []string
	for _, m := range deploy.Metrics(q) {
		if r, ok := recorded[m]; ok {
			out = append(out, r...)
		} else {
			out = append(out, m)
		}
	}
	return out
}

// downPrograms returns the programs whose metrics q reads and whose config
// is down (kernel_exporter_config_up 0).
func downPrograms(t *testing.T, base string, progs map[string]string, recorded map[string][]string, q string) []string {
	var down []string
	for _, m := range deployBaseMetrics(q, recorded) {
		p := progs[m]
		if p == "" || slices.Contains(down, p) {
			continue
		}
		v, err := promQuery(base, fmt.Sprintf(`kernel_exporter_config_up{config=%q}`, p))
		if err == nil && len(v) == 1 && v[0] == 0 {
			down = append(down, p)
		}
	}
	return down
}

// deployCgroupAndDNS sets up the events of the programs that need more
// than the loop of deployWorkload: a cgroup <cgroup2>/system.slice/<name>.service,
// which runqlat_cgroup's bundled allow list matches, with a child sleeping
// 1 ms in a loop in it, and a DNS server on 127.0.0.1:53
// in a private netns answering at once. It returns a UDP socket in that
// netns from which deployWorkload sends queries.
func deployCgroupAndDNS(t *testing.T) int {
	t.Helper()
	v2 := cgroup2Dir(t)
	slice := filepath.Join(v2.dir, "system.slice")
	if err := os.Mkdir(slice, 0o755); err == nil {
		t.Cleanup(func() { rmdirRetry(t, slice) })
	} else if !os.IsExist(err) {
		t.Fatalf("create cgroup: %v", err)
	}
	cg := filepath.Join(slice, randomName(t, "kx-deploy-")+".service")
	if err := os.Mkdir(cg, 0o755); err != nil {
		t.Fatalf("create cgroup: %v", err)
	}
	sleeper := childCmd(t, "nanosleeps", "100000", []string{filepath.Join(cg, "cgroup.procs")})
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	// Cleanups run last-in first-out: the child ends before its cgroup
	// is removed.
	t.Cleanup(func() { rmdirRetry(t, cg) })
	t.Cleanup(func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() })

	ns := newThreadNetns(t)
	var server, client int
	if err := ns.Run(func() (err error) {
		if server, err = udpSocket(t, loopback4(53)); err != nil {
			return err
		}
		client, err = udpSocket(t, loopback4(0))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := unix.SetsockoptTimeval(client, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 1}); err != nil {
		t.Fatal(err)
	}
	var srv sync.WaitGroup
	srv.Add(1)
	go serveDNS(server, 0, &srv)
	t.Cleanup(func() {
		unix.Shutdown(server, unix.SHUT_RDWR)
		srv.Wait()
	})
	return client
}

// rmdirRetry removes the cgroup directory dir, retrying for 5 s while its
// last task exits.
func rmdirRetry(t *testing.T, dir string) {
	for range 50 {
		if err := unix.Rmdir(dir); err == nil || err == unix.ENOENT {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Errorf("remove cgroup %s", dir)
}

// deployWorkload causes, until ctx ends, the events the expressions count:
// O_DIRECT I/O in dir (biolatency), loopback TCP connections (tcp_states,
// timers, net_tx_size), execs of /bin/true (exec, syscalls), one of them
// with too few file descriptors to open a file (EMFILE), UDP to a
// closed port (packet_drops NO_SOCKET) and to a socket with the smallest
// receive buffer (rcvqueue_full ENOMEM, packet_drops SOCKET_RCVBUFF).
func deployWorkload(ctx context.Context, t *testing.T, dir string, dns int) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Errorf("listen: %v", err)
		return
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	full, err := udpSocket(t, loopback4(0))
	if err != nil {
		t.Errorf("%v", err)
		return
	}
	if err := unix.SetsockoptInt(full, unix.SOL_SOCKET, unix.SO_RCVBUF, 0); err != nil {
		t.Errorf("SO_RCVBUF: %v", err)
		return
	}
	fullPort, err := localPort(full)
	if err != nil {
		t.Errorf("%v", err)
		return
	}
	closed, err := udpSocket(t, loopback4(0))
	if err != nil {
		t.Errorf("%v", err)
		return
	}
	closedPort, _ := localPort(closed)
	unix.Close(closed) // now nothing listens on closedPort
	sender, err := udpSocket(t, loopback4(0))
	if err != nil {
		t.Errorf("%v", err)
		return
	}
	for ctx.Err() == nil {
		if _, _, err := runDirectIO(dir, 16, 64<<10); err != nil {
			t.Errorf("O_DIRECT I/O: %v", err)
			return
		}
		for range 20 {
			if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
				c.Close()
			}
		}
		_ = exec.Command("/bin/true").Run()
		// With 3 descriptors allowed, the dynamic loader's first open()
		// fails with EMFILE (syscalls' errno label).
		_ = exec.Command("/bin/sh", "-c", "ulimit -n 3; /bin/true").Run()
		_ = sendN(sender, loopback4(fullPort), 50, 1000)
		_ = sendN(sender, loopback4(closedPort), 10, 100)
		// A DNS query to the server of deployCgroupAndDNS (dns_latency):
		// NOERROR for even ids, NXDOMAIN for odd ones.
		for id := range uint16(2) {
			if err := unix.Sendto(dns, dnsQuery(id), 0, loopback4(53)); err == nil {
				buf := make([]byte, 512)
				_, _, _ = unix.Recvfrom(dns, buf, 0)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
}

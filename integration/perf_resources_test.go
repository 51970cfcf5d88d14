// SPDX-License-Identifier: Apache-2.0

package integration

// Resource bounds of the exporter with its default programs: time from
// exec to the first successful scrape, and resident memory after a few
// scrapes (docs/performance.md). Also the helpers of the other perf tests
// (perf_load_test.go, perf_soak_test.go).

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// maxRSSKB bounds the resident memory of the default programs after five
// scrapes (issue 5). The start-up time's bound (300 ms from exec to the
// first scrape) is a benchmark's figure: BenchmarkStartup.
const maxRSSKB = 40 << 10 // 40 MiB

// perfSeconds returns the duration set by env (seconds), else def, or
// ciDef when CI=true.
func perfSeconds(env string, def, ciDef int) time.Duration {
	if v, err := strconv.Atoi(os.Getenv(env)); err == nil && v > 0 {
		return time.Duration(v) * time.Second
	}
	if os.Getenv("CI") == "true" {
		return time.Duration(ciDef) * time.Second
	}
	return time.Duration(def) * time.Second
}

// rssKB returns a process's resident set size (VmRSS) in KiB.
func rssKB(t *testing.T, pid int) int {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("read status of %d: %v", pid, err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) == 2 && f[1] == "kB" {
				if v, err := strconv.Atoi(f[0]); err == nil {
					return v
				}
			}
		}
	}
	t.Fatalf("/proc/%d/status has no VmRSS line:\n%s", pid, data)
	return 0
}

// pid returns the exporter's process id.
func (e *Exporter) pid() int { return e.cmd.Process.Pid }

// scrapeBody fetches /metrics with client and checks it is a complete
// exposition: status 200 and the exporter's own up metric in the body.
func scrapeBody(client *http.Client, url string) (int, error) {
	resp, err := client.Get(url + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("read body: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return len(body), fmt.Errorf("status %s: %.200s", resp.Status, body)
	}
	if !strings.Contains(string(body), "\nkernel_exporter_config_up{") {
		return len(body), fmt.Errorf("body of %d bytes has no kernel_exporter_config_up", len(body))
	}
	return len(body), nil
}

// percentile returns the p-quantile (0..1) of sorted durations, nearest
// rank.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func sortDurations(d []time.Duration) {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
}

// proc is an exporter process started by timeStartup.
type proc struct {
	cmd  *exec.Cmd
	url  string
	done chan struct{}
	once sync.Once
}

// stop sends SIGTERM and waits for the exit (SIGKILL after 10 s).
func (p *proc) stop() {
	p.once.Do(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
}

// timeStartup runs the exporter with args and returns the time from exec
// to the first scrape answered with status 200, polling every 2 ms. The
// process runs until stop or the end of the test.
func timeStartup(t testing.TB, args ...string) (time.Duration, *proc) {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	logs := &syncBuffer{}
	cmd := exec.Command(binary, append([]string{"--web.listen-address=" + addr}, args...)...)
	cmd.Stdout, cmd.Stderr = logs, logs
	client := &http.Client{Timeout: 5 * time.Second}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, url: "http://" + addr, done: make(chan struct{})}
	done := p.done
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(p.stop)
	for {
		resp, err := client.Get("http://" + addr + "/metrics")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return time.Since(start), p
			}
		}
		select {
		case <-done:
			t.Fatalf("kernel_exporter %v exited early\n%s", args, logs)
		default:
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("kernel_exporter %v did not serve within 30 s\n%s", args, logs)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestPerfRSS starts the exporter with its default programs three times:
// after five scrapes each process must use at most 40 MiB of resident
// memory. It logs the start-up times without a bound: BenchmarkStartup
// measures them.
func TestPerfRSS(t *testing.T) {
	var startups []time.Duration
	var rss []int
	client := &http.Client{Timeout: 10 * time.Second}
	for i := 0; i < 3; i++ {
		d, p := timeStartup(t)
		for j := 0; j < 5; j++ {
			if _, err := scrapeBody(client, p.url); err != nil {
				t.Fatalf("scrape %d: %v", j, err)
			}
		}
		startups = append(startups, d)
		rss = append(rss, rssKB(t, p.cmd.Process.Pid))
		p.stop() // one at a time
	}
	t.Logf("default programs: start-up to first successful scrape %v; RSS after 5 scrapes %v KiB", startups, rss)
	for i, kb := range rss {
		if kb > maxRSSKB {
			t.Errorf("run %d: RSS %d KiB after 5 scrapes, want <= %d KiB", i, kb, maxRSSKB)
		}
	}
}

// TestPerfStartupAll reports (without a bound: other programs may be added)
// the start-up time and RSS with every bundled program, and checks that the
// exporter serves.
func TestPerfStartupAll(t *testing.T) {
	d, p := timeStartup(t, "--programs=all")
	client := &http.Client{Timeout: 10 * time.Second}
	for j := 0; j < 5; j++ {
		if _, err := scrapeBody(client, p.url); err != nil {
			t.Fatalf("scrape %d: %v", j, err)
		}
	}
	t.Logf("--programs=all: start-up to first successful scrape %v; RSS after 5 scrapes %d KiB", d, rssKB(t, p.cmd.Process.Pid))
}

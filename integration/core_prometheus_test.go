// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kernel-exporter/kernel_exporter/internal/testenv"
)

// prometheusBinary is the Prometheus server the test scrapes with (Debian
// package "prometheus").
const prometheusBinary = "/usr/bin/prometheus"

// startPrometheus runs a Prometheus server that scrapes target (host:port)
// every second, with flags added to its command line (such as
// --enable-feature=native-histograms), and returns its base URL. It is
// killed at test cleanup.
func startPrometheus(t *testing.T, target string, flags ...string) string {
	t.Helper()
	return startPrometheusRules(t, target, nil, flags...)
}

// startPrometheusRules is startPrometheus with rule files (absolute paths)
// that the server loads and evaluates every second.
func startPrometheusRules(t *testing.T, target string, ruleFiles []string, flags ...string) string {
	t.Helper()
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: kernel_exporter
    static_configs:
      - targets: [%q]
`, target)
	if len(ruleFiles) > 0 {
		cfg += "rule_files:\n"
		for _, f := range ruleFiles {
			cfg += fmt.Sprintf("  - %q\n", f)
		}
	}
	return startPrometheusConfig(t, cfg, flags...)
}

// startPrometheusConfig runs a Prometheus server with the configuration
// cfg (prometheus.yml's text) and flags added to its command line, waits
// until it is ready and returns its base URL. It is killed at test cleanup.
func startPrometheusConfig(t *testing.T, cfg string, flags ...string) string {
	t.Helper()
	if _, err := os.Stat(prometheusBinary); err != nil {
		testenv.SkipOrFail(t, "%s missing (install the prometheus package): %v", prometheusBinary, err)
	}
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	logs := &syncBuffer{}
	cmd := exec.Command(prometheusBinary, append([]string{
		"--config.file=" + cfgFile,
		"--storage.tsdb.path=" + filepath.Join(dir, "data"),
		"--web.listen-address=" + addr,
		"--log.level=warn",
	}, flags...)...)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start prometheus: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("prometheus output:\n%s", logs)
		}
	})
	base := "http://" + addr
	Eventually(t, 30*time.Second, func() bool {
		select {
		case <-done:
			t.Fatalf("prometheus exited early:\n%s", logs)
		default:
		}
		resp, err := http.Get(base + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}, "prometheus not ready within 30s:\n%s", logs)
	return base
}

// promQuery runs an instant query and returns the vector's values.
func promQuery(base, query string) ([]float64, error) {
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(query))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("decode query response %q: %w", body, err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("query %q: %s: %s", query, r.Status, r.Error)
	}
	var vals []float64
	for _, s := range r.Data.Result {
		str, _ := s.Value[1].(string)
		v, err := strconv.ParseFloat(str, 64)
		if err != nil {
			return nil, fmt.Errorf("query %q: value %q: %w", query, str, err)
		}
		vals = append(vals, v)
	}
	return vals, nil
}

// TestPrometheusScrapesBioLatency has a real Prometheus server scrape the
// exporter while O_DIRECT I/O runs, and checks that the 99th percentile of
// block I/O latency computed by PromQL from our histogram is a finite,
// positive number of seconds.
func TestPrometheusScrapesBioLatency(t *testing.T) {
	const query = `histogram_quantile(0.99, rate(kernel_bio_latency_seconds_bucket[30s]))`
	dir := ioTempDir(t)
	e := Start(t, "--programs=biolatency")
	base := startPrometheus(t, strings.TrimPrefix(e.URL, "http://"))

	// I/O runs in the background until the query succeeds: rate() over
	// 30 s of 1 s scrapes needs fresh increases to give a number.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	ioErr := make(chan error, 1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			if _, _, err := runDirectIO(dir, 64, 64<<10); err != nil {
				ioErr <- err
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	defer func() { cancel(); wg.Wait() }()

	start := time.Now()
	var last []float64
	var lastErr error
	var got float64
	Eventually(t, 60*time.Second, func() bool {
		select {
		case err := <-ioErr:
			t.Fatalf("background O_DIRECT I/O: %v", err)
		default:
		}
		last, lastErr = promQuery(base, query)
		for _, v := range last {
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				got = v
				return true
			}
		}
		return false
	}, "no finite result of %s within 60s: last %v, error %v", query, last, lastErr)
	if got <= 0 {
		t.Errorf("%s = %v, want > 0", query, got)
	}
	t.Logf("%s = %v s after %v (all: %v)", query, got, time.Since(start).Round(time.Millisecond), last)
}

// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"gopkg.in/yaml.v3"

	"github.com/kernel-exporter/kernel_exporter/deploy"
	"github.com/kernel-exporter/kernel_exporter/programs"
)

// alertSoakDuration is how long TestAlertSoak lets Prometheus scrape and
// evaluate, unless KE_ALERT_SOAK_DURATION says otherwise.
const alertSoakDuration = 20 * time.Minute

// alertSoakInterval is the scrape and evaluation interval of the soak's
// Prometheus (the rule groups that set no interval of their own are
// evaluated at it; recording.yml's group keeps its 1m).
const alertSoakInterval = 15 * time.Second

// fullAlert is the alert the filled map must fire.
const fullAlert = "KernelExporterMapNearlyFull"

// TestAlertSoak has a real Prometheus scrape two exporters for
// KE_ALERT_SOAK_DURATION (default 20m) and evaluate deploy/prometheus's
// recording.yml and alerts.yml as shipped (scrape and evaluation every
// 15 s):
//   - job "default": the exporter with its default programs (timers,
//     biolatency, runqlat) while the test keeps the host working: O_DIRECT
//     writes (16 of 64 KiB every second), two threads spinning 20 ms of
//     every 100 ms and four sleeping 1 ms in a loop. No alert of this job
//     may fire at any evaluation of the window (ALERTS over the whole
//     window; pending ones are logged), every rule must evaluate without
//     error, and every scrape must succeed.
//   - job "mapfill": a config (testdata/maphealth/fill.bpf.c) whose 64-entry
//     hash map the test fills with 100 distinct keys at the start: it must
//     fire KernelExporterMapNearlyFull for that map (fullness 1) by the end.
//     When the duration is too short for the alert's for: (15m) to elapse,
//     the rules are a copy of alerts.yml with only that alert's for:
//     shortened to 1m, which the test logs.
//
// It runs only when KE_ALERT_SOAK_DIR names a directory: make test runs it
// in the background through tools/alert-soak.sh after the go test ./...
// phase (whose integration tests count BPF programs), beside make fuzz and
// make test-kernels, and prints its output at the end. It logs progress
// every 30 s, and at the end every rule's state and every alert's value.
func TestAlertSoak(t *testing.T) {
	if os.Getenv("KE_ALERT_SOAK_DIR") == "" {
		t.Skip("run by make test in the background (tools/alert-soak.sh), beside make fuzz and make test-kernels; set KE_ALERT_SOAK_DIR to run it")
	}
	dur := alertSoakDuration
	if s := os.Getenv("KE_ALERT_SOAK_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 2*time.Minute || d > 2*time.Hour {
			t.Fatalf("KE_ALERT_SOAK_DURATION=%q: want a Go duration from 2m to 2h", s)
		}
		dur = d
	}

	// The rule files, as shipped unless the duration is too short for
	// fullAlert's for: (then a copy with that for: shortened).
	var rules []string // recording.yml, alerts.yml
	for _, f := range deploy.RuleFiles {
		rules = append(rules, filepath.Join(repoRoot, "deploy", f))
	}
	forDur := alertFor(t, rules[1], fullAlert)
	// Fill, 1m recording interval, one evaluation, for:, one evaluation.
	if need := forDur + 3*time.Minute; dur < need {
		rules[1] = shortenFor(t, rules[1], fullAlert, time.Minute)
		t.Logf("duration %v < %v (%s's for: %v + 3m): its for: is shortened to 1m in a copy of alerts.yml, every other line as shipped", dur, need, fullAlert, forDur)
	} else {
		t.Logf("rules as shipped: %s", strings.Join(rules, ", "))
	}

	// The exporters.
	def := Start(t)
	cfgDir := t.TempDir()
	writeMapFillConfig(t, cfgDir)
	fill := Start(t, "--programs=none", "--config.dir="+cfgDir, "--config.names=mapfill")
	if v := fill.Scrape().Value("kernel_exporter_config_up", L("config", "mapfill")); v != 1 {
		t.Fatalf("config mapfill down:\n%s", fill.Logs())
	}
	fillCalls(t, 0, 100) // 64 keys in, 36 refused

	cfg := fmt.Sprintf(`global:
  scrape_interval: %[1]s
  scrape_timeout: 10s
  evaluation_interval: %[1]s
scrape_configs:
  - job_name: default
    static_configs:
      - targets: [%[2]q]
  - job_name: mapfill
    static_configs:
      - targets: [%[3]q]
rule_files:
  - %[4]q
  - %[5]q
`, alertSoakInterval, strings.TrimPrefix(def.URL, "http://"), strings.TrimPrefix(fill.URL, "http://"), rules[0], rules[1])
	prom := startPrometheusConfig(t, cfg)
	// The window: from Prometheus's first scrapes, so that a slow start
	// (compiling, loading) takes nothing from fullAlert's for:.
	start := time.Now()

	// The host's work, until the end of the window.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	ioDir := ioTempDir(t)
	soakWork(ctx, t, &wg, ioDir)

	// tools/alert-soak.sh stop ends the soak with SIGTERM: the cleanups
	// still run (exporters stopped, temporary directories removed).
	term, stop := signal.NotifyContext(context.Background(), unix.SIGTERM, unix.SIGINT)
	defer stop()
	end := start.Add(dur)
	for now := time.Now(); now.Before(end); now = time.Now() {
		select {
		case <-term.Done():
			t.Fatalf("stopped by a signal after %v of %v", time.Since(start).Round(time.Second), dur)
		case <-time.After(min(30*time.Second, end.Sub(now))):
		}
		if err := def.cmd.Process.Signal(unix.Signal(0)); err != nil {
			t.Fatalf("exporter of job default gone:\n%s", def.Logs())
		}
		t.Logf("%v of %v: alerts now: %s", time.Since(start).Round(time.Second), dur, alertSummary(t, prom))
	}
	cancel()
	wg.Wait()
	window := time.Since(start).Round(time.Second)
	rng := fmt.Sprintf("[%ds]", int(window.Seconds()))

	// Every scrape of both jobs succeeded and every default config is up.
	for _, job := range []string{"default", "mapfill"} {
		v, err := promSamples(prom, fmt.Sprintf(`min_over_time(up{job=%q}%s)`, job, rng))
		if err != nil || len(v) != 1 || v[0].Value != 1 {
			t.Errorf("min_over_time(up{job=%q}) = %v (%v), want 1: a scrape failed", job, v, err)
		}
	}
	ups, err := promSamples(prom, fmt.Sprintf(`min_over_time(kernel_exporter_config_up{job="default"}%s)`, rng))
	if err != nil || len(ups) != len(programs.Default) {
		t.Errorf("kernel_exporter_config_up of job default: %v (%v), want the default programs %v", ups, err, programs.Default)
	}
	for _, s := range ups {
		if s.Value != 1 {
			t.Errorf("config %s of job default was down during the window", s.Labels["config"])
		}
	}

	// Every rule evaluated without error; log each with its state and
	// the values of its active alerts.
	groups := promRules(t, prom)
	n := 0
	for _, g := range groups {
		for _, r := range g.Rules {
			n++
			if r.Health != "ok" {
				t.Errorf("rule %s (group %s): health %q: %s", r.Name, g.Name, r.Health, r.LastError)
			}
			switch r.Type {
			case "alerting":
				t.Logf("alert  %-32s %-9s %d active", r.Name, r.State, len(r.Alerts))
				for _, a := range r.Alerts {
					t.Logf("         %s %v value %s since %s", a.State, a.Labels, a.Value, a.ActiveAt)
				}
			default:
				v, _ := promSamples(prom, r.Name)
				t.Logf("record %-60s %d series%s", r.Name, len(v), sampleList(v, 6))
			}
		}
	}
	if n == 0 {
		t.Error("Prometheus evaluates no rule")
	}

	// No alert of job default fired at any evaluation of the window.
	seen, err := promSamples(prom, fmt.Sprintf(`max_over_time(ALERTS{job!="mapfill"}%s)`, rng))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range seen {
		if s.Labels["alertstate"] == "firing" {
			t.Errorf("alert fired on the default programs during the window: %v", s.Labels)
		} else {
			t.Logf("pending (never fired) on the default programs: %v", s.Labels)
		}
	}
	if len(seen) == 0 {
		t.Logf("no alert of job default was pending or firing in the %v window", window)
	}

	// The filled map fires fullAlert, with fullness 1 (64 of 64).
	firing, err := promSamples(prom, fmt.Sprintf(`ALERTS{job="mapfill",alertname=%q,alertstate="firing"}`, fullAlert))
	if err != nil {
		t.Fatal(err)
	}
	if len(firing) != 1 || firing[0].Labels["config"] != "mapfill" || firing[0].Labels["map"] != "fill_total" {
		t.Errorf("%s firing for job mapfill: %v, want map fill_total of config mapfill\n%s", fullAlert, firing, fill.Logs())
	}
	ratio, err := promSamples(prom, `config_map:kernel_exporter_map_fullness:ratio{job="mapfill",map="fill_total"}`)
	if err != nil || len(ratio) != 1 || ratio[0].Value != 1 {
		t.Errorf("fullness of fill_total = %v (%v), want one series at 1 (64 of 64)", ratio, err)
	}
	other, _ := promSamples(prom, fmt.Sprintf(`max_over_time(ALERTS{job="mapfill"}%s)`, rng))
	t.Logf("alerts of job mapfill in the window: %s", sampleList(other, 10))
}

// soakWork keeps the host working until ctx ends: O_DIRECT writes in dir
// (biolatency), two threads spinning 20 ms of every 100 ms and four
// sleeping 1 ms in a loop (runqlat, timers). Bounded to about 0.4 CPU so
// that the test phases beside it keep theirs.
func soakWork(ctx context.Context, t *testing.T, wg *sync.WaitGroup, dir string) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			if _, _, err := runDirectIO(dir, 16, 64<<10); err != nil {
				t.Errorf("O_DIRECT I/O: %v", err)
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			for ctx.Err() == nil {
				for t0 := time.Now(); time.Since(t0) < 20*time.Millisecond; {
				}
				time.Sleep(80 * time.Millisecond)
			}
		}()
	}
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			ts := unix.Timespec{Nsec: int64(time.Millisecond)}
			for ctx.Err() == nil {
				_ = unix.Nanosleep(&ts, nil)
			}
		}()
	}
}

// alertFor returns the for: of alert name in the rule file path.
func alertFor(t *testing.T, path, name string) time.Duration {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				For   string `yaml:"for"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert == name {
				if r.For == "" {
					return 0
				}
				d, err := time.ParseDuration(r.For)
				if err != nil {
					t.Fatalf("%s: alert %s: for %q: %v", path, name, r.For, err)
				}
				return d
			}
		}
	}
	t.Fatalf("%s has no alert %s", path, name)
	return 0
}

// shortenFor writes a copy of the rule file path in which only the for:
// line of alert name is changed to d, and returns the copy's path.
func shortenFor(t *testing.T, path, name string, d time.Duration) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	at := slices.IndexFunc(lines, func(l string) bool { return strings.TrimSpace(l) == "- alert: "+name })
	done := false
	for i := at + 1; at >= 0 && i < len(lines) && !strings.Contains(lines[i], "- alert:"); i++ {
		if k, _, ok := strings.Cut(lines[i], "for:"); ok && strings.TrimSpace(k) == "" {
			lines[i] = k + "for: " + strings.TrimSuffix(d.String(), "0s")
			done = true
			break
		}
	}
	if !done {
		t.Fatalf("%s: no for: line for alert %s", path, name)
	}
	out := filepath.Join(t.TempDir(), filepath.Base(path))
	if err := os.WriteFile(out, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := alertFor(t, out, name); got != d {
		t.Fatalf("shortened for: of %s is %v, want %v", name, got, d)
	}
	return out
}

// promSample is one series of an instant query's vector.
type promSample struct {
	Labels map[string]string
	Value  float64
}

func (s promSample) String() string {
	return fmt.Sprintf("%v=%g", s.Labels, s.Value)
}

// promSamples runs an instant query and returns its vector, series sorted
// by their labels.
func promSamples(base, query string) ([]promSample, error) {
	var r struct {
		Result []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	}
	if err := promAPI(base, "/api/v1/query?query="+url.QueryEscape(query), &r); err != nil {
		return nil, fmt.Errorf("query %q: %w", query, err)
	}
	var out []promSample
	for _, s := range r.Result {
		str, _ := s.Value[1].(string)
		v, err := strconv.ParseFloat(str, 64)
		if err != nil {
			return nil, fmt.Errorf("query %q: value %q: %w", query, str, err)
		}
		out = append(out, promSample{s.Metric, v})
	}
	sort.Slice(out, func(i, j int) bool { return fmt.Sprint(out[i].Labels) < fmt.Sprint(out[j].Labels) })
	return out, nil
}

// promRuleGroup is a rule group of /api/v1/rules.
type promRuleGroup struct {
	Name  string `json:"name"`
	Rules []struct {
		Name      string `json:"name"`
		Type      string `json:"type"`
		State     string `json:"state"`
		Health    string `json:"health"`
		LastError string `json:"lastError"`
		Alerts    []struct {
			Labels   map[string]string `json:"labels"`
			State    string            `json:"state"`
			ActiveAt string            `json:"activeAt"`
			Value    string            `json:"value"`
		} `json:"alerts"`
	} `json:"rules"`
}

// promRules returns the rule groups Prometheus evaluates.
func promRules(t *testing.T, base string) []promRuleGroup {
	t.Helper()
	var r struct {
		Groups []promRuleGroup `json:"groups"`
	}
	if err := promAPI(base, "/api/v1/rules", &r); err != nil {
		t.Fatalf("rules: %v", err)
	}
	return r.Groups
}

// promAPI gets path of the Prometheus HTTP API and decodes its data into v.
func promAPI(base, path string, v any) error {
	c := http.Client{Timeout: 30 * time.Second}
	resp, err := c.Get(base + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	var r struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return fmt.Errorf("decode %d-byte response: %w", len(body), err)
	}
	if r.Status != "success" {
		return fmt.Errorf("%s: %s", r.Status, r.Error)
	}
	return json.Unmarshal(r.Data, v)
}

// alertSummary describes the alerts pending or firing now, by job.
func alertSummary(t *testing.T, base string) string {
	v, err := promSamples(base, `count by (job, alertname, alertstate) (ALERTS)`)
	if err != nil {
		t.Logf("ALERTS: %v", err)
		return "?"
	}
	if len(v) == 0 {
		return "none"
	}
	var parts []string
	for _, s := range v {
		parts = append(parts, fmt.Sprintf("%s/%s %s x%g", s.Labels["job"], s.Labels["alertname"], s.Labels["alertstate"], s.Value))
	}
	return strings.Join(parts, ", ")
}

// sampleList formats at most n samples for a log line.
func sampleList(v []promSample, n int) string {
	var b strings.Builder
	for i, s := range v {
		if i == n {
			fmt.Fprintf(&b, " ... (%d more)", len(v)-n)
			break
		}
		b.WriteString(" ")
		b.WriteString(s.String())
	}
	return b.String()
}

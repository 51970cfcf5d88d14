// SPDX-License-Identifier: Apache-2.0

package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const goodCounter = `metrics:
  counters:
    - name: timer_starts_total
      help: Timers started
      labels:
        - name: function
          size: 8
          decoders:
            - name: ksym
`

func TestParseGood(t *testing.T) {
	c, err := Parse("timers.yaml", []byte(goodCounter))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.MetricName(c.Metrics.Counters[0].Name); got != "kernel_timer_starts_total" {
		t.Errorf("metric name = %q", got)
	}
	if c.Name != "timers" {
		t.Errorf("name = %q", c.Name)
	}
}

// TestParseErrors checks the exact message for each kind of bad config.
func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"unknown key", strings.Replace(goodCounter, "size: 8", "sise: 8", 1),
			`bad.yaml:7: unknown key "sise" in label (did you mean "size"?)`},
		{"unknown top-level key", "programs: []\n" + goodCounter,
			`bad.yaml:1: unknown key of 8 bytes at the top level: not a config? (known keys: alternatives, attach_to, audit, cgroup_id_map, kaddrs, metrics, namespace, perf_events, requires, tracing, uprobes, usdt)`},
		{"wrong type", strings.Replace(goodCounter, "size: 8", "size: eight", 1),
			"bad.yaml:7: wrong type: got string \"eight\", want an integer"},
		{"labels not a list", "metrics:\n  counters:\n    - name: a\n      help: b\n      labels: 5\n",
			"bad.yaml:5: wrong type: got integer \"5\", want a list"},
		{"syntax", "metrics:\n  counters: [\n", `bad.yaml:2: did not find expected node content`},
		{"empty", "", `bad.yaml: empty config`},
		{"no metrics", "namespace: x\n", `bad.yaml:1: metrics: no counters, gauges or histograms defined (nor tracing spans)`},
		{"zero size", strings.Replace(goodCounter, "size: 8", "size: 0", 1),
			`bad.yaml:7: metrics.counters[0].labels[0].size: must be 1 to 4096 bytes, got 0`},
		{"missing help", strings.Replace(goodCounter, "      help: Timers started\n", "", 1),
			`bad.yaml:3: metrics.counters[0].help: missing help for metric "timer_starts_total"`},
		{"bad metric name", strings.Replace(goodCounter, "timer_starts_total", "timer-starts", 1),
			`bad.yaml:3: metrics.counters[0].name: invalid metric name "timer-starts"`},
		{"no decoders", strings.Replace(goodCounter, "          decoders:\n            - name: ksym\n", "", 1),
			`bad.yaml:6: metrics.counters[0].labels[0].decoders: label "function" has no decoders`},
		{"flush interval without perf event array", strings.Replace(goodCounter, "      help: Timers started\n", "      help: x\n      flush_interval: 1m\n", 1),
			`bad.yaml:5: metrics.counters[0].flush_interval: metric "timer_starts_total": flush_interval needs perf_event_array: true`},
		{"flush interval too short", strings.Replace(goodCounter, "      help: Timers started\n", "      help: x\n      perf_event_array: true\n      flush_interval: 10ms\n", 1),
			`bad.yaml:6: metrics.counters[0].flush_interval: metric "timer_starts_total": must be 1s to 720h0m0s (30 days), got "10ms"`},
		{"flush interval not a duration", strings.Replace(goodCounter, "      help: Timers started\n", "      help: x\n      perf_event_array: true\n      flush_interval: 3600\n", 1),
			`bad.yaml:6: metrics.counters[0].flush_interval: metric "timer_starts_total": want a duration such as "10m" or "1h" (units ms, s, m, h), got "3600"`},
		{"perf event array with ttl", strings.Replace(goodCounter, "      help: Timers started\n", "      help: x\n      perf_event_array: true\n      ttl: 1m\n", 1),
			`bad.yaml:6: metrics.counters[0].ttl: metric "timer_starts_total": ttl does not combine with perf_event_array (series are reset every flush_interval)`},
		{"bucket type", histogram("exp3", "bucket"),
			`bad.yaml:5: metrics.histograms[0].bucket_type: unknown bucket type "exp3" (want exp2, exp2zero, linear or fixed)`},
		{"missing bucket label", histogram("exp2", "slot"),
			`bad.yaml:9: metrics.histograms[0].labels: histogram "lat_seconds" has no "bucket" label: its key must end with the bucket slot`},
		{"bucket max", strings.Replace(histogram("exp2", "bucket"), "bucket_max: 26", "bucket_max: 70", 1),
			`bad.yaml:7: metrics.histograms[0].bucket_max: must be <= 63 for exp2 buckets, got 70`},
		{"fixed without keys", histogram("fixed", "bucket"),
			`bad.yaml:5: metrics.histograms[0].bucket_type: fixed buckets need bucket_keys`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("bad.yaml", []byte(tc.yaml))
			if err == nil {
				t.Fatal("no error")
			}
			if err.Error() != tc.want {
				t.Errorf("error:\n got: %s\nwant: %s", err, tc.want)
			}
		})
	}
}

func histogram(bucketType, bucketLabel string) string {
	return `metrics:
  histograms:
    - name: lat_seconds
      help: Latency
      bucket_type: ` + bucketType + `
      bucket_min: 0
      bucket_max: 26
      bucket_multiplier: 0.000001
      labels:
        - name: ` + bucketLabel + `
          size: 4
          decoders:
            - name: uint
`
}

func TestLoadMissingFile(t *testing.T) {
	dir := t.TempDir()
	_, err := Load(dir, "nope")
	want := filepath.Join(dir, "nope.yaml") + ": open: no such file or directory"
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("errors.Is(%v, os.ErrNotExist) = false", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ok.yaml"), []byte(goodCounter), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(dir, "ok")
	if err != nil {
		t.Fatal(err)
	}
	if c.Object != filepath.Join(dir, "ok.bpf.o") {
		t.Errorf("object = %s", c.Object)
	}
}

func TestFixedAndSumBucket(t *testing.T) {
	y := strings.Replace(histogram("fixed", "bucket"), "bucket_max: 26", "bucket_max: 0\n      bucket_keys: [1, 5, 10]\n      sum_bucket: 11", 1)
	c, err := Parse("f.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	if h := c.Metrics.Histograms[0]; *h.SumBucket != 11 || len(h.BucketKeys) != 3 {
		t.Errorf("parsed %+v", h)
	}
}

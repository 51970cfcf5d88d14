// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"context"
	"log/slog"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// logRecords is a slog.Handler that keeps the records it gets.
type logRecords struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecords) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Clone())
	return nil
}
func (h *logRecords) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logRecords) WithGroup(string) slog.Handler      { return h }

// attrs returns the attributes of record i as strings.
func (h *logRecords) attrs(i int) map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := map[string]string{"msg": h.records[i].Message}
	h.records[i].Attrs(func(a slog.Attr) bool {
		m[a.Key] = a.Value.String()
		return true
	})
	return m
}

func (h *logRecords) len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.records)
}

// captureLog makes slog.Default() write to a logRecords until the test ends.
func captureLog(t *testing.T) *logRecords {
	h := &logRecords{}
	old := slog.Default()
	slog.SetDefault(slog.New(h))
	t.Cleanup(func() { slog.SetDefault(old) })
	return h
}

// selfMetrics is the config's self-metrics alone, as the Status collector
// sends them.
type selfMetrics struct{ c *Config }

func (selfMetrics) Describe(chan<- *prometheus.Desc)      {}
func (s selfMetrics) Collect(ch chan<- prometheus.Metric) { s.c.collectSelf(ch) }

// decoderErrorCounts returns kernel_exporter_decoder_errors_total by its
// label string ("config=...,decoder=...,metric=...").
func decoderErrorCounts(t *testing.T, c *Config) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(selfMetrics{c})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "kernel_exporter_decoder_errors_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			out[labelsOf(m)] = m.GetCounter().GetValue()
		}
	}
	return out
}

// TestHardening14DecoderErrorsVisible checks that a decoder failure is
// counted under the decoder that failed and logged once, with the config,
// metric, decoder and an error that shows the key only as a hex token.
func TestHardening14DecoderErrorsVisible(t *testing.T) {
	logs := captureLog(t)
	c, m := fileFixture(t, "hardening14.yaml", counterYAML, 100, opsSpec)
	put(t, m, key(1, 7), 10)
	for dev := uint32(1); dev <= 3; dev++ {
		put(t, m, key(9, dev), 1) // op 9: unknown:9, which errno rejects
	}
	vals, _, _ := counters(t, c) // one read
	if !sameValues(vals, map[string]float64{"dev=7,op=read": 10}) {
		t.Errorf("series = %v", vals)
	}
	want := map[string]float64{
		"config=hardening14,decoder=errno,metric=kernel_ops_total":      3,
		"config=hardening14,decoder=static_map,metric=kernel_ops_total": 0,
		"config=hardening14,decoder=uint,metric=kernel_ops_total":       0,
	}
	if got := decoderErrorCounts(t, c); !sameValues(got, want) {
		t.Errorf("decoder errors = %v, want %v", got, want)
	}
	// The three keys fail with the same error: one line.
	if n := logs.len(); n != 1 {
		t.Fatalf("%d log lines, want 1", n)
	}
	got := logs.attrs(0)
	wantLog := map[string]string{
		"msg":     "decoder failed, map key dropped",
		"config":  "hardening14",
		"metric":  "kernel_ops_total",
		"decoder": "errno",
		"err":     "errno: bad number 0x756e6b6e6f776e3a... (9 bytes)",
	}
	for k, v := range wantLog {
		if got[k] != v {
			t.Errorf("log %s = %q, want %q (record %v)", k, got[k], v, got)
		}
	}
	// A second read counts the bad keys again but does not log again.
	counters(t, c)
	want["config=hardening14,decoder=errno,metric=kernel_ops_total"] = 6
	if got := decoderErrorCounts(t, c); !sameValues(got, want) {
		t.Errorf("after 2 reads: decoder errors = %v, want %v", got, want)
	}
	if n := logs.len(); n != 1 {
		t.Errorf("after 2 reads: %d log lines, want 1", n)
	}
}

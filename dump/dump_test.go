// SPDX-License-Identifier: Apache-2.0

package dump

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prom2json"

	"github.com/kernel-exporter/kernel_exporter/collector"
	"github.com/kernel-exporter/kernel_exporter/exporter"
	"github.com/kernel-exporter/kernel_exporter/exposition"
)

func TestParseFormat(t *testing.T) {
	for _, s := range []string{"text", "json"} {
		if f, err := ParseFormat(s); err != nil || string(f) != s {
			t.Errorf("ParseFormat(%q) = %q, %v", s, f, err)
		}
	}
	for _, s := range []string{"", "xml", "TEXT", "protobuf", "json "} {
		_, err := ParseFormat(s)
		if err == nil || !strings.HasPrefix(err.Error(), "--format ") || !strings.Contains(err.Error(), "must be text or json") {
			t.Errorf("ParseFormat(%q) = %v, want an error naming --format", s, err)
		}
	}
}

func TestParseFlags(t *testing.T) {
	if f, err := ParseFlags(DefaultDuration, "json"); f != FormatJSON || err != nil {
		t.Errorf("ParseFlags(10s, json) = %q, %v", f, err)
	}
	if _, err := ParseFlags(0, "json"); err == nil || !strings.HasPrefix(err.Error(), "--duration 0s") {
		t.Errorf("ParseFlags(0, json) = %v, want a --duration error", err)
	}
	if _, err := ParseFlags(time.Second, "yaml"); err == nil || !strings.HasPrefix(err.Error(), `--format "yaml"`) {
		t.Errorf("ParseFlags(1s, yaml) = %v, want a --format error", err)
	}
}

func TestCheckDuration(t *testing.T) {
	for _, d := range []time.Duration{time.Nanosecond, DefaultDuration, MaxDuration} {
		if err := CheckDuration(d); err != nil {
			t.Errorf("CheckDuration(%v) = %v", d, err)
		}
	}
	for _, d := range []time.Duration{0, -time.Second, MaxDuration + 1} {
		if err := CheckDuration(d); err == nil || !strings.HasPrefix(err.Error(), "--duration "+d.String()) {
			t.Errorf("CheckDuration(%v) = %v, want an error naming --duration and the value", d, err)
		}
	}
}

// source is a fixed exposition.Source.
type source []*collector.Snapshot

func (s source) Read() []*collector.Snapshot { return s }

// fixture returns two snapshots (a counter with an odd label value, a
// histogram, and a family whose read failed) and a registry with one
// self-metric.
func fixture(t *testing.T) (source, *prometheus.Registry) {
	t.Helper()
	calls := collector.NewFamily("test_calls_total", "Calls.", collector.KindCounter, []string{"name"}, nil, []collector.SeriesData{
		{Labels: []string{"read"}, Value: 7},
		{Labels: []string{"odd \"quoted\"\n\xff"}, Value: 1.5},
	})
	lat := collector.NewFamily("test_latency_seconds", "Latency.", collector.KindHistogram, []string{"disk"}, []float64{0.001, 0.002, 0.004}, []collector.SeriesData{
		{Labels: []string{"vda"}, Cum: []uint64{1, 3, 6}, Count: 8, Sum: 0.0125},
	})
	broken := &collector.Family{Name: "test_broken_total", Kind: collector.KindCounter, Err: errors.New("map lookup: bad fd")}
	reg := prometheus.NewRegistry()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "kernel_exporter_test_up", Help: "Self."})
	g.Set(1)
	reg.MustRegister(g)
	return source{
		{Config: "one", Families: []*collector.Family{calls, broken}},
		{Config: "two", Families: []*collector.Family{lat}},
	}, reg
}

// TestWriteText checks that the text dump is exposition.Write's text
// format byte for byte, and that the failed read is reported, naming the
// config and the metric, after the rest was written.
func TestWriteText(t *testing.T) {
	src, reg := fixture(t)
	var got bytes.Buffer
	err := Write(&got, FormatText, src, reg)
	if err == nil || !strings.Contains(err.Error(), "config one: metric test_broken_total left out: map read failed: map lookup: bad fd") {
		t.Errorf("Write error = %v, want the failed read of test_broken_total of config one", err)
	}
	mfs, _ := reg.Gather()
	var want bytes.Buffer
	if err := exposition.Write(&want, expfmt.NewFormat(expfmt.TypeTextPlain), mfs, src); err != nil {
		t.Fatal(err)
	}
	if got.String() != want.String() {
		t.Errorf("text dump differs from exposition.Write:\n%s\nwant:\n%s", &got, &want)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	parsed, err := p.TextToMetricFamilies(&got)
	if err != nil {
		t.Fatalf("the text dump does not parse: %v", err)
	}
	if v := parsed["test_calls_total"].GetMetric()[0].GetCounter().GetValue(); v != 7 {
		t.Errorf("test_calls_total{name=read} = %v, want 7", v)
	}
	if h := parsed["test_latency_seconds"].GetMetric()[0].GetHistogram(); h.GetSampleCount() != 8 || len(h.GetBucket()) != 4 {
		t.Errorf("test_latency_seconds = %v, want count 8 and 4 buckets", h)
	}
}

// TestWriteJSON checks that the JSON dump decodes into prom2json's types,
// keeps the text's family order, and carries the values, the label values
// (escapes undone, invalid UTF-8 replaced) and the histogram.
func TestWriteJSON(t *testing.T) {
	src, reg := fixture(t)
	var out bytes.Buffer
	if err := Write(&out, FormatJSON, src, reg); err == nil {
		t.Error("Write: no error for the failed read")
	}
	if !strings.HasSuffix(out.String(), "]\n") || strings.Count(out.String(), "\n") != 1 {
		t.Errorf("the JSON dump is not one array on one line: %q", out.String())
	}
	var fams []*prom2json.Family
	if err := json.Unmarshal(out.Bytes(), &fams); err != nil {
		t.Fatalf("the JSON dump does not decode into []*prom2json.Family: %v\n%s", err, &out)
	}
	var names []string
	for _, f := range fams {
		names = append(names, f.Name+":"+f.Type)
	}
	if want := "kernel_exporter_test_up:GAUGE test_calls_total:COUNTER test_latency_seconds:HISTOGRAM"; strings.Join(names, " ") != want {
		t.Fatalf("families %v, want %s", names, want)
	}
	var calls []prom2json.Metric
	recode(t, fams[1].Metrics, &calls)
	if len(calls) != 2 || calls[0].Labels["name"] != "read" || calls[0].Value != "7" ||
		calls[1].Labels["name"] != "odd \"quoted\"\n\uFFFD" || calls[1].Value != "1.5" {
		t.Errorf("test_calls_total = %+v", calls)
	}
	var hist []struct {
		Labels  map[string]string `json:"labels"`
		Buckets map[string]string `json:"buckets"`
		Count   string            `json:"count"`
		Sum     string            `json:"sum"`
	}
	recode(t, fams[2].Metrics, &hist)
	wantBuckets := map[string]string{"0.001": "1", "0.002": "3", "0.004": "6", "+Inf": "8"}
	if len(hist) != 1 || hist[0].Labels["disk"] != "vda" || hist[0].Count != "8" || hist[0].Sum != "0.0125" || !equal(hist[0].Buckets, wantBuckets) {
		t.Errorf("test_latency_seconds = %+v, want count 8, sum 0.0125, buckets %v", hist, wantBuckets)
	}
	if fams[0].Help != "Self." {
		t.Errorf("help %q, want %q", fams[0].Help, "Self.")
	}
}

// recode turns prom2json's []interface{} metrics into v.
func recode(t *testing.T, metrics []interface{}, v any) {
	t.Helper()
	b, err := json.Marshal(metrics)
	if err == nil {
		err = json.Unmarshal(b, v)
	}
	if err != nil {
		t.Fatal(err)
	}
}

func equal(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestWriteBadFormat(t *testing.T) {
	src, reg := fixture(t)
	var out bytes.Buffer
	err := Write(&out, Format("xml"), src, reg)
	if err == nil || !strings.Contains(err.Error(), `--format "xml"`) || out.Len() != 0 {
		t.Errorf("Write(xml) = %v with %d bytes written, want an error naming the format and no output", err, out.Len())
	}
}

// failingWriter fails every write.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

func TestWriteFails(t *testing.T) {
	src, reg := fixture(t)
	for _, f := range []Format{FormatText, FormatJSON} {
		if err := Write(failingWriter{}, f, src, reg); err == nil || !strings.Contains(err.Error(), "broken pipe") {
			t.Errorf("Write(%s) to a failing writer = %v, want the write error", f, err)
		}
	}
}

// TestRunFailedConfig runs a dump of a config whose YAML is missing (no
// BPF needed): the exit code is 1, stderr names the config and the
// reason, and the output shows it down in kernel_exporter_config_up and
// kernel_exporter_config_error_info.
func TestRunFailedConfig(t *testing.T) {
	exp := exporter.New(exporter.Options{Sources: []exporter.Source{{Name: "missing", Dir: t.TempDir()}}})
	var stdout, stderr bytes.Buffer
	rc := Run(context.Background(), exp, Options{Duration: time.Millisecond, Format: FormatText, Stdout: &stdout, Stderr: &stderr})
	if rc != ExitFailed {
		t.Errorf("Run = %d, want %d", rc, ExitFailed)
	}
	if !strings.Contains(stderr.String(), "config missing (") || !strings.Contains(stderr.String(), "failed: ") {
		t.Errorf("stderr does not name the failed config and its reason:\n%s", &stderr)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(&stdout)
	if err != nil {
		t.Fatalf("output does not parse: %v", err)
	}
	if v := value(mfs["kernel_exporter_config_up"], "config", "missing"); v != 0 {
		t.Errorf("kernel_exporter_config_up{config=missing} = %v, want 0", v)
	}
	if v := value(mfs["kernel_exporter_config_error_info"], "config", "missing"); v != 1 {
		t.Errorf("kernel_exporter_config_error_info{config=missing} = %v, want 1", v)
	}
	for name := range mfs {
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") {
			t.Errorf("the dump holds the runtime metric %s", name)
		}
	}
}

// TestRunInterrupted checks that a done context ends a long wait and the
// dump is still printed.
func TestRunInterrupted(t *testing.T) {
	exp := exporter.New(exporter.Options{Sources: []exporter.Source{{Name: "missing", Dir: t.TempDir()}}})
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr bytes.Buffer
	done := make(chan int)
	go func() {
		done <- Run(ctx, exp, Options{Duration: MaxDuration, Format: FormatJSON, Stdout: &stdout, Stderr: &stderr})
	}()
	<-exp.Loaded()
	cancel()
	if rc := <-done; rc != ExitFailed {
		t.Errorf("Run = %d, want %d (the config failed)", rc, ExitFailed)
	}
	var fams []*prom2json.Family
	if err := json.Unmarshal(stdout.Bytes(), &fams); err != nil || len(fams) == 0 {
		t.Errorf("interrupted dump: %d families, %v\n%s", len(fams), err, &stdout)
	}
}

// value returns the value of the series of mf with label k=v (-1: none).
func value(mf *dto.MetricFamily, k, v string) float64 {
	for _, m := range mf.GetMetric() {
		for _, lp := range m.GetLabel() {
			if lp.GetName() == k && lp.GetValue() == v {
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}

// SPDX-License-Identifier: Apache-2.0

package config

import (
	"strings"
	"testing"
)

// spanYAML is a tracing-only config in ebpf_exporter's format.
const spanYAML = `tracing:
  spans:
    - name: exec
      ringbuf: exec_spans
      service: exec-trace
      labels:
        - name: trace_id
          size: 16
          decoders:
            - name: hex
        - name: parent_span_id
          size: 8
          decoders:
            - name: hex
        - name: span_id
          size: 8
          decoders:
            - name: hex
        - name: span_monotonic_timestamp_ns
          size: 8
          decoders:
            - name: uint
        - name: span_duration_ns
          size: 8
          decoders:
            - name: uint
        - name: operation
          size: 4
          padding: 4
          decoders:
            - name: uint
            - name: static_map
              static_map:
                0: read
                1: write
`

// TestTracingGood checks that a config with only tracing loads, with its
// spans, and that tracing is no longer reported as ignored.
func TestTracingGood(t *testing.T) {
	c, err := Parse("exec.yaml", []byte(spanYAML))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Tracing.Spans) != 1 || c.Tracing.Spans[0].RingBuf != "exec_spans" || c.Tracing.Spans[0].Service != "exec-trace" ||
		len(c.Tracing.Spans[0].Labels) != 6 || c.Tracing.Spans[0].Labels[5].Decoders[1].StaticMap["1"] != "write" {
		t.Errorf("spans = %+v", c.Tracing.Spans)
	}
	if len(c.Ignored()) != 0 {
		t.Errorf("Ignored() = %v", c.Ignored())
	}
}

// TestTracingErrors checks the message for each kind of bad span.
func TestTracingErrors(t *testing.T) {
	for _, tc := range []struct {
		name, from, to, want string
	}{
		{"no ringbuf", "ringbuf: exec_spans", "ringbuf: ''", `exec.yaml:4: tracing.spans[0].ringbuf: missing ring buffer map name`},
		{"bad ringbuf", "ringbuf: exec_spans", "ringbuf: a-b", `exec.yaml:4: tracing.spans[0].ringbuf: invalid map name "a-b"`},
		{"trace id size", "size: 16", "size: 8", `exec.yaml:8: tracing.spans[0].labels[0].size: trace_id must be 16 bytes, got 8`},
		{"duration size", "name: span_duration_ns\n          size: 8", "name: span_duration_ns\n          size: 4", `tracing.spans[0].labels[4].size: span_duration_ns must be 8 bytes, got 4`},
		{"zero size", "size: 4\n", "size: 0\n", `tracing.spans[0].labels[5].size: must be 1 to 4096 bytes, got 0`},
		{"unknown key", "service: exec-trace", "servise: exec-trace", `unknown`},
		{"of", "padding: 4\n", "padding: 4\n          of: trace_id\n", `tracing.spans[0].labels[5]`},
		{"no labels", "      labels:\n        - name: trace_id", "      labels: []\n      x:\n        - name: trace_id", `unknown`},
		{"bad attribute", "name: operation", "name: cpu-orig", `exec.yaml:27: tracing.spans[0].labels[5].name: invalid span label name "cpu-orig"`},
		{"leading dot", "name: operation", "name: .cpu", `invalid span label name ".cpu"`},
	} {
		y := strings.Replace(spanYAML, tc.from, tc.to, 1)
		if y == spanYAML {
			t.Fatalf("%s: replacement not applied", tc.name)
		}
		_, err := Parse("exec.yaml", []byte(y))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
	two := spanYAML + strings.TrimPrefix(spanYAML, "tracing:\n  spans:\n")
	if _, err := Parse("exec.yaml", []byte(two)); err == nil || !strings.Contains(err.Error(), `tracing.spans[1].ringbuf: ring buffer "exec_spans" is already read by tracing.spans[0]`) {
		t.Errorf("duplicate ringbuf: err = %v", err)
	}
}

// TestTracingDottedLabel checks that a span label, an OpenTelemetry
// attribute, may hold dots (the reference's sched-trace example names one
// cpu.orig), while a metric label may not.
func TestTracingDottedLabel(t *testing.T) {
	y := strings.Replace(spanYAML, "name: operation", "name: cpu.orig", 1)
	c, err := Parse("sched.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Tracing.Spans[0].Labels[5].Name; got != "cpu.orig" {
		t.Errorf("label 5 = %q, want cpu.orig", got)
	}
	m := "metrics:\n  counters:\n    - name: x_total\n      help: x\n      labels:\n        - name: cpu.orig\n          size: 4\n          decoders:\n            - name: uint\n"
	if _, err := Parse("m.yaml", []byte(m)); err == nil || !strings.Contains(err.Error(), `m.yaml:6: metrics.counters[0].labels[0].name: invalid label name "cpu.orig"`) {
		t.Errorf("metric label cpu.orig: err = %v", err)
	}
}

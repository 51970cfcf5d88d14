// SPDX-License-Identifier: Apache-2.0

package config

import (
	"testing"
)

// TestValuesErrors checks the exact message of each bad gauge, values and
// per_cpu setting: file, line, field path, metric and value.
func TestValuesErrors(t *testing.T) {
	const label = "      labels:\n        - {name: k, size: 4, decoders: [{name: uint}]}\n"
	for _, tc := range []struct{ name, yaml, want string }{
		{"per_cpu value", "metrics:\n  gauges:\n    - name: g\n      help: h\n      per_cpu: each\n",
			`bad.yaml:5: metrics.gauges[0].per_cpu: metric "g": want sum or label, got "each"`},
		{"cpu label taken", "metrics:\n  counters:\n    - name: c_total\n      help: h\n      per_cpu: label\n      labels:\n        - {name: cpu, size: 4, decoders: [{name: uint}]}\n",
			`bad.yaml:7: metrics.counters[0].labels[0].name: metric "c_total": label "cpu" is taken by per_cpu: label`},
		{"cpu label ttl", "metrics:\n  histograms:\n    - name: h_seconds\n      help: h\n      per_cpu: label\n      ttl: 1m\n      bucket_type: exp2\n      bucket_max: 3\n      labels:\n        - {name: bucket, size: 4}\n",
			`bad.yaml:6: metrics.histograms[0].ttl: metric "h_seconds": ttl is not supported with per_cpu: label (a key's CPUs expire together; sum them instead)`},
		{"values ttl", "metrics:\n  counters:\n    - name: flows\n      help: h\n      ttl: 1m\n" + label + "      values:\n        - {field: bytes, name: b_total}\n",
			`bad.yaml:5: metrics.counters[0].ttl: metric "flows": ttl is not supported on a map with values (its fields would expire apart)`},
		{"missing field", "metrics:\n  counters:\n    - name: flows\n      help: h\n" + label + "      values:\n        - {name: b_total}\n",
			`bad.yaml:8: metrics.counters[0].values[0].field: metric "flows": missing field name`},
		{"bad field", "metrics:\n  counters:\n    - name: flows\n      help: h\n" + label + "      values:\n        - {field: a-b, name: b_total}\n",
			`bad.yaml:8: metrics.counters[0].values[0].field: metric "flows": invalid field name "a-b"`},
		{"field twice", "metrics:\n  counters:\n    - name: flows\n      help: h\n" + label + "      values:\n        - {field: a, name: a_total}\n        - {field: a, name: b_total}\n",
			`bad.yaml:9: metrics.counters[0].values[1].field: metric "flows": field "a" listed twice`},
		{"value name twice", "metrics:\n  counters:\n    - name: flows\n      help: h\n" + label + "      values:\n        - {field: a, name: a_total}\n  gauges:\n    - name: a_total\n      help: h\n",
			`bad.yaml:10: metrics.gauges[0].name: metric "a_total" already defined at metrics.counters[0].values[0]`},
		{"value name missing", "metrics:\n  gauges:\n    - name: g\n      help: h\n      values:\n        - {field: a}\n",
			`bad.yaml:6: metrics.gauges[0].values[0].name: missing metric name`},
		{"signed values", "metrics:\n  gauges:\n    - name: g\n      help: h\n      signed: true\n      values:\n        - {field: a, name: a}\n",
			`bad.yaml:5: metrics.gauges[0].signed: metric "g": with values, each field's signedness comes from BTF`},
		{"gauge no decoders", "metrics:\n  gauges:\n    - name: g\n      help: h\n      labels:\n        - {name: k, size: 4}\n",
			`bad.yaml:6: metrics.gauges[0].labels[0].decoders: label "k" has no decoders`},
		{"gauge unknown key", "metrics:\n  gauges:\n    - name: g\n      help: h\n      scale: 2\n",
			`bad.yaml:5: unknown key "scale" in gauge`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("bad.yaml", []byte(tc.yaml))
			if err == nil || err.Error() != tc.want {
				t.Fatalf("got  %v\nwant %s", err, tc.want)
			}
		})
	}
}

// TestValuesCount checks that each value counts as a metric.
func TestValuesCount(t *testing.T) {
	c, err := Parse("ok.yaml", []byte("metrics:\n  counters:\n    - name: flows\n      help: h\n      values:\n        - {field: a, name: a_total}\n        - {field: b, name: b_total}\n  gauges:\n    - name: g\n      help: h\n      per_cpu: sum\n"))
	if err != nil {
		t.Fatal(err)
	}
	if n := c.Metrics.metricCount(); n != 3 {
		t.Fatalf("%d metrics, want 3", n)
	}
}

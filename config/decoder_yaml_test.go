// SPDX-License-Identifier: Apache-2.0

package config

import (
	"fmt"
	"strings"
	"testing"
)

// staticMapConfig is a config whose one label has a static_map of n
// entries, in flow style ({0: v0, 1: v1, ...}), the densest form.
func staticMapConfig(n int) []byte {
	var b strings.Builder
	b.WriteString("            - name: uint\n            - name: static_map\n              static_map: {")
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d: v%d", i, i)
	}
	b.WriteString("}\n")
	return []byte(counterWith(b.String()))
}

// BenchmarkStaticMapParse parses a config whose static_map has n entries;
// ns/entry must stay flat from 3,000 to 24,000 entries (linear), where the
// quadratic duplicate-key check of yaml.v3 made 8 times the entries cost
// about 60 times the time (finding 06 of the hardening issue).
func BenchmarkStaticMapParse(b *testing.B) {
	for _, n := range []int{3000, 24000} {
		data := staticMapConfig(n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				c, err := Parse("big.yaml", data)
				if err != nil {
					b.Fatal(err)
				}
				if got := len(c.Metrics.Counters[0].Labels[0].Decoders[1].StaticMap); got != n {
					b.Fatalf("%d entries, want %d", got, n)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/entry")
		})
	}
}

func TestStaticMapYAML(t *testing.T) {
	c, err := Parse("ok.yaml", []byte(strings.Replace(string(staticMapConfig(3)), "{0: v0, 1: v1, 2: v2}", "{0: v0, 1: &x v1, 2: *x, true: 1.5, \"s\": ~}", 1)))
	if err != nil {
		t.Fatal(err)
	}
	got := c.Metrics.Counters[0].Labels[0].Decoders[1].StaticMap
	want := map[string]string{"0": "v0", "1": "v1", "2": "v1", "true": "1.5", "s": ""}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("static_map = %v, want %v", got, want)
	}
	base := string(staticMapConfig(2))
	for _, tc := range []struct{ name, from, to, want string }{
		{"duplicate", "{0: v0, 1: v1}", "{0: v0, 1: v1, 0: v2}", `bad.yaml:11: a key given twice: first at line 11`},
		{"merge", "{0: v0, 1: v1}", "{0: v0, <<: {1: v1}}", `bad.yaml:11: merge keys (<<) are not supported in static_map`},
		{"nested", "{0: v0, 1: v1}", "{0: v0, 1: {a: b}}", `bad.yaml:11: wrong type: got a mapping, want a string`},
		{"unknown key", "              static_map:", "              static_mapp:", `bad.yaml:11: unknown key "static_mapp" in decoder (did you mean "static_map"?)`},
		{"mapping name", "- name: static_map", "- name: {a: b}", `bad.yaml:10: wrong type: got a mapping, want a string`},
		{"duplicate setting", "- name: static_map", "- name: static_map\n              name: x", `bad.yaml:11: a key given twice: first at line 10`},
		{"not a mapping", "{0: v0, 1: v1}", "[a]", "bad.yaml:11: wrong type: got a list, want a mapping"},
	} {
		_, err := Parse("bad.yaml", []byte(strings.Replace(base, tc.from, tc.to, 1)))
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

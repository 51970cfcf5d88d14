package config

import (
	"fmt"
	"strings"
	"testing"
	"time"
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

// parseTime is the least time of a few parses of data.
func parseTime(t *testing.T, data []byte) time.Duration {
	best := time.Duration(1<<63 - 1)
	for range 3 {
		start := time.Now()
		c, err := Parse("big.yaml", data)
		d := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(c.Metrics.Counters[0].Labels[0].Decoders[1].StaticMap); got == 0 {
			t.Fatal("empty static_map")
		}
		best = min(best, d)
	}
	return best
}

// TestHardening06StaticMapLinear checks that parsing a static_map costs time
// linear in its entries: 8 times the entries may cost at most 20 times the
// time (the quadratic duplicate-key check of yaml.v3 made it about 60
// times at these sizes).
func TestHardening06StaticMapLinear(t *testing.T) {
	const n = 3000
	small, large := parseTime(t, staticMapConfig(n)), parseTime(t, staticMapConfig(8*n))
	ratio := float64(large) / float64(small)
	t.Logf("%d entries: %v, %d entries: %v, ratio %.1f", n, small, 8*n, large, ratio)
	if ratio > 20 {
		t.Errorf("8x the entries took %.1fx the time: not linear", ratio)
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
		{"unknown key", "              static_map:", "              static_mapp:", `bad.yaml:11: unknown key "static_mapp" in decoder`},
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

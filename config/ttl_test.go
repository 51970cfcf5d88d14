// SPDX-License-Identifier: Apache-2.0

package config

import (
	"strings"
	"testing"
	"time"
)

// withTTL is goodCounter with ttl: <v> after its help.
func withTTL(v string) string {
	return strings.Replace(goodCounter, "      help: Timers started\n", "      help: Timers started\n      ttl: "+v+"\n", 1)
}

func TestTTLParse(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want time.Duration
	}{{"1s", time.Second}, {"5m", 5 * time.Minute}, {"1h30m", 90 * time.Minute}, {"720h", MaxTTL}, {`""`, 0}} {
		c, err := Parse("t.yaml", []byte(withTTL(tc.v)))
		if err != nil {
			t.Fatalf("%s: %v", tc.v, err)
		}
		d, err := c.ParseTTL("metrics.counters[0]", "x", c.Metrics.Counters[0].TTL)
		if err != nil || d != tc.want {
			t.Errorf("ttl %s = %v, %v; want %v", tc.v, d, err, tc.want)
		}
	}
	// Without the key: 0, as before ttl existed.
	c, err := Parse("t.yaml", []byte(goodCounter))
	if err != nil {
		t.Fatal(err)
	}
	if c.Metrics.Counters[0].TTL != "" {
		t.Errorf("ttl without the key = %q", c.Metrics.Counters[0].TTL)
	}
}

// TestTTLErrors checks that a bad ttl names the file, line, field, metric
// and value, and that values are shown only as Quote allows.
func TestTTLErrors(t *testing.T) {
	hist := strings.Replace(histogram("exp2", "bucket"), "      bucket_min: 0\n", "      ttl: 0s\n      bucket_min: 0\n", 1)
	for _, tc := range []struct{ name, yaml, want string }{
		{"no unit", withTTL("5"),
			`bad.yaml:5: metrics.counters[0].ttl: metric "timer_starts_total": want a duration such as "5m" or "1h" (units ms, s, m, h), got "5"`},
		{"days", withTTL("1d"),
			`bad.yaml:5: metrics.counters[0].ttl: metric "timer_starts_total": want a duration such as "5m" or "1h" (units ms, s, m, h), got "1d"`},
		{"too short", withTTL("999ms"),
			`bad.yaml:5: metrics.counters[0].ttl: metric "timer_starts_total": must be 1s to 720h0m0s (30 days), got "999ms"`},
		{"too long", withTTL("721h"),
			`bad.yaml:5: metrics.counters[0].ttl: metric "timer_starts_total": must be 1s to 720h0m0s (30 days), got "721h"`},
		{"negative", withTTL("-5m"),
			`bad.yaml:5: metrics.counters[0].ttl: metric "timer_starts_total": must be 1s to 720h0m0s (30 days), got "-5m"`},
		{"long value", withTTL("'" + strings.Repeat("9", 40) + "h'"),
			`bad.yaml:5: metrics.counters[0].ttl: metric "timer_starts_total": want a duration such as "5m" or "1h" (units ms, s, m, h), got (a string of 41 bytes)`},
		{"list", withTTL("[5m]"),
			`bad.yaml:5: wrong type: got a list, want a string`},
		{"histogram zero", hist,
			`bad.yaml:6: metrics.histograms[0].ttl: metric "lat_seconds": must be 1s to 720h0m0s (30 days), got "0s"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("bad.yaml", []byte(tc.yaml))
			if err == nil || err.Error() != tc.want {
				t.Errorf("error\n got: %v\nwant: %s", err, tc.want)
			}
		})
	}
}

// SPDX-License-Identifier: Apache-2.0

package config

import (
	"strings"
	"testing"
)

// TestAuditSection checks a good audit section and the exact error of
// each kind of bad one: file, line, field and value.
func TestAuditSection(t *testing.T) {
	good := goodCounter + "audit:\n  - metric: timer_starts_total\n    source: context_switches\n    labels: {function: schedule}\n"
	c, err := Parse("timers.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if want := (Audit{Metric: "timer_starts_total", Source: "context_switches", Labels: map[string]string{"function": "schedule"}}); len(c.Audit) != 1 ||
		c.Audit[0].Metric != want.Metric || c.Audit[0].Source != want.Source || c.Audit[0].Labels["function"] != "schedule" {
		t.Errorf("audit = %+v, want [%+v]", c.Audit, want)
	}
	for _, tc := range []struct{ name, audit, want string }{
		{"unknown source", "  - {metric: timer_starts_total, source: ctxt}\n",
			`bad.yaml:11: audit[0].source: unknown kernel counter "ctxt" (known: block_discards, `},
		{"missing source", "  - {metric: timer_starts_total}\n",
			`bad.yaml:11: audit[0].source: missing: name a kernel counter (block_discards, `},
		{"unknown metric", "  - {metric: timers_total, source: oom_kills}\n",
			`bad.yaml:11: audit[0].metric: "timers_total" is no counter or histogram of this config`},
		{"missing metric", "  - {source: oom_kills}\n",
			`bad.yaml:11: audit[0].metric: missing: name a counter or histogram of this config`},
		{"twice", "  - {metric: timer_starts_total, source: oom_kills}\n  - {metric: timer_starts_total, source: oom_kills}\n",
			`bad.yaml:12: audit[1].source: "oom_kills" already audited by audit[0]`},
		{"unknown label", "  - {metric: timer_starts_total, source: oom_kills, labels: {cpu: \"0\"}}\n",
			`bad.yaml:11: audit[0].labels: metric "timer_starts_total" has no label "cpu"`},
		{"unknown key", "  - {metric: timer_starts_total, source: oom_kills, match: x}\n",
			`bad.yaml:11: unknown key "match" in audit entry`},
		{"not a list", "  metric: timer_starts_total\n",
			`bad.yaml:11: wrong type: got a mapping, want a list`},
		{"label too long", "  - {metric: timer_starts_total, source: oom_kills, labels: {function: " + strings.Repeat("x", 129) + "}}\n",
			`bad.yaml:11: audit[0].labels.function: longer than 128 bytes (129)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("bad.yaml", []byte(goodCounter+"audit:\n"+tc.audit))
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error:\n got: %v\nwant prefix: %s", err, tc.want)
			}
		})
	}
	var many strings.Builder
	many.WriteString(goodCounter + "audit:\n")
	for range MaxAudits + 1 {
		many.WriteString("  - {metric: timer_starts_total, source: oom_kills}\n")
	}
	if _, err := Parse("bad.yaml", []byte(many.String())); err == nil || !strings.Contains(err.Error(), "audit: 33 entries, more than the limit of 32") {
		t.Errorf("33 entries: %v", err)
	}
}

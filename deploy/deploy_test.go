// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/kernel-exporter/kernel_exporter/internal/testenv"
)

// promtool is Debian's (package prometheus, 2.42).
const promtool = "/usr/bin/promtool"

func runPromtool(t *testing.T, args ...string) string {
	t.Helper()
	if _, err := os.Stat(promtool); err != nil {
		testenv.SkipOrFail(t, "%s missing (install the prometheus package): %v", promtool, err)
	}
	cmd := exec.Command(promtool, args...)
	cmd.Dir = "prometheus"
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestPromtoolCheckRules runs promtool check rules on both rule files.
func TestPromtoolCheckRules(t *testing.T) {
	out := runPromtool(t, "check", "rules", "recording.yml", "alerts.yml")
	for _, want := range []string{"SUCCESS: 11 rules found", "SUCCESS: 16 rules found"} {
		if !strings.Contains(out, want) {
			t.Errorf("promtool check rules: no %q in\n%s", want, out)
		}
	}
	t.Logf("%s", out)
}

// TestPromtoolTestRules runs the unit tests of tests.yml, and checks that
// every alert has a case where it fires and one where it does not.
func TestPromtoolTestRules(t *testing.T) {
	out := runPromtool(t, "test", "rules", "tests.yml")
	if !strings.Contains(out, "SUCCESS") {
		t.Errorf("promtool test rules: no SUCCESS in\n%s", out)
	}
	b, err := os.ReadFile("prometheus/tests.yml")
	if err != nil {
		t.Fatal(err)
	}
	rules, err := RuleExprs()
	if err != nil {
		t.Fatal(err)
	}
	// Cases are "- alertname: X" followed by "exp_alerts: []" (negative) or
	// by "exp_alerts:" and a list (positive).
	pos, neg := map[string]int{}, map[string]int{}
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		name, ok := strings.CutPrefix(strings.TrimSpace(l), "- alertname: ")
		if !ok || i+2 >= len(lines) {
			continue
		}
		if strings.TrimSpace(lines[i+2]) == "exp_alerts: []" {
			neg[name]++
		} else {
			pos[name]++
		}
	}
	for _, r := range rules {
		name, ok := strings.CutPrefix(r.Source, "prometheus/alerts.yml: alert ")
		if !ok {
			continue
		}
		if pos[name] == 0 || neg[name] == 0 {
			t.Errorf("alert %s: %d firing and %d silent cases in tests.yml, want at least one of each", name, pos[name], neg[name])
		}
	}
}

// TestExprsUseExportedMetrics checks that the dashboard, the rules and the
// PromQL blocks of the docs parse, and that every metric they name is
// exported by a bundled program, is a self-metric, or is recorded by
// recording.yml.
func TestExprsUseExportedMetrics(t *testing.T) {
	dash, err := DashboardExprs()
	if err != nil {
		t.Fatal(err)
	}
	rules, err := RuleExprs()
	if err != nil {
		t.Fatal(err)
	}
	if len(dash) < 20 || len(rules) != 27 {
		t.Errorf("%d dashboard and %d rule expressions, want at least 20 and 27", len(dash), len(rules))
	}
	progs, err := ProgramMetrics()
	if err != nil {
		t.Fatal(err)
	}
	recorded := map[string]bool{}
	for _, r := range rules {
		if name, ok := strings.CutPrefix(r.Source, "prometheus/recording.yml: record "); ok {
			recorded[name] = true
		}
	}
	docs, err := DocExprs("..")
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) < 30 {
		t.Fatalf("%d expressions in the docs, want at least 30", len(docs))
	}
	for _, e := range slices.Concat(dash, rules, docs) {
		ms := Metrics(e.Query)
		if len(ms) == 0 {
			t.Errorf("%s: no metric in %q", e.Source, e.Query)
		}
		for _, m := range ms {
			if e.Native && progs[m+"_bucket"] != "" {
				continue // a native histogram's series is named without _bucket
			}
			if progs[m] == "" && !slices.Contains(SelfMetrics, m) && !recorded[m] {
				t.Errorf("%s: metric %s is not exported by a bundled program, a self-metric or a recording rule", e.Source, m)
			}
		}
	}
}

func TestLeftSide(t *testing.T) {
	for q, want := range map[string]string{
		`rate(x[5m]) > 1`:                                     `rate(x[5m])`,
		`a{l=">"} >= 0.9`:                                     `a{l=">"}`,
		`up == 0 and on (instance) loading == 0`:              `up`,
		`sum by (a) (increase(c[15m])) > 0 or sum(c)`:         `sum by (a) (increase(c[15m]))`,
		`sum(rate(x[5m]) - ignoring(le) rate(y[5m]))`:         `sum(rate(x[5m]) - ignoring(le) rate(y[5m]))`,
		`x:order_rate > 5 * (x:order_rate offset 1d)`:         `x:order_rate`,
		`histogram_quantile(0.99, sum by (le) (rate(b[5m])))`: `histogram_quantile(0.99, sum by (le) (rate(b[5m])))`,
	} {
		if got := LeftSide(q); got != want {
			t.Errorf("LeftSide(%q) = %q, want %q", q, got, want)
		}
	}
}

func TestMetrics(t *testing.T) {
	got := Metrics(`sum by (instance) (rate(kernel_a_total{reason="kernel_fake"}[5m])) / ignoring(le) x:kernel_b:rate5m`)
	want := []string{"kernel_a_total", "x:kernel_b:rate5m"}
	if !slices.Equal(got, want) {
		t.Errorf("Metrics = %v, want %v", got, want)
	}
}

func TestPromqlBlocks(t *testing.T) {
	md := "text\n```promql\n# native\nhistogram_count(rate(a[5m]))\n# classic\nrate(b[5m])\n  / rate(c[5m]) > 1\nd\n\ne\n```\n```sh\nnot promql\n```\n"
	got, err := promqlBlocks("x.md", []byte(md))
	if err != nil {
		t.Fatal(err)
	}
	want := []Expr{
		{Source: "x.md:4", Query: "histogram_count(rate(a[5m]))", Data: "histogram_count(rate(a[5m]))", Native: true},
		{Source: "x.md:6", Query: "rate(b[5m])\n  / rate(c[5m]) > 1", Data: "rate(b[5m])\n  / rate(c[5m])"},
		{Source: "x.md:8", Query: "d", Data: "d"},
		{Source: "x.md:10", Query: "e", Data: "e"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v\nwant %#v", got, want)
	}
	for _, bad := range []string{"```promql\n  indented\n```\n", "```promql\na\n"} {
		if _, err := promqlBlocks("x.md", []byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

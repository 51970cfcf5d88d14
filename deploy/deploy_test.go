package deploy

import (
	"os"
	"os/exec"
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
	for _, want := range []string{"SUCCESS: 10 rules found", "SUCCESS: 12 rules found"} {
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

// TestExprsUseExportedMetrics checks that the dashboard and the rules parse
// and that every metric they name is exported by a bundled program, is a
// self-metric, or is recorded by recording.yml.
func TestExprsUseExportedMetrics(t *testing.T) {
	dash, err := DashboardExprs()
	if err != nil {
		t.Fatal(err)
	}
	rules, err := RuleExprs()
	if err != nil {
		t.Fatal(err)
	}
	if len(dash) < 20 || len(rules) != 22 {
		t.Errorf("%d dashboard and %d rule expressions, want at least 20 and 22", len(dash), len(rules))
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
	for _, e := range append(dash, rules...) {
		ms := Metrics(e.Query)
		if len(ms) == 0 {
			t.Errorf("%s: no metric in %q", e.Source, e.Query)
		}
		for _, m := range ms {
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

// SPDX-License-Identifier: Apache-2.0

// Package deploy holds the files an operator deploys next to
// kernel_exporter, embedded so that tests can read them:
//
//	grafana/kernel_exporter.json   Grafana dashboard (JSON model)
//	prometheus/recording.yml       Prometheus recording rules
//	prometheus/alerts.yml          Prometheus alerting rules
//	prometheus/tests.yml           promtool unit tests of both
//
// It parses them into the PromQL expressions they hold (Exprs), so that a
// test can evaluate each one against a real Prometheus. Nothing in the
// exporter imports it.
package deploy

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

//go:embed grafana/kernel_exporter.json prometheus/recording.yml prometheus/alerts.yml
var files embed.FS

// Dashboard is the path, in this package, of the Grafana dashboard.
const Dashboard = "grafana/kernel_exporter.json"

// RuleFiles are the paths, in this package, of the Prometheus rule files.
var RuleFiles = []string{"prometheus/recording.yml", "prometheus/alerts.yml"}

// Expr is one PromQL expression of a deployed file.
type Expr struct {
	// Source names where it is: "<file>: panel <title>" or
	// "<file>: record|alert <name>".
	Source string
	// Query is the expression as written (dashboard variables unreplaced).
	Query string
	// Data is the part of Query that must return data when its metrics
	// exist: for an alert, the left side of its first top-level comparison
	// (an alert's threshold is normally not met); else Query.
	Data string
	// Native says the expression reads native histograms, which only a
	// Prometheus with --enable-feature=native-histograms stores.
	Native bool
}

// dashboard is the part of the Grafana JSON model the checks read.
type dashboard struct {
	Title  string  `json:"title"`
	UID    string  `json:"uid"`
	Panels []panel `json:"panels"`
	Inputs []struct {
		Name     string `json:"name"`
		Type     string `json:"type"`
		PluginID string `json:"pluginId"`
	} `json:"__inputs"`
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		Expr   string `json:"expr"`
		Format string `json:"format"`
		RefID  string `json:"refId"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

// DashboardExprs parses the dashboard and returns the expression of every
// panel target. It fails when the dashboard has no DS_PROMETHEUS input, or
// a panel other than a row has no targets, a target with no expr, a
// datasource other than ${DS_PROMETHEUS}, or a heatmap whose target is not
// format "heatmap" over a _bucket series.
func DashboardExprs() ([]Expr, error) {
	b, err := files.ReadFile(Dashboard)
	if err != nil {
		return nil, err
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", Dashboard, err)
	}
	if d.Title == "" || d.UID == "" {
		return nil, fmt.Errorf("%s: title or uid empty", Dashboard)
	}
	if len(d.Inputs) != 1 || d.Inputs[0].Name != "DS_PROMETHEUS" || d.Inputs[0].PluginID != "prometheus" {
		return nil, fmt.Errorf("%s: __inputs: want one prometheus datasource input DS_PROMETHEUS", Dashboard)
	}
	var out []Expr
	ids := map[int]bool{}
	var walk func(ps []panel) error
	walk = func(ps []panel) error {
		for _, p := range ps {
			if ids[p.ID] {
				return fmt.Errorf("%s: panel %q: id %d used twice", Dashboard, p.Title, p.ID)
			}
			ids[p.ID] = true
			if p.Type == "row" {
				if err := walk(p.Panels); err != nil {
					return err
				}
				continue
			}
			if p.Datasource == nil || p.Datasource.UID != "${DS_PROMETHEUS}" {
				return fmt.Errorf("%s: panel %q: datasource: want uid ${DS_PROMETHEUS}", Dashboard, p.Title)
			}
			if len(p.Targets) == 0 {
				return fmt.Errorf("%s: panel %q: no targets", Dashboard, p.Title)
			}
			for _, t := range p.Targets {
				if strings.TrimSpace(t.Expr) == "" {
					return fmt.Errorf("%s: panel %q: target %q: empty expr", Dashboard, p.Title, t.RefID)
				}
				if p.Type == "heatmap" && (t.Format != "heatmap" || !strings.Contains(t.Expr, "_bucket")) {
					return fmt.Errorf("%s: panel %q: heatmap target must be format heatmap over a _bucket series", Dashboard, p.Title)
				}
				out = append(out, Expr{Source: Dashboard + ": panel " + p.Title, Query: t.Expr, Data: t.Expr})
			}
		}
		return nil
	}
	if err := walk(d.Panels); err != nil {
		return nil, err
	}
	return out, nil
}

// ruleFile is a Prometheus rule file, decoded strictly.
type ruleFile struct {
	Groups []struct {
		Name     string `yaml:"name"`
		Interval string `yaml:"interval"`
		Rules    []struct {
			Record      string            `yaml:"record"`
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// RuleExprs parses the rule files and returns every rule's expression. It
// fails on an unknown field, and on an alert without a severity label or
// without summary and description annotations.
func RuleExprs() ([]Expr, error) {
	var out []Expr
	for _, name := range RuleFiles {
		b, err := files.ReadFile(name)
		if err != nil {
			return nil, err
		}
		var f ruleFile
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(true)
		if err := dec.Decode(&f); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		for _, g := range f.Groups {
			for _, r := range g.Rules {
				q := strings.TrimSpace(r.Expr)
				if r.Record != "" {
					out = append(out, Expr{Source: name + ": record " + r.Record, Query: q, Data: q})
					continue
				}
				switch {
				case r.Labels["severity"] == "":
					return nil, fmt.Errorf("%s: alert %s: no severity label", name, r.Alert)
				case r.Annotations["summary"] == "" || r.Annotations["description"] == "":
					return nil, fmt.Errorf("%s: alert %s: summary or description annotation missing", name, r.Alert)
				}
				out = append(out, Expr{Source: name + ": alert " + r.Alert, Query: q, Data: LeftSide(q)})
			}
		}
	}
	return out, nil
}

// LeftSide returns q up to its first comparison operator (==, !=, >, <,
// >=, <=) or set operator (and, or, unless) outside parentheses, braces,
// brackets and strings, trimmed; q itself when it has none. For an alert
// such as `rate(x[5m]) > 1 and y` it gives `rate(x[5m])`.
func LeftSide(q string) string {
	depth, end := 0, len(q)
	scan(q, func(i int) bool {
		switch c := q[i]; {
		case c == '(' || c == '{' || c == '[':
			depth++
		case c == ')' || c == '}' || c == ']':
			depth--
		case depth > 0:
		case c == '>' || c == '<' || (c == '=' && i+1 < len(q) && q[i+1] == '=') || (c == '!' && i+1 < len(q) && q[i+1] == '='),
			isWordAt(q, i, "and") || isWordAt(q, i, "or") || isWordAt(q, i, "unless"):
			end = i
			return false
		}
		return true
	})
	return strings.TrimSpace(q[:end])
}

// scan calls fn with the index of every byte of the PromQL text q outside
// its string literals ("...", '...', `...`, quotes and all), in order,
// until fn returns false.
func scan(q string, fn func(i int) bool) {
	var quote byte
	for i := 0; i < len(q); i++ {
		switch c := q[i]; {
		case quote != 0:
			if c == '\\' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'' || c == '`':
			quote = c
		default:
			if !fn(i) {
				return
			}
		}
	}
}

// isWordAt reports whether the keyword w starts at q[i] as a whole word.
func isWordAt(q string, i int, w string) bool {
	if !strings.HasPrefix(q[i:], w) {
		return false
	}
	word := func(c byte) bool {
		return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
	}
	if i > 0 && word(q[i-1]) {
		return false
	}
	j := i + len(w)
	return j == len(q) || !word(q[j])
}

// Substitute replaces the Grafana variables the dashboard uses with values
// Prometheus accepts: $__rate_interval and $__interval by interval (such as
// "1m"), $instance by ".*".
func Substitute(q, interval string) string {
	return strings.NewReplacer(
		"$__rate_interval", interval,
		"${__rate_interval}", interval,
		"$__interval", interval,
		"${__interval}", interval,
		"$instance", ".*",
		"${instance}", ".*",
	).Replace(q)
}

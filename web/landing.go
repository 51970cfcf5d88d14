// Package web serves the exporter's landing page: every config, its state,
// the alternative chosen for each alternatives group (and why earlier ones
// were passed over), and the reason when it is down.
package web

import (
	"html/template"
	"net/http"
	"strings"

	"github.com/kernel-exporter/kernel_exporter/collector"
)

// Landing returns the handler of "/": a page listing every config, with its
// state (up, loading or down) and, when down, its reason, shown once and
// escaped. Texts are made valid UTF-8 first.
func Landing(status *collector.Status, metricsPath, version string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		type row struct {
			collector.State
			Limits string
			Full   string // maps at 90% of max_entries or more
		}
		var rows []row
		for _, st := range status.States() {
			st.Name = collector.LabelValue(st.Name)
			st.Source = collector.LabelValue(st.Source)
			st.Reason = collector.LabelValue(st.Reason)
			alts := make([]collector.AlternativeState, len(st.Alternatives))
			for i, a := range st.Alternatives {
				a.Passed = append([]string(nil), a.Passed...)
				for j := range a.Passed {
					a.Passed[j] = collector.LabelValue(a.Passed[j])
				}
				alts[i] = a
			}
			st.Alternatives = alts
			rw := row{State: st}
			if st.Collector != nil {
				rw.Limits = strings.Join(st.Collector.LimitHits(), ", ")
				rw.Full = strings.Join(st.Collector.FullMaps(), ", ")
			}
			rows = append(rows, rw)
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = page.Execute(w, map[string]any{"Rows": rows, "Metrics": metricsPath, "Version": version, "Overflow": collector.OverflowValue})
	})
}

var page = template.Must(template.New("landing").Parse(`<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>kernel_exporter</title>
<style>
body{font-family:sans-serif;margin:2em} table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}
.up{color:#080}.down{color:#b00}.loading{color:#a60} pre{margin:0;white-space:pre-wrap}
</style></head><body>
<h1>kernel_exporter</h1>
<p>eBPF programs in the kernel, their maps served as Prometheus metrics. Version {{.Version}}.</p>
<p><a href="{{.Metrics}}">Metrics</a></p>
<h2>Configs</h2>
<table><tr><th>config</th><th>source</th><th>state</th><th>programs</th><th>alternatives</th><th>reason</th></tr>
{{range .Rows}}<tr>
<td>{{.Name}}</td><td>{{.Source}}</td>
<td>{{if .Up}}<span class="up">up</span>{{else if .Loading}}<span class="loading">loading</span>{{else}}<span class="down">down{{if .OverBudget}}: over its {{.OverBudget}} budget{{end}}</span>{{end}}</td>
<td>{{range .Programs}}{{.Name}} ({{.Section}}{{if .Alternative}}, alternative {{.Alternative}}{{end}}): {{if .Attached}}attached{{else}}not attached{{end}}<br>{{end}}</td>
<td>{{range .Alternatives}}<b>{{.Name}}</b>: {{if .Chosen}}chose {{.Chosen}}{{else}}none works{{end}}{{range .Passed}}<br>passed over <pre>{{.}}</pre>{{end}}<br>{{end}}</td>
<td>{{if .Up}}{{if .Limits}}<span class="loading">over its series limit</span> (the excess is summed into one series whose labels are all {{$.Overflow}}): {{.Limits}}{{end}}{{if .Full}} <span class="loading">maps nearly full</span> (entries/max_entries): {{.Full}}{{end}}{{else if .Reason}}<pre>{{.Reason}}</pre>{{end}}</td>
</tr>{{end}}
</table>
</body></html>
`))

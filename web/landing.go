// SPDX-License-Identifier: Apache-2.0

// Package web serves the exporter over HTTP: metrics (exposition.Handler),
// pprof when enabled, and the landing page at "/".
//
// The landing page is read at a glance. It opens with a summary: configs
// up, down (of them over a budget) and loading; the series served and the
// time the maps' last reads took, both from the last read of each config
// that is up (collector.Config.LastRead, no new read); and the BPF run time
// per second of the CPU budget's last measuring window (Options.CPURates);
// beside it, the host's: every BPF program's time per second in that
// window, the memory of every map, and the five programs that used the
// most CPU, with their owner (Options.HostBPF, from package bpfstats).
// Then one compact row per config: state, programs attached, series, BPF
// ns per event (runTimes) and BPF time, a link to its heatmaps on the live
// page (/ui/#<config>), and notes: the marks (over its series limit, maps
// nearly full, over its budget, spans that go nowhere, programs that ran 0
// times in the CPU budget's last window: Options.IdlePrograms), where its
// spans go, its self-audit (each kernel counter's ratio of the last
// interval, marked outside [0.98, 1.02]: Options.Audit, package audit), the
// alternatives chosen, and the reason a config is down, folded and shown
// once. It is plain HTML and CSS
// (html/template: every text escaped, made valid UTF-8 first), no script.
package web

import (
	"bytes"
	_ "embed"
	"html/template"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kernel-exporter/kernel_exporter/bpfstats"
	"github.com/kernel-exporter/kernel_exporter/collector"
	"github.com/kernel-exporter/kernel_exporter/ui"
)

// CPURatesFunc returns the BPF run time of the CPU budget's last measuring
// window, by config, in CPU seconds per second summed over CPUs, with the
// window's length and end; rates is nil when nothing was measured yet (or
// the budget is off). (*budget.CPU).LastRates is one.
type CPURatesFunc func() (rates map[string]float64, window time.Duration, end time.Time)

// Landing returns the handler of "/": the page described in the package
// doc, for the configs of status. It uses opts.MetricsPath, opts.Version
// and opts.CPURates (nil: BPF time "not measured").
func Landing(status *collector.Status, opts Options) http.Handler {
	l := &landing{status: status, opts: opts, runs: newRunTimes(), now: time.Now}
	return l
}

type landing struct {
	status *collector.Status
	opts   Options
	runs   *runTimes
	now    func() time.Time
}

func (l *landing) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		http.NotFound(w, r)
		return
	}
	states := l.status.States()
	var rates map[string]float64
	var window time.Duration
	var end time.Time
	if l.opts.CPURates != nil {
		rates, window, end = l.opts.CPURates()
	}
	p := buildPage(states, l.runs.update(states), rates, window, end, l.now())
	if l.opts.IdlePrograms != nil && !end.IsZero() {
		markIdle(p.Rows, states, l.opts.IdlePrograms(), window, end, l.now())
	}
	if l.opts.Audit != nil {
		addAudit(p.Rows, states, l.opts.Audit())
	}
	p.Metrics, p.Version, p.UI = l.opts.MetricsPath, l.opts.Version, ui.Path
	if l.opts.HostBPF != nil {
		p.Host = hostBPF(l.opts.HostBPF(), l.now())
	}
	var b bytes.Buffer
	if err := pageTmpl.Execute(&b, p); err != nil {
		http.Error(w, "landing page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(b.Bytes())
}

// page is what the template shows.
type page struct {
	Metrics, Version, UI string
	Summary              summary
	Rows                 []row
	Overflow             string // the overflow series' label value
	// Host is the host's BPF programs and maps, nil when not shown.
	Host *host
}

// host is what the page shows of the host's BPF programs (bpfstats).
type host struct {
	// BPF is the time per second of every program in the last window
	// ("" before the first), BPFWhen the window.
	BPF, BPFWhen string
	// Memory of every map ("" before the first listing), and the counts.
	Memory         string
	Programs, Maps int
	Top            []hostProgram
}

// hostProgram is one of the programs that used the most CPU.
type hostProgram struct {
	ID, Name, Type, Owner, Config, CPU, NsPerRun string
}

// hostBPF turns the host BPF collector's summary into what the page shows.
func hostBPF(s bpfstats.Summary, now time.Time) *host {
	h := &host{Programs: s.Programs, Maps: s.Maps}
	if s.Measured {
		h.BPF = perSecond(s.CPU)
		h.BPFWhen = "in a " + s.Window.Round(10*time.Millisecond).String() + " window " + ago(now.Sub(s.End))
	}
	if s.Listed {
		h.Memory = bytesText(s.MapBytes)
	}
	for _, t := range s.Top {
		hp := hostProgram{ID: strconv.FormatUint(uint64(t.ID), 10), Name: collector.LabelValue(t.Name), Type: t.Type,
			Owner: collector.LabelValue(t.Owner), Config: collector.LabelValue(t.Config), CPU: perSecond(t.CPU)}
		if t.NsPerRun > 0 {
			hp.NsPerRun = strconv.FormatFloat(t.NsPerRun, 'f', 0, 64)
		}
		h.Top = append(h.Top, hp)
	}
	return h
}

// bytesText formats a size in bytes, KiB, MiB or GiB.
func bytesText(n uint64) string {
	v, units := float64(n), []string{"bytes", "KiB", "MiB", "GiB"}
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if i == 0 {
		return strconv.FormatUint(n, 10) + " bytes"
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + " " + units[i]
}

// summary is the page's first lines.
type summary struct {
	Up, Down, Loading, OverBudget int
	// Series: summed over the configs up that were read; Unread: configs
	// up not read yet.
	Series, Unread int
	// ScrapeCost is the time the last reads took, summed over configs.
	ScrapeCost string
	// BPF is the BPF run time per second ("" when not measured), BPFWhen
	// the window it was measured in.
	BPF, BPFWhen string
}

// row is one config.
type row struct {
	Name, Source string
	Bundled      bool
	// Class is the CSS class of the state: up, down, loading, over.
	Class, State string
	// OverBudget is the resource ("cpu", "memory") whose budget took the
	// config down.
	OverBudget         string
	Attached, Programs int
	Series             string // "" when not read (or down)
	NsPerEvent         string // "" when not measured
	BPF                string // BPF time per second of the last window, "" when not measured
	UILink             string // "" when the config is not up
	Limits, Full       string // marks of configs up
	Alternatives       []alternative
	Reason, ReasonHint string
	// Spans says where the config's spans go ("" without spans);
	// SpansNowhere marks it when nothing chose a destination.
	Spans        string
	SpansNowhere bool
	// Idle lists the programs that ran 0 times in the last measuring
	// window, IdleWhen the window ("" when none or not measured).
	Idle, IdleWhen string
	// Audit is the config's audit, one entry per kernel counter; Audited
	// is whether the audit is on and the config has an audit section.
	Audit   []auditCell
	Audited bool
}

// markIdle notes, on the rows of the configs up (rows[i] is states[i]),
// the programs idle names that ran 0 times in the window of length window
// that ended at end.
func markIdle(rows []row, states []collector.State, idle map[string][]string, window time.Duration, end, now time.Time) {
	for i, st := range states {
		if i >= len(rows) || !st.Up || len(idle[st.Name]) == 0 {
			continue
		}
		rows[i].Idle = collector.LabelValue(strings.Join(idle[st.Name], ", "))
		rows[i].IdleWhen = "in the last " + window.Round(10*time.Millisecond).String() + " window, " + ago(now.Sub(end))
	}
}

// AuditState is one audited pair of a config as the landing page shows
// it (package audit's State): the kernel counter (source), the ratio of
// our events to the kernel's in the last interval when HasRatio, whether
// it is in the band the alert allows, and why the last interval was not
// compared ("" when it was), or why this kernel does not keep the
// counter (Unavailable, "" when it does: not marked, as it is no fault).
type AuditState struct {
	Source      string
	Ratio       float64
	HasRatio    bool
	InBand      bool
	Err         string
	Unavailable string
}

// auditCell is an AuditState as shown: Class "" in the band, "mark"
// outside it or on an error.
type auditCell struct {
	Source, Text, Class string
}

// addAudit sets the audit cells of rows (one per state, in order).
func addAudit(rows []row, states []collector.State, audits map[string][]AuditState) {
	for i, st := range states {
		as, ok := audits[st.Name]
		if !ok || i >= len(rows) {
			continue
		}
		rows[i].Audited = true
		var idle []string // sources without kernel events, shown once
		for _, a := range as {
			c := auditCell{Source: collector.LabelValue(a.Source)}
			switch {
			case a.Unavailable != "":
				c.Text = "not available on this kernel: " + collector.LabelValue(a.Unavailable)
			case a.Err != "":
				c.Text, c.Class = "not compared: "+collector.LabelValue(a.Err), "mark"
			case !a.HasRatio:
				idle = append(idle, c.Source)
				continue
			default:
				c.Text = strconv.FormatFloat(a.Ratio, 'f', 3, 64)
				if !a.InBand {
					c.Class = "mark"
				}
			}
			rows[i].Audit = append(rows[i].Audit, c)
		}
		if len(idle) > 0 {
			rows[i].Audit = append(rows[i].Audit, auditCell{Source: strings.Join(idle, ", "), Text: "no kernel events"})
		}
	}
}

// uiAudit turns the audit's states by config into the live page's (package
// ui), by config name then as given (by kernel counter).
func uiAudit(audits map[string][]AuditState) []ui.AuditData {
	out := []ui.AuditData{}
	for _, c := range slices.Sorted(maps.Keys(audits)) {
		for _, a := range audits[c] {
			d := ui.AuditData{Config: c, Source: a.Source}
			switch {
			case a.Unavailable != "":
				d.State, d.Reason = ui.AuditUnavailable, a.Unavailable
			case a.Err != "":
				d.State, d.Reason = ui.AuditError, a.Err
			case !a.HasRatio:
				d.State = ui.AuditNoEvents
			default:
				r := a.Ratio
				d.Ratio = &r
				d.State = ui.AuditOutOfBand
				if a.InBand {
					d.State = ui.AuditInBand
				}
			}
			out = append(out, d)
		}
	}
	return out
}

// alternative is an alternatives group, with only what the reason does
// not already say.
type alternative struct {
	Name, Chosen string
	Passed       []string
}

// buildPage builds the page of states; ns is the BPF ns/event by config,
// rates the CPU s/s by config of the window of length window that ended at
// end (nil: not measured).
func buildPage(states []collector.State, ns, rates map[string]float64, window time.Duration, end, now time.Time) page {
	p := page{Overflow: collector.OverflowValue}
	var cost time.Duration
	read := false
	for _, st := range states {
		rw := row{
			Name:       collector.LabelValue(st.Name),
			Source:     collector.LabelValue(st.Source),
			Bundled:    st.Source == "bundled",
			OverBudget: collector.LabelValue(st.OverBudget),
			Programs:   len(st.Programs),
		}
		for _, pr := range st.Programs {
			if pr.Attached {
				rw.Attached++
			}
		}
		switch {
		case st.Up:
			rw.Class, rw.State = "up", "up"
			p.Summary.Up++
			rw.UILink = ui.Path + "#" + url.PathEscape(rw.Name)
		case st.Loading:
			rw.Class, rw.State = "loading", "loading"
			p.Summary.Loading++
		case st.OverBudget != "":
			rw.Class, rw.State = "over", "over budget"
			p.Summary.Down++
			p.Summary.OverBudget++
		default:
			rw.Class, rw.State = "down", "down"
			p.Summary.Down++
		}
		if !st.Up && !st.Loading {
			rw.Reason = collector.LabelValue(st.Reason)
			rw.ReasonHint = reasonHint(rw.Reason)
		}
		if st.Up && st.Collector != nil {
			cs := readConfig(st.Collector)
			rw.Limits = collector.LabelValue(strings.Join(cs.limits, ", "))
			rw.Full = collector.LabelValue(strings.Join(cs.full, ", "))
			if n, took, ok := cs.series, cs.took, cs.read; ok {
				rw.Series = strconv.Itoa(n)
				p.Summary.Series += n
				cost += took
				read = true
			} else {
				p.Summary.Unread++
			}
		}
		if st.Up {
			if v, ok := ns[st.Name]; ok {
				rw.NsPerEvent = strconv.FormatFloat(v, 'f', 0, 64)
			}
			if v, ok := rates[st.Name]; ok {
				rw.BPF = perSecond(v)
			}
		}
		rw.Alternatives = alternatives(st.Alternatives, rw.Reason)
		rw.Spans, rw.SpansNowhere = collector.LabelValue(st.Spans), st.Spans != "" && !st.SpansSent
		p.Rows = append(p.Rows, rw)
	}
	if read {
		p.Summary.ScrapeCost = duration(cost)
	}
	if len(rates) > 0 && !end.IsZero() {
		sum := 0.0
		for _, v := range rates {
			sum += v
		}
		p.Summary.BPF = perSecond(sum)
		p.Summary.BPFWhen = "in a " + window.Round(10*time.Millisecond).String() + " window " + ago(now.Sub(end))
	}
	return p
}

// configStats is what the page shows of a config's collector.
type configStats struct {
	limits, full []string // LimitHits, FullMaps
	series       int      // LastRead
	took         time.Duration
	read         bool
}

// readConfig reads a collector's marks and last read; a variable for
// tests, which have no loaded config.
var readConfig = func(c *collector.Config) configStats {
	n, took, ok := c.LastRead()
	return configStats{limits: c.LimitHits(), full: c.FullMaps(), series: n, took: took, read: ok}
}

// alternatives returns the groups as shown: the choice in use, and the
// choices passed over that reason (the text of a config that is down,
// which names them when no choice works) does not already give.
func alternatives(groups []collector.AlternativeState, reason string) []alternative {
	var out []alternative
	for _, g := range groups {
		a := alternative{Name: collector.LabelValue(g.Name), Chosen: collector.LabelValue(g.Chosen)}
		for _, ps := range g.Passed {
			ps = collector.LabelValue(ps)
			if reason == "" || !strings.Contains(reason, ps) {
				a.Passed = append(a.Passed, ps)
			}
		}
		if a.Chosen != "" || len(a.Passed) > 0 {
			out = append(out, a)
		}
	}
	return out
}

// notSupported is how the loader says a kernel lacks a feature.
const notSupported = " not supported by this kernel"

// reasonHint returns a few words for a folded reason: the features it says
// the kernel lacks ("kprobes, fentry/fexit not supported"), else "".
func reasonHint(reason string) string {
	var feats []string
	for rest := reason; ; {
		i := strings.Index(rest, notSupported)
		if i < 0 {
			break
		}
		head := rest[:i]
		if j := strings.LastIndexAny(head, ":;("); j >= 0 {
			head = head[j+1:]
		}
		head = strings.TrimSpace(head)
		if head != "" && len(head) <= 40 && !contains(feats, head) && len(feats) < 4 {
			feats = append(feats, head)
		}
		rest = rest[i+len(notSupported):]
	}
	if len(feats) == 0 {
		return ""
	}
	return strings.Join(feats, ", ") + " not supported"
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// perSecond formats CPU seconds per second as milliseconds per second.
func perSecond(v float64) string {
	ms := v * 1000
	switch {
	case ms == 0:
		return "0 ms/s"
	case ms >= 100:
		return strconv.FormatFloat(ms, 'f', 0, 64) + " ms/s"
	case ms >= 1:
		return strconv.FormatFloat(ms, 'f', 1, 64) + " ms/s"
	}
	return strconv.FormatFloat(ms, 'f', 3, 64) + " ms/s"
}

// duration formats a read's duration in milliseconds.
func duration(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	if ms >= 100 {
		return strconv.FormatFloat(ms, 'f', 0, 64) + " ms"
	}
	return strconv.FormatFloat(ms, 'f', 2, 64) + " ms"
}

// ago formats how long ago something ended, to the second.
func ago(d time.Duration) string {
	if d < time.Second {
		return "just now"
	}
	return d.Round(time.Second).String() + " ago"
}

//go:embed landing.html
var pageText string

var pageTmpl = template.Must(template.New("landing").Parse(pageText))

// SPDX-License-Identifier: Apache-2.0

package web

import (
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/cilium/ebpf"

	"github.com/kernel-exporter/kernel_exporter/bpfstats"
	"github.com/kernel-exporter/kernel_exporter/collector"
)

// fakeConfigs replaces readConfig with stats by collector for the test.
func fakeConfigs(t *testing.T, stats map[*collector.Config]configStats) {
	t.Helper()
	old := readConfig
	readConfig = func(c *collector.Config) configStats { return stats[c] }
	t.Cleanup(func() { readConfig = old })
}

// landingPage serves "/" of status with opts and fake program statistics,
// at a fixed time, and returns the body.
func landingPage(t *testing.T, status *collector.Status, opts Options, progs map[*ebpf.Program]progReading) string {
	t.Helper()
	h := Landing(status, opts).(*landing)
	h.now = func() time.Time { return time.Unix(1000, 0) }
	h.runs.read = func(p *ebpf.Program) (time.Duration, uint64, error) {
		r, ok := progs[p]
		if !ok {
			return 0, 0, io.EOF
		}
		return r.runTime, r.runs, nil
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != 200 {
		t.Fatalf("GET /: %d\n%s", rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	return rec.Body.String()
}

// rowOf returns the table row of config name (escaped as on the page), as
// the integration tests' landingRow finds it.
func rowOf(page, name string) string {
	for _, r := range strings.Split(page, "<tr>") {
		if strings.HasPrefix(strings.TrimSpace(r), "<td>"+html.EscapeString(name)+"</td>") {
			return r
		}
	}
	return ""
}

// byID returns the text of the element with id on the page.
func byID(page, id string) string {
	m := regexp.MustCompile(`id="` + id + `">([^<]*)<`).FindStringSubmatch(page)
	if m == nil {
		return ""
	}
	return m[1]
}

const (
	fexitErr   = "tcp_fexit: load: fentry/fexit not supported by this kernel: program tcp_fexit: load program: operation not permitted"
	kprobeErr  = "tcp_kprobe: attach kprobe/tcp_v4_syn_recv_sock: kprobes not supported by this kernel"
	downReason = `programs/accept.bpf.o: alternatives "tcp": no choice works on this kernel; ` + fexitErr + "; " + kprobeErr
	evilReason = "config <script>alert(1)</script> & \"quotes\" \xff broken"
	cpuReason  = "over its CPU budget: 0.300 CPU s/s measured in a 1s window, budget 0.05 (--bpf.cpu-budget); re-attach in 5m0s"
	memReason  = "memory budget: needs 2 MiB, 1 MiB left"
)

// testStatus is a status with every kind of config: up (read, with marks;
// with an alternative chosen; not read yet), loading, down with its
// alternatives' errors in its reason, down with a hostile name and reason,
// over its CPU and its memory budget.
func testStatus(t *testing.T) (*collector.Status, map[*ebpf.Program]progReading) {
	t.Helper()
	read, alt, unread := &collector.Config{}, &collector.Config{}, &collector.Config{}
	fakeConfigs(t, map[*collector.Config]configStats{
		read:   {series: 10, took: 2 * time.Millisecond, read: true, limits: []string{"kernel_x_total (max_series 5)"}, full: []string{"fill_total (64/64)"}},
		alt:    {series: 3, took: 500 * time.Microsecond, read: true},
		unread: {},
	})
	p1, p2, p3 := new(ebpf.Program), new(ebpf.Program), new(ebpf.Program)
	progs := map[*ebpf.Program]progReading{
		p1: {runTime: 3000 * time.Nanosecond, runs: 10},
		p2: {runTime: 1000 * time.Nanosecond, runs: 10}, // biolatency: 4000 ns / 20 runs
		p3: {runTime: 900 * time.Nanosecond, runs: 3},
	}
	st := &collector.Status{}
	for _, s := range []*collector.State{
		{Name: "biolatency", Source: "bundled", Up: true, Collector: read, Programs: []collector.ProgramState{
			{Name: "issue", Section: "tp_btf/block_rq_issue", Attached: true, Prog: p1},
			{Name: "complete", Section: "tp_btf/block_rq_complete", Attached: true, Prog: p2}}},
		{Name: "fallback", Source: "/etc/kernel_exporter/fallback.yaml", Up: true, Collector: alt,
			Programs:     []collector.ProgramState{{Name: "fsync_tracepoint", Section: "tracepoint/syscalls/sys_enter_fsync", Attached: true, Prog: p3, Alternative: "fsync"}},
			Alternatives: []collector.AlternativeState{{Name: "fsync", Chosen: "fsync_tracepoint", Passed: []string{"fsync_fentry: load: fentry/fexit not supported by this kernel"}}}},
		{Name: "fresh", Source: "bundled", Up: true, Collector: unread, Programs: []collector.ProgramState{{Name: "a", Attached: true}}},
		{Name: "slow", Source: "bundled", Loading: true},
		{Name: "accept", Source: "bundled", Reason: downReason,
			Alternatives: []collector.AlternativeState{{Name: "tcp", Passed: []string{fexitErr, kprobeErr}}}},
		{Name: "ev<il>&\"x y#z", Source: "/tmp/<evil>.yaml", Reason: evilReason,
			Programs: []collector.ProgramState{{Name: "p", Section: "perf_event"}}},
		{Name: "spin", Source: "bundled", Reason: cpuReason, OverBudget: "cpu",
			Programs: []collector.ProgramState{{Name: "spin", Attached: false}}},
		{Name: "mem_hog", Source: "bundled", Reason: memReason, OverBudget: "memory"},
	} {
		st.Add(s)
	}
	return st, progs
}

// TestLandingSummary checks the summary's counts and figures.
func TestLandingSummary(t *testing.T) {
	st, progs := testStatus(t)
	rates := func() (map[string]float64, time.Duration, time.Time) {
		return map[string]float64{"biolatency": 0.002, "fallback": 0.0005}, time.Second, time.Unix(988, 0)
	}
	page := landingPage(t, st, Options{MetricsPath: "/metrics", CPURates: rates}, progs)
	for id, want := range map[string]string{"n-up": "3", "n-down": "4", "n-over": "2", "n-loading": "1"} {
		if got := byID(page, id); got != want {
			t.Errorf("summary %s = %q, want %q", id, got, want)
		}
	}
	for _, want := range []string{
		`<span class="big">13</span>`,                                   // series: 10 + 3
		"1 not read yet",                                                // fresh
		`<span class="big">2.50 ms</span>`,                              // scrape cost: 2 ms + 0.5 ms
		`<span class="big">2.5 ms/s</span>`,                             // BPF: 0.002 + 0.0005 CPU s/s
		"of CPU, in a 1s window 12s ago",                                // window ended at 988, now 1000
		`<a href="/metrics">Metrics</a>`,                                //
		`<a href="/ui/">Live heatmaps</a>`,                              //
		`<td class="n">2.0 ms/s</td>`,                                   // biolatency's own BPF time
		`<td class="n">200</td>`,                                        // biolatency: 4000 ns / 20 runs
		`<td class="n">300</td>`,                                        // fallback: 900 ns / 3 runs
		`<td class="n">2 of 2</td>`,                                     // biolatency's programs
		`<td class="n">10</td>`,                                         // biolatency's series
		`<span class="muted">/etc/kernel_exporter/fallback.yaml</span>`, // source when not bundled
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q:\n%s", want, page)
		}
	}
	if !utf8.ValidString(page) {
		t.Errorf("page is not valid UTF-8")
	}

	// Without the CPU budget, or before its first window: not measured.
	for _, f := range []CPURatesFunc{nil, func() (map[string]float64, time.Duration, time.Time) { return nil, 0, time.Time{} }} {
		page := landingPage(t, st, Options{MetricsPath: "/metrics", CPURates: f}, progs)
		if !strings.Contains(page, `<span class="big">not measured</span>`) || strings.Contains(page, "ms/s") {
			t.Errorf("BPF time without a window: not shown as not measured:\n%s", page)
		}
	}
}

// TestLandingRows checks one row per config, with its state, each reason
// exactly once and folded, the alternatives only where they add something,
// escaped links to the heatmaps, and the marks.
func TestLandingRows(t *testing.T) {
	st, progs := testStatus(t)
	page := landingPage(t, st, Options{MetricsPath: "/metrics"}, progs)
	states := st.States()
	if n := strings.Count(page, "<tr>") - 1; n != len(states) {
		t.Errorf("%d rows, want one per config (%d)", n, len(states))
	}
	for _, s := range states {
		if rowOf(page, collector.LabelValue(s.Name)) == "" {
			t.Errorf("no row for config %q:\n%s", s.Name, page)
		}
	}
	for name, want := range map[string]string{
		"biolatency":     `class="up">up<`,
		"slow":           `class="loading">loading<`,
		"accept":         `class="down">down<`,
		"ev<il>&\"x y#z": `class="down">down<`,
		"spin":           `class="over">over budget<`,
		"mem_hog":        `class="over">over budget<`,
	} {
		if r := rowOf(page, name); !strings.Contains(r, want) {
			t.Errorf("row of %s lacks %q: %s", name, want, r)
		}
	}

	// Each reason once, folded; the alternatives' errors it contains not
	// repeated.
	for _, reason := range []string{downReason, collector.LabelValue(evilReason), cpuReason, memReason} {
		if n := strings.Count(page, html.EscapeString(reason)); n != 1 {
			t.Errorf("reason %q shown %d times, want once", reason, n)
		}
	}
	for _, e := range []string{fexitErr, kprobeErr} {
		if n := strings.Count(page, html.EscapeString(e)); n != 1 {
			t.Errorf("alternative error %q shown %d times, want once (in the reason)", e, n)
		}
	}
	if r := rowOf(page, "accept"); !strings.Contains(r, "<details><summary>fentry/fexit, kprobes not supported</summary><pre>"+html.EscapeString(downReason)+"</pre></details>") {
		t.Errorf("reason of accept not folded under its hint: %s", r)
	}
	if r := rowOf(page, "accept"); strings.Contains(r, "none works") {
		t.Errorf("row of accept repeats that no choice works: %s", r)
	}
	for name, res := range map[string]string{"spin": "cpu", "mem_hog": "memory"} {
		if r := rowOf(page, name); !strings.Contains(r, "<summary>over its "+res+" budget</summary>") {
			t.Errorf("row of %s does not mark it over its %s budget: %s", name, res, r)
		}
	}
	// An up config shows the alternative chosen, and what was passed over.
	if r := rowOf(page, "fallback"); !strings.Contains(r, "fsync: chose fsync_tracepoint") || !strings.Contains(r, "passed over 1") ||
		!strings.Contains(r, "fsync_fentry: load: fentry/fexit not supported by this kernel") {
		t.Errorf("row of fallback lacks its alternative: %s", r)
	}
	// Marks of configs up.
	r := rowOf(page, "biolatency")
	for _, want := range []string{"over its series limit", "kernel_x_total (max_series 5)", "maps nearly full", "fill_total (64/64)", collector.OverflowValue} {
		if !strings.Contains(r, want) {
			t.Errorf("row of biolatency lacks the mark %q: %s", want, r)
		}
	}
	if r := rowOf(page, "fallback"); strings.Contains(r, "over its") || strings.Contains(r, "nearly full") {
		t.Errorf("row of fallback marked: %s", r)
	}

	// Links: configs up link to their heatmaps, escaped; others do not.
	if r := rowOf(page, "biolatency"); !strings.Contains(r, `<a href="/ui/#biolatency">heatmaps</a>`) {
		t.Errorf("row of biolatency does not link its heatmaps: %s", r)
	}
	if strings.Count(page, ">heatmaps</a>") != 3 {
		t.Errorf("%d heatmap links, want 3 (configs up)", strings.Count(page, ">heatmaps</a>"))
	}
	// Hostile texts are escaped everywhere.
	for _, bad := range []string{"<script>", "<il>", "<evil>", `"x y`} {
		if strings.Contains(page, bad) {
			t.Errorf("page contains %q unescaped", bad)
		}
	}
}

// TestLandingSpans checks that a config whose spans have no destination
// is marked, one whose spans go somewhere says where, and one without
// spans says nothing of them.
func TestLandingSpans(t *testing.T) {
	fakeConfigs(t, map[*collector.Config]configStats{})
	st := &collector.Status{}
	nowhere := "nowhere set: neither OTEL_EXPORTER_OTLP_TRACES_ENDPOINT nor OTEL_EXPORTER_OTLP_ENDPOINT is set, so the OTLP default, localhost:4318, is tried"
	st.Add(&collector.State{Name: "lost", Source: "bundled", Up: true, Collector: &collector.Config{}, Spans: nowhere})
	st.Add(&collector.State{Name: "sent", Source: "bundled", Up: true, Collector: &collector.Config{}, Spans: "OTLP grpc to http://c:4317 (OTEL_EXPORTER_OTLP_ENDPOINT)", SpansSent: true})
	st.Add(&collector.State{Name: "metrics", Source: "bundled", Up: true, Collector: &collector.Config{}})
	page := landingPage(t, st, Options{MetricsPath: "/metrics"}, nil)
	if r := rowOf(page, "lost"); !strings.Contains(r, `<span class="mark">spans go nowhere</span>: `+nowhere) {
		t.Errorf("row of lost does not mark its spans going nowhere: %s", r)
	}
	if r := rowOf(page, "sent"); !strings.Contains(r, "spans: OTLP grpc to http://c:4317 (OTEL_EXPORTER_OTLP_ENDPOINT)") || strings.Contains(r, "nowhere") {
		t.Errorf("row of sent does not say where its spans go: %s", r)
	}
	if r := rowOf(page, "metrics"); strings.Contains(r, "spans") {
		t.Errorf("row of metrics speaks of spans: %s", r)
	}
}

// TestLandingLinkEscaped checks the heatmaps link of a config whose name
// needs escaping in a URL fragment.
func TestLandingLinkEscaped(t *testing.T) {
	fakeConfigs(t, map[*collector.Config]configStats{})
	st := &collector.Status{}
	st.Add(&collector.State{Name: `a b#c"<d>&é`, Source: "bundled", Up: true, Collector: &collector.Config{}})
	page := landingPage(t, st, Options{MetricsPath: "/metrics"}, nil)
	want := `<a href="/ui/#a%20b%23c%22%3Cd%3E&amp;%C3%A9">heatmaps</a>`
	if !strings.Contains(page, want) {
		t.Errorf("page lacks %s:\n%s", want, page)
	}
}

// TestLandingNotFound: only "/" is the landing page.
func TestLandingNotFound(t *testing.T) {
	rec := httptest.NewRecorder()
	Landing(&collector.Status{}, Options{}).ServeHTTP(rec, httptest.NewRequest("GET", "/nope", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("GET /nope: %d, want 404", rec.Code)
	}
}

// TestRunTimes checks ns/event: since the load at the first view, then
// between views; kept when no run was counted; and the readings bounded
// by the programs shown.
func TestRunTimes(t *testing.T) {
	p1, p2 := new(ebpf.Program), new(ebpf.Program)
	stats := map[*ebpf.Program]progReading{p1: {runTime: 1000, runs: 10}, p2: {runTime: 3000, runs: 10}}
	r := newRunTimes()
	r.read = func(p *ebpf.Program) (time.Duration, uint64, error) { return stats[p].runTime, stats[p].runs, nil }
	states := []collector.State{{Name: "a", Up: true, Programs: []collector.ProgramState{
		{Attached: true, Prog: p1}, {Attached: true, Prog: p2}, {Attached: false}}}}
	if got := r.update(states); got["a"] != 200 {
		t.Errorf("first view: %v ns/event, want 200 (4000 ns / 20 runs since load)", got["a"])
	}
	stats[p1] = progReading{runTime: 1000 + 500, runs: 10 + 1}
	stats[p2] = progReading{runTime: 3000 + 100, runs: 10 + 1}
	if got := r.update(states); got["a"] != 300 {
		t.Errorf("second view: %v ns/event, want 300 (600 ns / 2 runs since the first)", got["a"])
	}
	if got := r.update(states); got["a"] != 300 {
		t.Errorf("view without runs: %v ns/event, want the last value kept, 300", got["a"])
	}
	// The config goes down: its readings and value are dropped.
	states[0].Up = false
	if got := r.update(states); len(got) != 0 || len(r.prev) != 0 || len(r.last) != 0 {
		t.Errorf("after the config went down: %v, %d readings, %d values; want none", got, len(r.prev), len(r.last))
	}
	// Never measured (statistics never on): no value.
	stats[p1], stats[p2] = progReading{}, progReading{}
	states[0].Up = true
	if got := r.update(states); len(got) != 0 {
		t.Errorf("no run counted: %v, want no value", got)
	}
}

// TestReasonHint checks the few words a folded reason shows.
func TestReasonHint(t *testing.T) {
	for reason, want := range map[string]string{
		downReason: "fentry/fexit, kprobes not supported",
		"programs/ipc.bpf.o: attach perf_event: hardware perf events not supported by this kernel or machine (no PMU for this event)": "hardware perf events not supported",
		"requires kernel >= 99.0, running 6.1.0": "",
		"":                                       "",
	} {
		if got := reasonHint(reason); got != want {
			t.Errorf("reasonHint(%q) = %q, want %q", reason, got, want)
		}
	}
}

// TestLandingHostBPF checks the host's cards and top programs beside ours:
// every program's time per second, map memory, and the top five table
// with owner and config, escaped; and nothing of it without the host
// collector.
func TestLandingHostBPF(t *testing.T) {
	st, progs := testStatus(t)
	sum := bpfstats.Summary{Measured: true, CPU: 0.008, Window: time.Second, End: time.Unix(995, 0),
		Listed: true, Programs: 120, Maps: 300, MapBytes: 3 << 20,
		Top: []bpfstats.TopProgram{
			{ID: 42, Name: "cil_from_netdev", Type: "sched_cls", Owner: "cilium-agent", CPU: 0.006, NsPerRun: 812},
			{ID: 7, Name: "timer_start", Type: "tracepoint", Owner: "<b>evil</b>", Config: "timers", CPU: 0.002},
		}}
	page := landingPage(t, st, Options{MetricsPath: "/metrics", HostBPF: func() bpfstats.Summary { return sum }}, progs)
	for _, want := range []string{
		`<span class="big">8.0 ms/s</span>`,
		"every program on the host, in a 1s window 5s ago",
		`<span class="big">3.0 MiB</span>`,
		"300 maps, 120 programs on the host",
		`<td>42 cil_from_netdev</td><td>sched_cls</td><td>cilium-agent</td><td>–</td><td class="n">6.0 ms/s</td><td class="n">812</td>`,
		`<td>&lt;b&gt;evil&lt;/b&gt;</td><td>timers</td><td class="n">2.0 ms/s</td><td class="n">–</td>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	page = landingPage(t, st, Options{MetricsPath: "/metrics", HostBPF: func() bpfstats.Summary { return bpfstats.Summary{} }}, progs)
	if !strings.Contains(page, `id="host-bpf"`) || !strings.Contains(page, "not listed yet") || strings.Contains(page, `id="host-top"`) {
		t.Error("before the first listing and window: want the cards as not measured and no table")
	}
	page = landingPage(t, st, Options{MetricsPath: "/metrics"}, progs)
	if strings.Contains(page, "host-bpf") {
		t.Error("host cards without the host collector")
	}
}

// TestLandingIdle checks that a config's row names the programs that ran 0
// times in the CPU budget's last window, with the window, and that configs
// down or without idle programs, or a page without a window, show none.
func TestLandingIdle(t *testing.T) {
	st, progs := testStatus(t)
	rates := func() (map[string]float64, time.Duration, time.Time) {
		return map[string]float64{"biolatency": 0.002}, time.Second, time.Unix(988, 0)
	}
	idle := func() map[string][]string {
		return map[string][]string{
			"biolatency": {"complete (section tp_btf/block_rq_complete)"},
			"spin":       {"spin (section tracepoint/x/y)"}, // down: not shown
		}
	}
	page := landingPage(t, st, Options{CPURates: rates, IdlePrograms: idle}, progs)
	want := `<span class="mark idle">ran 0 times</span> in the last 1s window, 12s ago: complete (section tp_btf/block_rq_complete)`
	if row := rowOf(page, "biolatency"); !strings.Contains(row, want) {
		t.Errorf("biolatency's row lacks %q:\n%s", want, row)
	}
	if n := strings.Count(page, "ran 0 times"); n != 1 {
		t.Errorf("page says \"ran 0 times\" %d times, want once (biolatency):\n%s", n, page)
	}
	page = landingPage(t, st, Options{IdlePrograms: idle}, progs)
	if strings.Contains(page, "ran 0 times") {
		t.Errorf("page without a measuring window shows idle programs:\n%s", page)
	}
}

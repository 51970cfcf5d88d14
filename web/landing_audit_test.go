// SPDX-License-Identifier: Apache-2.0

package web

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	toolkit "github.com/prometheus/exporter-toolkit/web"

	"github.com/kernel-exporter/kernel_exporter/collector"
)

// TestLandingAudit checks each config's audit on the landing page: the
// ratio in the band plain, out of it or not compared marked, the sources
// without kernel events said so once, nothing for a config without an
// audit section; a kernel counter this kernel does not keep said so,
// unmarked.
func TestLandingAudit(t *testing.T) {
	status := &collector.Status{}
	for _, n := range []string{"biolatency", "softirq", "timers", "runqlat", "oomkill"} {
		status.Add(&collector.State{Name: n, Source: "bundled"})
	}
	page := landingPage(t, status, Options{Audit: func() map[string][]AuditState {
		return map[string][]AuditState{
			"biolatency": {{Source: "block_discards"}, {Source: "block_flushes", HasRatio: true, Ratio: 0.9991, InBand: true}, {Source: "block_reads"}},
			"softirq":    {{Source: "softirqs_net_rx", HasRatio: true, Ratio: 0.5}},
			"runqlat":    {{Source: "schedstat_switch_ins", Unavailable: "/proc/schedstat is absent (CONFIG_SCHEDSTATS off)"}},
			"timers":     {{Source: "context_switches", Err: "/proc/stat: no ctxt line"}},
		}
	}}, nil)
	for name, want := range map[string]string{
		"biolatency": `audit: block_flushes <span class="">0.999</span> block_discards, block_reads <span class="">no kernel events</span>`,
		"softirq":    `audit: softirqs_net_rx <span class="mark">0.500</span>`,
		"runqlat":    `audit: schedstat_switch_ins <span class="">not available on this kernel: /proc/schedstat is absent (CONFIG_SCHEDSTATS off)</span>`,
		"timers":     `audit: context_switches <span class="mark">not compared: /proc/stat: no ctxt line</span>`,
	} {
		if r := rowOf(page, name); !strings.Contains(r, want) {
			t.Errorf("row of %s lacks %q:\n%s", name, want, r)
		}
	}
	if r := rowOf(page, "oomkill"); r == "" || strings.Contains(r, "audit:") {
		t.Errorf("oomkill has no audit here, yet its row shows one:\n%s", r)
	}
}

// TestUIAudit checks the live page's data (/ui/data, served by NewServer)
// carries each config's audit as the landing page shows it: by config,
// each pair's state, its ratio (null without one) and the reason of an
// error or of a counter this kernel does not keep; an empty list with the
// audit off.
func TestUIAudit(t *testing.T) {
	o := opts("/metrics")
	o.Audit = func() map[string][]AuditState {
		return map[string][]AuditState{
			"runqlat":    {{Source: "schedstat_switch_ins", Unavailable: "/proc/schedstat is absent (CONFIG_SCHEDSTATS off)"}},
			"biolatency": {{Source: "block_discards"}, {Source: "block_flushes", HasRatio: true, Ratio: 0.5}, {Source: "block_reads", HasRatio: true, Ratio: 1, InBand: true}},
			"softirq":    {{Source: "softirqs_rcu", Err: "/proc/softirqs: no RCU row"}},
		}
	}
	get := func(o Options) string {
		srv, err := NewServer(prometheus.NewRegistry(), nil, &collector.Status{}, &toolkit.FlagConfig{}, o)
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		srv.HTTP.Handler.ServeHTTP(rec, httptest.NewRequest("GET", "/ui/data", nil))
		var d struct {
			Audit json.RawMessage `json:"audit"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &d); err != nil || rec.Code != 200 {
			t.Fatalf("/ui/data: %d %v %s", rec.Code, err, rec.Body)
		}
		return string(d.Audit)
	}
	want := `[{"config":"biolatency","source":"block_discards","state":"no_events","ratio":null},` +
		`{"config":"biolatency","source":"block_flushes","state":"out_of_band","ratio":0.5},` +
		`{"config":"biolatency","source":"block_reads","state":"in_band","ratio":1},` +
		`{"config":"runqlat","source":"schedstat_switch_ins","state":"unavailable","ratio":null,"reason":"/proc/schedstat is absent (CONFIG_SCHEDSTATS off)"},` +
		`{"config":"softirq","source":"softirqs_rcu","state":"error","ratio":null,"reason":"/proc/softirqs: no RCU row"}]`
	if got := get(o); got != want {
		t.Errorf("/ui/data audit:\n got %s\nwant %s", got, want)
	}
	if got := get(opts("/metrics")); got != "[]" {
		t.Errorf("/ui/data audit with the audit off: %s, want []", got)
	}
}

// SPDX-License-Identifier: Apache-2.0

package ui

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestHandler checks the page, its assets and the data endpoint: methods,
// the range check of since, the security headers and the JSON shape.
func TestHandler(t *testing.T) {
	s, clk := manual()
	h := Handler(s)
	s.tick(t0, snap("c", hist("h", upper4, []string{"dev"}, map[string][]uint64{"a": {1, 0, 0, 0, 0}})))
	s.tick(t0.Add(time.Second), snap("c", hist("h", upper4, []string{"dev"}, map[string][]uint64{"a": {3, 0, 0, 0, 0}})))
	clk.set(t0.Add(time.Second))
	get := func(method, target string) *http.Response {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
		return rec.Result()
	}
	for _, c := range []struct {
		method, target string
		code           int
		ctype, body    string
	}{
		{"GET", "/ui/", 200, "text/html", `src="ui.js"`},
		{"GET", "/ui/ui.js", 200, "javascript", "fetch('data?since="},
		{"GET", "/ui/ui.css", 200, "text/css", "canvas.heatmap"},
		{"GET", "/ui/data", 200, "application/json", `"seq":1`},
		{"GET", "/ui/data?since=0", 200, "application/json", `"deltas":[[2,0,0,0,0]]`},
		{"GET", "/ui/data?since=1", 200, "application/json", `"first":2`},
		// A poll that finds nothing new: empty arrays, never null (the
		// page appends them: null made it fail with "h.deltas is not
		// iterable").
		{"GET", "/ui/data?since=1", 200, "application/json", `"t":[],`},
		{"GET", "/ui/data?since=1", 200, "application/json", `"deltas":[],"quantiles":[],`},
		// No audit (SetAudit not called): an empty list.
		{"GET", "/ui/data?since=1", 200, "application/json", `"audit":[]`},
		{"GET", "/ui/ui.js", 200, "javascript", "renderAudit(d.audit)"},
		{"GET", "/ui/data?since=-1", 400, "text/plain", `query parameter since "-1"`},
		{"GET", "/ui/data?since=9007199254740993", 400, "text/plain", "from 0 to 9007199254740992"},
		{"GET", "/ui/data?since=x", 400, "text/plain", "since"},
		{"POST", "/ui/data", 405, "text/plain", "method not allowed"},
		{"GET", "/ui/other.js", 404, "text/plain", "not found"},
		{"GET", "/ui/assets/ui.js", 404, "text/plain", "not found"},
	} {
		resp := get(c.method, c.target)
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != c.code || !strings.Contains(resp.Header.Get("Content-Type"), c.ctype) || !strings.Contains(string(b), c.body) {
			t.Errorf("%s %s: %d %q %.200s; want %d %s containing %q", c.method, c.target, resp.StatusCode, resp.Header.Get("Content-Type"), b, c.code, c.ctype, c.body)
		}
		if c.code != 405 && !strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'none'") {
			t.Errorf("%s %s: no CSP", c.method, c.target)
		}
	}
	var d Data
	resp := get("GET", "/ui/data?since=0")
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
		t.Fatal(err)
	}
	if !d.Running || d.Seq != 1 || len(d.Histograms) != 1 || d.Histograms[0].Window.Total != 2 || d.Histograms[0].Window.Quantiles[0] != 0.5 {
		t.Errorf("data %+v", d)
	}
}

// TestDataAudit checks that /ui/data carries the audit states SetAudit
// gives, as given, and that a nil list is served as [].
func TestDataAudit(t *testing.T) {
	s, clk := manual()
	clk.set(t0)
	r := 0.9921
	var list []AuditData
	s.SetAudit(func() []AuditData { return list })
	rec := httptest.NewRecorder()
	Handler(s).ServeHTTP(rec, httptest.NewRequest("GET", "/ui/data", nil))
	if !strings.Contains(rec.Body.String(), `"audit":[]`) {
		t.Errorf("nil audit list: %s", rec.Body)
	}
	list = []AuditData{{Config: "biolatency", Source: "block_reads", State: AuditInBand, Ratio: &r},
		{Config: "runqlat", Source: "schedstat_switch_ins", State: AuditUnavailable, Reason: "/proc/schedstat is absent (CONFIG_SCHEDSTATS off)"}}
	rec = httptest.NewRecorder()
	Handler(s).ServeHTTP(rec, httptest.NewRequest("GET", "/ui/data", nil))
	want := `"audit":[{"config":"biolatency","source":"block_reads","state":"in_band","ratio":0.9921},{"config":"runqlat","source":"schedstat_switch_ins","state":"unavailable","ratio":null,"reason":"/proc/schedstat is absent (CONFIG_SCHEDSTATS off)"}]`
	if !strings.Contains(rec.Body.String(), want) {
		t.Errorf("/ui/data: %s\nwant it to contain %s", rec.Body, want)
	}
}

// TestProfileHandler checks the flame graph page and its assets: the
// paths served, 404 for the live page's files and others, 405 for POST,
// the security headers.
func TestProfileHandler(t *testing.T) {
	h := ProfileHandler()
	for _, c := range []struct {
		method, target string
		code           int
		ctype, body    string
	}{
		{"GET", "/ui/profile/", 200, "text/html", `src="flame.js"`},
		{"HEAD", "/ui/profile/", 200, "text/html", ""},
		{"GET", "/ui/profile/flame.js", 200, "javascript", "'../../profile/'"},
		{"GET", "/ui/profile/flame.css", 200, "text/css", "#tip"},
		{"GET", "/ui/profile/ui.js", 404, "text/plain", "not found"},
		{"GET", "/ui/profile/profile.html", 404, "text/plain", "not found"},
		{"POST", "/ui/profile/", 405, "text/plain", "method not allowed"},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(c.method, c.target, nil))
		resp := rec.Result()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != c.code || !strings.Contains(resp.Header.Get("Content-Type"), c.ctype) || !strings.Contains(string(b), c.body) {
			t.Errorf("%s %s: %d %q %.200s; want %d %s containing %q", c.method, c.target, resp.StatusCode, resp.Header.Get("Content-Type"), b, c.code, c.ctype, c.body)
		}
		if c.code == 200 && !strings.Contains(resp.Header.Get("Content-Security-Policy"), "connect-src 'self'") {
			t.Errorf("%s %s: no CSP", c.method, c.target)
		}
	}
}

// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// promStandIn serves every query with answer; it names the kind of query
// (count by __name__, count by instance, increase) it got.
func promStandIn(t *testing.T, answer func(w http.ResponseWriter, r *http.Request, kind string)) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		q := r.Form.Get("query")
		kind := "increase"
		switch {
		case strings.HasPrefix(q, "count by (__name__)"):
			kind = "names"
		case strings.HasPrefix(q, "count by ("):
			kind = "hosts"
		}
		answer(w, r, kind)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func vectorJSON(samples ...string) string {
	return `{"status":"success","data":{"resultType":"vector","result":[` + strings.Join(samples, ",") + `]}}`
}

// TestCompareBounds: a Prometheus stand-in that hangs, errors, sends
// garbage, too many series or too many bytes gets exit code 1 and one
// clear line, within the query timeout.
func TestCompareBounds(t *testing.T) {
	hang := make(chan struct{})
	defer close(hang)
	// stall holds an answer until the client gives up or the test ends.
	stall := func(r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-hang:
		}
	}
	names := vectorJSON(`{"metric":{"__name__":"kernel_calls_total"},"value":[1,"2"]}`)
	hosts := vectorJSON(`{"metric":{"instance":"h1"},"value":[1,"1"]}`)
	// listing answers the names and hosts queries (true), or nothing.
	listing := func(w http.ResponseWriter, kind string) bool {
		switch kind {
		case "names":
			fmt.Fprint(w, names)
		case "hosts":
			fmt.Fprint(w, hosts)
		default:
			return false
		}
		return true
	}
	var many strings.Builder
	for i := 0; i < 200; i++ {
		if i > 0 {
			many.WriteByte(',')
		}
		fmt.Fprintf(&many, `{"metric":{"instance":"h%d"},"value":[1,"%d"]}`, i, i)
	}
	for _, c := range []struct {
		name   string
		flags  []string
		answer func(w http.ResponseWriter, r *http.Request, kind string)
		want   string
	}{
		{"hangs", nil, func(w http.ResponseWriter, r *http.Request, kind string) {
			stall(r)
		}, "no answer within 500ms (--query.timeout)"},
		{"hangs mid-body", nil, func(w http.ResponseWriter, r *http.Request, kind string) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"status":"success","data":{"resultType":"vector","result":[`)
			w.(http.Flusher).Flush()
			stall(r)
		}, "no answer within 500ms (--query.timeout)"},
		{"garbage", nil, func(w http.ResponseWriter, r *http.Request, kind string) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, "\x00\x01garbage SECRET-BODY "+strings.Repeat("x", 5000))
		}, "bad_response: "},
		{"500 with a page", nil, func(w http.ResponseWriter, r *http.Request, kind string) {
			w.WriteHeader(500)
			fmt.Fprint(w, "<html>SECRET-BODY</html>")
		}, "server_error: server error: 500"},
		{"error answer", nil, func(w http.ResponseWriter, r *http.Request, kind string) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(422)
			fmt.Fprint(w, `{"status":"error","errorType":"execution","error":"query processing would load too many samples into memory"}`)
		}, "execution: query processing would load too many samples"},
		{"a matrix", nil, func(w http.ResponseWriter, r *http.Request, kind string) {
			fmt.Fprint(w, `{"status":"success","data":{"resultType":"matrix","result":[]}}`)
		}, "got a matrix, want a vector"},
		{"a million series counted", nil, func(w http.ResponseWriter, r *http.Request, kind string) {
			if kind == "names" {
				fmt.Fprint(w, vectorJSON(`{"metric":{"__name__":"kernel_calls_total"},"value":[1,"1000000"]}`))
				return
			}
			fmt.Fprint(w, hosts)
		}, "match 2000000 kernel_* counter and histogram series (base 1000000, new 1000000), more than --query.max-series=50000"},
		{"more series than counted", []string{"--query.max-series=300"}, func(w http.ResponseWriter, r *http.Request, kind string) {
			if !listing(w, kind) {
				fmt.Fprint(w, vectorJSON(many.String()))
			}
		}, "new side: query increase(kernel_calls_total{os=\"b\"}[3600s]): answers hold 400 series so far, more than --query.max-series=300"},
		{"a million series sent", nil, func(w http.ResponseWriter, r *http.Request, kind string) {
			if listing(w, kind) {
				return
			}
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"status":"success","data":{"resultType":"vector","result":[`)
			one := []byte(`{"metric":{},"value":[1,"1"]},`)
			for i := 0; i < 1_000_000-1; i++ {
				_, _ = w.Write(one)
			}
			fmt.Fprint(w, `{"metric":{},"value":[1,"1"]}]}}`)
		}, "too many series: more than 50000 series in one answer (--query.max-series)"},
		{"a bad metric name", nil, func(w http.ResponseWriter, r *http.Request, kind string) {
			fmt.Fprint(w, vectorJSON(`{"metric":{"__name__":"kernel_x{a=\"b\"} or vector(1)"},"value":[1,"1"]}`))
		}, "answer holds a bad metric name"},
		{"too many bytes", []string{"--query.max-bytes=64KiB"}, func(w http.ResponseWriter, r *http.Request, kind string) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"status":"success","data":{"resultType":"vector","result":[`)
			for i := 0; i < 1<<20; i++ {
				if _, err := fmt.Fprintf(w, `{"metric":{"__name__":"kernel_%d_total"},"value":[1,"1"]},`, i); err != nil {
					return
				}
			}
		}, "response too large: more than 65536 bytes (--query.max-bytes)"},
		{"too many bytes announced", []string{"--query.max-bytes=64KiB"}, func(w http.ResponseWriter, r *http.Request, kind string) {
			w.Header().Set("Content-Length", "100000")
			_, _ = w.Write(make([]byte, 100000))
		}, "response too large: 100000 bytes announced, more than 65536"},
	} {
		t.Run(c.name, func(t *testing.T) {
			url := promStandIn(t, c.answer)
			args := []string{"compare", "--prometheus.url=" + url, `{os="a"}`, `{os="b"}`}
			if len(c.flags) == 0 || !strings.HasPrefix(c.flags[0], "--query.timeout") {
				args = append(args, "--query.timeout=500ms")
			}
			args = append(args, c.flags...)
			var stdout, stderr strings.Builder
			start := time.Now()
			code := run(args, &stdout, &stderr)
			took := time.Since(start)
			line := strings.TrimSpace(stderr.String())
			t.Logf("exit %d after %v: %s", code, took.Round(time.Millisecond), line)
			if code != 1 || !strings.Contains(line, c.want) || strings.Count(line, "\n") != 0 {
				t.Errorf("exit %d, stderr %q; want 1 and one line with %q", code, line, c.want)
			}
			if strings.Contains(line, "SECRET-BODY") || len(line) > 1000 {
				t.Errorf("stderr quotes the body or is %d bytes: %q", len(line), line)
			}
			if took > 3*time.Second {
				t.Errorf("took %v, want within the 500ms timeout (and some slack)", took)
			}
		})
	}
}

// TestCompareFlags: bad flags of compare get exit code 2 and name the
// flag; good ones pass.
func TestCompareFlags(t *testing.T) {
	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	if err := os.WriteFile(tok, []byte("t0ken\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	u := "--prometheus.url=http://localhost:9090"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"compare", u, `{os="a"}`}, "NEW: missing"},
		{[]string{"compare", u, `{os="a`, `{}`}, "BASE: selector opens { but does not end with }"},
		{[]string{"compare", u, `{}`, `up{}`}, "NEW: selector names a metric"},
		{[]string{"compare", u, "--start=yesterday", `{}`, `{}`}, `--start "yesterday": want RFC 3339`},
		{[]string{"compare", u, "--start=2026-01-01T01:00:00Z", "--end=2026-01-01T00:00:00Z", `{}`, `{}`}, "window 2026-01-01T01:00:00Z to 2026-01-01T00:00:00Z: the end must be"},
		{[]string{"compare", u, "--base.start=1", `{}`}, "--base.end: missing"},
		{[]string{"compare", u, "--base.start=1", "--end=5", `{}`}, "--start and --end exclude"},
		{[]string{"compare", u, "--query.max-series=0", `{}`, `{}`}, "--query.max-series 0: must be"},
		{[]string{"compare", u, "--query.max-bytes=2GiB", `{}`, `{}`}, `--query.max-bytes "2GiB": must be 1KiB to 1GiB`},
		{[]string{"compare", u, "--query.timeout=0s", `{}`, `{}`}, "--query.timeout 0s: must be"},
		{[]string{"compare", u, "--format=csv", `{}`, `{}`}, "--format"},
		{[]string{"compare", `{}`, `{}`}, "--prometheus.url"},
	} {
		code, stderr := runArgs(t, c.args...)
		if code != ExitBadFlags || !strings.Contains(stderr, c.want) {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", c.args, code, stderr, ExitBadFlags, c.want)
		}
	}
	for _, args := range [][]string{
		{"compare", u, `{os="jessie"}`, `{os="stretch"}`},
		{"compare", u, "--start=2026-01-01T00:00:00Z", "--end=1767229200", "--format=json", "--top=0", `{}`, `{dc=~"fra.*"}`},
		{"compare", u, "--base.start=1767225600", "--base.end=1767229200", "--new.start=1767232800", "--new.end=1767236400.5", `{job="kernel"}`},
		{"compare", u, "--prometheus.bearer-token-file=" + tok, "--query.max-series=1000000", "--query.max-bytes=1GiB", "--query.timeout=10m", "--host.label=node", "--ignore-label=zone", `{}`, `{}`},
	} {
		if code, stderr := runArgs(t, args...); code != 0 || stderr != "" {
			t.Errorf("%q: exit %d, stderr %q; want 0 and nothing", args, code, stderr)
		}
	}
	// A missing token file is an error at run time, exit 1, naming the flag.
	var stdout, stderr strings.Builder
	code := run([]string{"compare", u, "--prometheus.bearer-token-file=" + filepath.Join(dir, "nope"), `{}`, `{}`}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "--prometheus.bearer-token-file") {
		t.Errorf("missing token file: exit %d, stderr %q", code, stderr.String())
	}
}

// TestCompareClientOptions: the bearer token and basic auth files reach
// Prometheus, a CA file verifies it, and without one (nor
// --prometheus.tls.insecure-skip-verify) its certificate is refused.
func TestCompareClientOptions(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var auth string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		fmt.Fprint(w, vectorJSON())
	}))
	defer srv.Close()
	ca := write("ca.pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})))
	tok := write("token", "t0ken\n")
	pw := write("password", "s3cret\n")
	for _, c := range []struct {
		flags    []string
		code     int
		auth     string
		inStderr string
	}{
		{[]string{"--prometheus.tls.ca-file=" + ca, "--prometheus.bearer-token-file=" + tok}, 0, "Bearer t0ken", ""},
		{[]string{"--prometheus.tls.ca-file=" + ca, "--prometheus.username=kernel", "--prometheus.password-file=" + pw}, 0, "Basic " + base64.StdEncoding.EncodeToString([]byte("kernel:s3cret")), ""},
		{[]string{"--prometheus.tls.insecure-skip-verify"}, 0, "", ""},
		{nil, 1, "", "certificate"},
		{[]string{"--prometheus.tls.ca-file=" + tok}, 1, "", "--prometheus.tls.ca-file " + strconv.Quote(tok) + ": no PEM certificate in it"},
		{[]string{"--prometheus.tls.cert-file=" + ca}, 1, "", "--prometheus.tls.cert-file and --prometheus.tls.key-file go together"},
		{[]string{"--prometheus.tls.cert-file=" + ca, "--prometheus.tls.key-file=" + tok}, 1, "", "--prometheus.tls.key-file " + strconv.Quote(tok) + ": tls: "},
	} {
		auth = ""
		var stdout, stderr strings.Builder
		code := run(append([]string{"compare", "--prometheus.url=" + srv.URL, "--query.timeout=5s", `{}`, `{}`}, c.flags...), &stdout, &stderr)
		if code != c.code || auth != c.auth || !strings.Contains(stderr.String(), c.inStderr) {
			t.Errorf("%q: exit %d, Authorization %q, stderr %q; want %d, %q, %q", c.flags, code, auth, stderr.String(), c.code, c.auth, c.inStderr)
		}
		if code == 0 && !strings.Contains(stdout.String(), "0 series, 0 signals") {
			t.Errorf("%q: stdout %q", c.flags, stdout.String())
		}
		if strings.Contains(stderr.String(), "t0ken") || strings.Contains(stderr.String(), "s3cret") {
			t.Errorf("%q: stderr shows a secret: %q", c.flags, stderr.String())
		}
	}
}

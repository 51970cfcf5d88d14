// SPDX-License-Identifier: Apache-2.0

package profile

import (
	"bytes"
	"context"
	"encoding/pem"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pprof "github.com/google/pprof/profile"
)

// cannedPprof builds a CPU profile of one process, "work", in which each
// function of counts is the innermost frame of count samples under main.
func cannedPprof(t *testing.T, counts map[string]int64) []byte {
	t.Helper()
	m := &pprof.Mapping{ID: 1, Start: 0x400000, Limit: 0x500000, File: "/usr/bin/work"}
	mainFn := &pprof.Function{ID: 1, Name: "main"}
	mainLoc := &pprof.Location{ID: 1, Mapping: m, Address: 0x401000, Line: []pprof.Line{{Function: mainFn}}}
	pp := &pprof.Profile{
		SampleType: []*pprof.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		PeriodType: &pprof.ValueType{Type: "cpu", Unit: "nanoseconds"}, Period: int64(time.Second / 99),
		Mapping: []*pprof.Mapping{m}, Function: []*pprof.Function{mainFn}, Location: []*pprof.Location{mainLoc},
	}
	id := uint64(2)
	for name, n := range counts {
		fn := &pprof.Function{ID: id, Name: name}
		loc := &pprof.Location{ID: id, Mapping: m, Address: 0x401000 + id*16, Line: []pprof.Line{{Function: fn}}}
		pp.Function, pp.Location = append(pp.Function, fn), append(pp.Location, loc)
		pp.Sample = append(pp.Sample, &pprof.Sample{Location: []*pprof.Location{loc, mainLoc}, Value: []int64{n, n * pp.Period},
			Label: map[string][]string{"comm": {"work"}}, NumLabel: map[string][]int64{"pid": {int64(id)}}})
		id++
	}
	var b bytes.Buffer
	if err := pp.Write(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// serveProfile serves body at /profile/cpu and checks that the request
// asks for ?seconds=1.
func serveProfile(t *testing.T, body []byte) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != PathCPU || r.URL.Query().Get("seconds") != "1" {
			http.NotFound(w, r)
			return
		}
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + PathCPU + "?seconds=1"
}

func TestDiffURLs(t *testing.T) {
	base := serveProfile(t, cannedPprof(t, map[string]int64{"burn_a": 300, "burn_b": 700}))
	newer := serveProfile(t, cannedPprof(t, map[string]int64{"burn_a": 700, "burn_b": 300}))
	var out, errb bytes.Buffer
	code := DiffInputs(context.Background(), []string{base}, []string{newer}, DiffOptions{Top: 1, Inputs: InputOptions{Timeout: 10 * time.Second}, Stdout: &out, Stderr: &errb})
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	t.Logf("profile diff %s %s:\n%s", base, newer, out.String())
	lines := strings.Split(out.String(), "\n")
	// Line 0 the header, 1 "grew most:", 2 the column titles, 3 the first.
	if len(lines) < 4 || !strings.Contains(lines[1], "grew most") {
		t.Fatalf("no grew most section in:\n%s", out.String())
	}
	if f := strings.Fields(lines[3]); len(f) != 7 || f[6] != "burn_a" || f[0] != "+40.0" || f[2] != "30.0%" || f[3] != "70.0%" {
		t.Errorf("first grown row %q: want burn_a, +40.0 pp, 30.0%% to 70.0%%", lines[3])
	}
	if !strings.Contains(out.String(), "-40.0 pp   70.0%   30.0%  -40.0 pp  burn_b") {
		t.Errorf("burn_b shrank by 40 pp: not in\n%s", out.String())
	}
}

// TestMergeEqualWeight: a host with 10 times the samples weighs as much as
// the other.
func TestMergeEqualWeight(t *testing.T) {
	quiet := serveProfile(t, cannedPprof(t, map[string]int64{"burn_a": 100}))
	busy := serveProfile(t, cannedPprof(t, map[string]int64{"burn_b": 1000}))
	p, err := ReadInputs(context.Background(), []string{quiet, busy}, InputOptions{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	base := serveProfile(t, cannedPprof(t, map[string]int64{"burn_a": 500, "burn_b": 500}))
	b, err := ReadInputs(context.Background(), []string{base}, InputOptions{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	d, err := Diff(b, p)
	if err != nil {
		t.Fatal(err)
	}
	shares := map[string]float64{}
	for _, r := range d.Rows {
		shares[r.Function] = r.New.Total
		if r.Function == "burn_a" || r.Function == "burn_b" {
			if math.Abs(r.Delta.Total) > 1e-9 {
				t.Errorf("%s moved %.4f from an even base: want 0 (each host weighs half)", r.Function, r.Delta.Total)
			}
		}
	}
	if math.Abs(shares["burn_a"]-0.5) > 1e-9 || math.Abs(shares["burn_b"]-0.5) > 1e-9 || math.Abs(shares["main"]-1) > 1e-9 {
		t.Errorf("merged shares %v: want burn_a 0.5, burn_b 0.5, main 1 (unweighted, burn_b would be 0.909)", shares)
	}
	if tot := p.Total(); tot != 2000 {
		t.Errorf("merged total %d: want 2000 (each host scaled to the largest, 1000)", tot)
	}
}

func TestReadInputsFileAndURL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.pprof")
	if err := os.WriteFile(path, cannedPprof(t, map[string]int64{"burn_a": 10}), 0o600); err != nil {
		t.Fatal(err)
	}
	u := serveProfile(t, cannedPprof(t, map[string]int64{"burn_b": 30}))
	p, err := ReadInputs(context.Background(), []string{path, u}, InputOptions{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, f := range p.Functions() {
		got[f.Function] = f.Self
	}
	if got["burn_a"] != 30 || got["burn_b"] != 30 {
		t.Errorf("self values %v: want burn_a 30 (10 scaled by 3), burn_b 30", got)
	}
}

func TestFetchHangs(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("body") != "" { // headers, then nothing
			w.WriteHeader(http.StatusOK)
			w.Write([]byte{0x1f})
			w.(http.Flusher).Flush()
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	for _, u := range []string{srv.URL + PathCPU, srv.URL + PathCPU + "?body=1"} {
		start := time.Now()
		_, err := ReadInputs(context.Background(), []string{u}, InputOptions{Timeout: 300 * time.Millisecond})
		took := time.Since(start)
		want := "URL \"" + u + "\": no complete answer within 300ms (--timeout)"
		if err == nil || err.Error() != want {
			t.Errorf("%s: error %v, want %s", u, err, want)
		}
		if took > 5*time.Second {
			t.Errorf("%s: failed after %v, the timeout is 300ms", u, took)
		}
	}
}

func TestFetchTooLarge(t *testing.T) {
	body := bytes.Repeat([]byte("x"), 4096)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("chunked") != "" {
			w.Write(body[:1024]) // flushed without a length
			w.(http.Flusher).Flush()
			w.Write(body[1024:])
			return
		}
		w.Header().Set("Content-Length", "4096")
		w.Write(body)
	}))
	defer srv.Close()
	for u, want := range map[string]string{
		srv.URL + PathCPU:                "4096 bytes announced, more than 2048 (--max-bytes)",
		srv.URL + PathCPU + "?chunked=1": "more than 2048 bytes (--max-bytes)",
	} {
		_, err := ReadInputs(context.Background(), []string{u}, InputOptions{Timeout: 10 * time.Second, MaxBytes: 2048})
		if !errors.Is(err, ErrTooLarge) || !strings.HasSuffix(err.Error(), want) {
			t.Errorf("%s: error %v, want ErrTooLarge ending %q", u, err, want)
		}
	}
}

func TestFetchAuthTLS(t *testing.T) {
	body := cannedPprof(t, map[string]int64{"burn_a": 5})
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		w.Write(body)
	}))
	defer srv.Close()
	dir := t.TempDir()
	tok, ca := filepath.Join(dir, "token"), filepath.Join(dir, "ca.pem")
	os.WriteFile(tok, []byte("s3cret\n"), 0o600)
	os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600)
	u := srv.URL + PathCPU
	o := InputOptions{Timeout: 10 * time.Second, FlagPrefix: "--http."}
	o.Client.CAFile = ca
	if _, err := ReadInputs(context.Background(), []string{u}, o); err == nil || err.Error() != "URL \""+u+"\": 401 Unauthorized" {
		t.Errorf("without the token: error %v, want 401 Unauthorized", err)
	}
	o.Client.BearerTokenFile = tok
	p, err := ReadInputs(context.Background(), []string{u}, o)
	if err != nil || p.Total() != 5 {
		t.Fatalf("with token and CA: %v", err)
	}
	o.Client.CAFile = ""
	if _, err := ReadInputs(context.Background(), []string{u}, o); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("without the CA: error %v, want a certificate error", err)
	}
	o.Client.CAFile = tok
	if _, err := ReadInputs(context.Background(), []string{u}, o); err == nil || err.Error() != "--http.tls.ca-file \""+tok+"\": no PEM certificate in it" {
		t.Errorf("a CA file without PEM: error %v", err)
	}
}

func TestReadInputsChecks(t *testing.T) {
	for _, c := range []struct {
		inputs []string
		want   string
	}{
		{[]string{"http://h:1" + PathCPU + "?seconds=30"}, `URL "http://h:1/profile/cpu?seconds=30": seconds=30 takes at least the --timeout 10s: make the timeout longer`},
		{[]string{"http://u:pw@h:1" + PathCPU + "?seconds=30"}, `URL "http://u:xxxxx@h:1/profile/cpu?seconds=30": seconds=30 takes at least the --timeout 10s: make the timeout longer`},
		{[]string{"http://" + PathCPU}, `URL "http:///profile/cpu": want http:// or https://host[:port]/path[?query]`},
	} {
		_, err := ReadInputs(context.Background(), c.inputs, InputOptions{Timeout: 10 * time.Second})
		if err == nil || err.Error() != c.want {
			t.Errorf("%v: error %v, want %s", c.inputs, err, c.want)
		}
	}
}

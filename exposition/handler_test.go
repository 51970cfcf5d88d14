// SPDX-License-Identifier: Apache-2.0

package exposition

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/kernel-exporter/kernel_exporter/collector"
)

// countingSource serves fixed snapshots, counts its reads and holds each
// read until release is closed (when set).
type countingSource struct {
	snaps   []*collector.Snapshot
	reads   atomic.Int32
	entered chan struct{}
	release chan struct{}
}

func (s *countingSource) Read() []*collector.Snapshot {
	s.reads.Add(1)
	if s.entered != nil {
		s.entered <- struct{}{}
	}
	if s.release != nil {
		<-s.release
	}
	return s.snaps
}

type countingGatherer struct {
	prometheus.Gatherer
	n atomic.Int32
}

func (g *countingGatherer) Gather() ([]*dto.MetricFamily, error) {
	g.n.Add(1)
	return g.Gatherer.Gather()
}

func counterSnapshot(n int) *collector.Snapshot {
	data := make([]collector.SeriesData, n)
	for i := range data {
		data[i] = collector.SeriesData{Labels: []string{fmt.Sprint(i / 1000), fmt.Sprint(i % 1000)}, Value: float64(i)}
	}
	return &collector.Snapshot{Config: "test", Families: []*collector.Family{
		collector.NewFamily("kernel_pairs_total", "pairs", collector.KindCounter, []string{"a", "b"}, nil, data),
	}}
}

func get(t *testing.T, url, accept, enc string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	req.Header.Set("Accept-Encoding", enc) // "" keeps net/http from asking for gzip itself
	tr := &http.Transport{DisableCompression: true}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// TestHandlerSharesReadAndEncoding checks that scrapes arriving while one
// of the same format is in flight get the same bytes from one read, one
// gather and one encoding.
func TestHandlerSharesReadAndEncoding(t *testing.T) {
	src := &countingSource{snaps: []*collector.Snapshot{counterSnapshot(20000)},
		entered: make(chan struct{}, 16), release: make(chan struct{})}
	reg := prometheus.NewRegistry()
	g := &countingGatherer{Gatherer: reg}
	h, err := Handler(src, g, HandlerOptions{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	defer ts.Close()
	const n = 5
	bodies := make([][]byte, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, bodies[i] = get(t, ts.URL, "", "gzip")
		})
		if i == 0 {
			<-src.entered // the leader is reading
		}
	}
	// Let the followers reach the handler and join.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if followers(h.(*handler)) == n-1 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(src.release)
	wg.Wait()
	if r, gs := src.reads.Load(), g.n.Load(); r != 1 || gs != 1 {
		t.Errorf("%d scrapes: %d reads and %d gathers, want 1 each", n, r, gs)
	}
	for i := 1; i < n; i++ {
		if !bytes.Equal(bodies[i], bodies[0]) || len(bodies[0]) == 0 {
			t.Errorf("scrape %d: %d bytes, differ from the leader's %d", i, len(bodies[i]), len(bodies[0]))
		}
	}
	// A scrape after them reads again.
	get(t, ts.URL, "", "gzip")
	if r := src.reads.Load(); r != 2 {
		t.Errorf("reads after a later scrape: %d, want 2", r)
	}
}

func followers(h *handler) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, b := range h.flights {
		b.mu.Lock()
		n += b.followers
		b.mu.Unlock()
	}
	return n
}

// TestBroadcastBounded checks that a leader alone keeps at most
// MaxSharedBytes of its output, then stops taking followers.
func TestBroadcastBounded(t *testing.T) {
	b := newBroadcast()
	closed := 0
	var sink bytes.Buffer
	w := b.tee(&sink, func() { closed++ })
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	for range 4 * MaxSharedBytes / len(chunk) {
		if _, err := w.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	b.finish(nil)
	if b.size != 0 || b.chunks != nil || closed != 1 || b.join() {
		t.Errorf("after %d MiB alone: %d bytes kept, closed %d times, joinable %v", sink.Len()>>20, b.size, closed, b.join())
	}
	if sink.Len() != 4*MaxSharedBytes {
		t.Errorf("leader got %d bytes, want %d", sink.Len(), 4*MaxSharedBytes)
	}
}

// TestHandlerFormats checks the negotiated content type and encoding, and
// that each body decodes to the snapshot's values.
func TestHandlerFormats(t *testing.T) {
	src := &countingSource{snaps: []*collector.Snapshot{counterSnapshot(3)}}
	reg := prometheus.NewRegistry()
	h, err := Handler(src, reg, HandlerOptions{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	defer ts.Close()
	for _, tc := range []struct {
		accept, enc       string
		wantType, wantEnc string
	}{
		{"", "", "text/plain; version=0.0.4", ""},
		{"", "gzip", "text/plain; version=0.0.4", "gzip"},
		{"", "gzip, zstd", "text/plain; version=0.0.4", "zstd"},
		{"application/openmetrics-text;version=1.0.0", "", "application/openmetrics-text; version=1.0.0", ""},
		{"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited", "gzip",
			"application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited", "gzip"},
	} {
		resp, body := get(t, ts.URL, tc.accept, tc.enc)
		ct := resp.Header.Get("Content-Type")
		if !strings.HasPrefix(ct, tc.wantType) || resp.Header.Get("Content-Encoding") != tc.wantEnc {
			t.Errorf("Accept %q, Accept-Encoding %q: Content-Type %q, Content-Encoding %q; want %q, %q",
				tc.accept, tc.enc, ct, resp.Header.Get("Content-Encoding"), tc.wantType, tc.wantEnc)
			continue
		}
		plain := decompress(t, tc.wantEnc, body)
		if strings.HasPrefix(ct, "application/openmetrics-text") {
			if !strings.HasSuffix(string(plain), "# EOF\n") {
				t.Errorf("OpenMetrics body does not end with # EOF")
			}
			continue
		}
		dec := expfmt.NewDecoder(bytes.NewReader(plain), expfmt.NewFormat(formatType(ct)))
		var sum float64
		for {
			var mf dto.MetricFamily
			if err := dec.Decode(&mf); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				t.Fatalf("%s: %v", ct, err)
			}
			if mf.GetName() == "kernel_pairs_total" {
				for _, m := range mf.GetMetric() {
					sum += m.GetCounter().GetValue()
				}
			}
		}
		if sum != 0+1+2 {
			t.Errorf("%s: sum %v, want 3", ct, sum)
		}
	}
}

func formatType(ct string) expfmt.FormatType {
	if strings.Contains(ct, "protobuf") {
		return expfmt.TypeProtoDelim
	}
	return expfmt.TypeTextPlain
}

// TestHandlerReadError checks that a family whose read failed is left out
// and counted, and the rest is served.
func TestHandlerReadError(t *testing.T) {
	snap := counterSnapshot(2)
	bad := collector.NewFamily("kernel_bad_total", "bad", collector.KindCounter, nil, nil, nil)
	bad.Err = errors.New("batch lookup failed")
	snap.Families = append(snap.Families, bad)
	reg := prometheus.NewRegistry()
	h, err := Handler(&countingSource{snaps: []*collector.Snapshot{snap}}, reg, HandlerOptions{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	defer ts.Close()
	_, body := get(t, ts.URL, "", "")
	if strings.Contains(string(body), "kernel_bad_total") || !strings.Contains(string(body), "kernel_pairs_total") {
		t.Errorf("body:\n%s", body)
	}
	// The error is counted before the self-metrics are gathered: the same
	// scrape shows it.
	if !strings.Contains(string(body), `kernel_exporter_exposition_errors_total{cause="read"} 1`) {
		t.Errorf("read errors not counted:\n%s", body)
	}
	if n := testutil.CollectAndCount(reg, "kernel_exporter_exposition_errors_total"); n != 3 {
		t.Errorf("%d error series, want 3 causes", n)
	}
}

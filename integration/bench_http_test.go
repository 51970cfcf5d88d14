// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// bigmapYAML exports testdata/bench/bigmap.bpf.c. Both exporters accept it:
// max_series is ours (the reference ignores unknown keys) and is set to
// config.MaxMaxSeries, the highest allowed, so that 1,000,000 keys are
// 1,000,000 series.
const bigmapYAML = `metrics:
  counters:
    - name: bigmap_total
      help: keys filled by the HTTP scrape benchmark
      max_series: 1000000
      labels:
        - name: a
          size: 4
          decoders:
            - name: uint
        - name: b
          size: 4
          decoders:
            - name: uint
`

// scrapeFormat is one way a client asks for /metrics.
type scrapeFormat struct {
	name    string
	header  map[string]string
	decoded func(body []byte) (series int, err error) // counts bigmap_total series in a response
}

// scrapeFormats: the Prometheus text format without compression, the same
// gzip-compressed (what a Prometheus server asks for), and delimited
// protobuf (what a Prometheus server asks for first when native histograms
// are on).
var scrapeFormats = []scrapeFormat{
	{"text", map[string]string{"Accept": "text/plain;version=0.0.4"}, countText},
	{"gzip", map[string]string{"Accept": "text/plain;version=0.0.4", "Accept-Encoding": "gzip"}, countGzipText},
	{"proto", map[string]string{"Accept": "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited"}, countProto},
}

// benchKeys returns the map sizes to run: KE_BENCH_KEYS (comma-separated),
// or 10k, 100k and 1M.
func benchKeys(b *testing.B) []int {
	s := os.Getenv("KE_BENCH_KEYS")
	if s == "" {
		return []int{10_000, 100_000, 1_000_000}
	}
	var keys []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 1_000_000 {
			b.Fatalf("KE_BENCH_KEYS: %q is not a map size from 1 to 1000000", f)
		}
		keys = append(keys, n)
	}
	return keys
}

// BenchmarkHTTPScrape times whole scrapes over HTTP, from the request to the
// last byte of the body, of one counter whose BPF hash map holds every key
// of a given size, each its own series with two uint labels. It runs our
// binary and, when REF_EXPORTER names its binary, the reference exporter on
// the same map sizes, one process per exporter and size: the process
// starts, the benchmark fills the map it created (BPF_MAP_UPDATE_BATCH from
// here), checks one response of each format for every series, then times
// b.N scrapes per format in the order text, gzip, proto.
//
// Metrics per format: ms-median and ms-min per scrape, body-B (the bytes
// on the wire: compressed for gzip), and VmHWM-MiB, the exporter's peak
// resident memory (VmHWM of /proc/<pid>/status) after that format's
// scrapes; the figure after proto is the process's peak over all three.
//
// Run as root, for instance:
//
//	go test -run '^$' -bench HTTPScrape -benchtime 5x -timeout 60m ./integration/
//
// KE_BENCH_KEYS=10000,100000 chooses the map sizes (default 10k, 100k, 1M);
// KE_BENCH_PROFILE_DIR=<dir> saves our heap profile after each format;
// KE_BENCH_STDERR=1 passes the exporters' output through;
// tools/bench-http.sh builds both binaries and prints a table.
func BenchmarkHTTPScrape(b *testing.B) {
	clang := benchNeedTool(b, "clang-19")
	ref := os.Getenv("REF_EXPORTER")
	for _, n := range benchKeys(b) {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			benchCompile(b, clang, dir, n)
			b.Run("ours", func(b *testing.B) {
				benchExporter(b, n, binary, benchOursArgs(dir)...)
			})
			if ref == "" {
				return
			}
			b.Run("ref", func(b *testing.B) {
				benchExporter(b, n, ref, "--config.dir="+dir, "--config.names=bigmap")
			})
		})
	}
}

// benchExporter starts bin with args, fills its bigmap_total with n keys
// and runs one sub-benchmark per format.
func benchExporter(b *testing.B, n int, bin string, args ...string) {
	p := startBenchProcess(b, bin, args...)
	m := findBigmap(b, p, n)
	fillBigmap(b, m, n)
	m.Close()
	client := &http.Client{
		Timeout: 10 * time.Minute,
		// Keep the body as sent: gzip is timed and sized compressed.
		Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 1},
	}
	defer client.CloseIdleConnections()
	for _, f := range scrapeFormats {
		// One checked scrape first, which also warms the exporter up (the
		// first read decodes every key).
		body, _, err := scrape(client, p.url, f)
		if err != nil {
			b.Fatalf("%s: %v\n%s", f.name, err, p.logs)
		}
		if got, err := f.decoded(body); err != nil || got != n {
			b.Fatalf("%s: %d bigmap_total series in the response (error %v), want %d\n%s", f.name, got, err, n, p.logs)
		}
		b.Run(f.name, func(b *testing.B) {
			times := make([]time.Duration, 0, b.N)
			size := 0
			b.ResetTimer()
			for range b.N {
				body, d, err := scrape(client, p.url, f)
				if err != nil {
					b.Fatalf("%v\n%s", err, p.logs)
				}
				times = append(times, d)
				size = len(body)
			}
			b.StopTimer()
			slices.Sort(times)
			b.ReportMetric(ms(times[len(times)/2]), "ms-median")
			b.ReportMetric(ms(times[0]), "ms-min")
			b.ReportMetric(float64(size), "body-B")
			b.ReportMetric(float64(p.vmHWM(b))/1024, "VmHWM-MiB")
			saveHeapProfile(b, client, p, fmt.Sprintf("heap-%d-%s.pb.gz", n, f.name))
		})
	}
}

// scrape GETs /metrics with the format's headers and reads the whole body.
// It returns the body and the time from sending the request to its last
// byte.
func scrape(client *http.Client, url string, f scrapeFormat) ([]byte, time.Duration, error) {
	req, err := http.NewRequest(http.MethodGet, url+"/metrics", nil)
	if err != nil {
		return nil, 0, err
	}
	for k, v := range f.header {
		req.Header.Set(k, v)
	}
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("scrape %s: %w", f.name, err)
	}
	body, err := io.ReadAll(resp.Body)
	d := time.Since(start)
	resp.Body.Close()
	if err != nil {
		return nil, 0, fmt.Errorf("scrape %s: read body: %w", f.name, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, 0, fmt.Errorf("scrape %s: status %s", f.name, resp.Status)
	}
	if want := f.header["Accept-Encoding"]; want != "" && resp.Header.Get("Content-Encoding") != want {
		return nil, 0, fmt.Errorf("scrape %s: Content-Encoding %q, want %q", f.name, resp.Header.Get("Content-Encoding"), want)
	}
	return body, d, nil
}

// ms returns d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// saveHeapProfile writes the exporter's heap profile to name in
// KE_BENCH_PROFILE_DIR, when that is set (ours runs with
// --web.enable-pprof then; the reference has no profile and is skipped).
func saveHeapProfile(b *testing.B, client *http.Client, p *benchProcess, name string) {
	dir := os.Getenv("KE_BENCH_PROFILE_DIR")
	if dir == "" {
		return
	}
	if r, err := client.Get(p.url + "/debug/pprof/heap?debug=1"); err == nil {
		// The text form ends with runtime.MemStats (HeapSys, NextGC...).
		if t, err := io.ReadAll(r.Body); err == nil {
			_ = os.WriteFile(filepath.Join(dir, strings.TrimSuffix(name, ".pb.gz")+".txt"), t, 0o644)
		}
		r.Body.Close()
	}
	resp, err := client.Get(p.url + "/debug/pprof/heap")
	if err != nil {
		b.Logf("heap profile: %v", err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return
	}
	body, err := io.ReadAll(resp.Body)
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, name), body, 0o644)
	}
	if err != nil {
		b.Logf("heap profile: %v", err)
	}
}

// benchOursArgs returns our exporter's arguments for the bigmap fixture in
// dir, with pprof on when KE_BENCH_PROFILE_DIR asks for profiles.
func benchOursArgs(dir string) []string {
	args := []string{"--config.dir=" + dir, "--config.names=bigmap", "--programs=none"}
	if os.Getenv("KE_BENCH_PROFILE_DIR") != "" {
		args = append(args, "--web.enable-pprof")
	}
	return args
}

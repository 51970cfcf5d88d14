// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// loadScrapers is the number of concurrent scrapers of TestPerfLoad.
const loadScrapers = 32

// TestPerfLoad runs 32 concurrent scrapers against --programs=all for
// KE_LOAD_SECONDS (default 60 s, 10 s with CI=true) while a light workload
// (execs, loopback TCP) keeps the maps changing. Every scrape must succeed:
// status 200 and a complete exposition. It logs p50/p99/max latency and the
// scrape rate (docs/performance.md).
func TestPerfLoad(t *testing.T) {
	d := perfSeconds("KE_LOAD_SECONDS", 60, 10)
	e := Start(t, "--programs=all")
	stopWork := loadWorkload(t)
	defer stopWork()

	type result struct {
		lat []time.Duration
		err []error
		n   int
	}
	results := make([]result, loadScrapers)
	var total atomic.Int64
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for i := range results {
		wg.Add(1)
		go func(r *result) {
			defer wg.Done()
			// One connection per scraper, kept alive, as a Prometheus
			// server does.
			client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
			defer client.CloseIdleConnections()
			for time.Now().Before(deadline) {
				start := time.Now()
				_, err := scrapeBody(client, e.URL)
				r.lat = append(r.lat, time.Since(start))
				r.n++
				total.Add(1)
				if err != nil && len(r.err) < 5 {
					r.err = append(r.err, err)
				}
			}
		}(&results[i])
	}
	wg.Wait()

	var lat []time.Duration
	failed := 0
	for _, r := range results {
		lat = append(lat, r.lat...)
		failed += len(r.err)
		for _, err := range r.err {
			t.Errorf("failed scrape: %v", err)
		}
	}
	sortDurations(lat)
	ms := e.Scrape()
	up := ms.Value("kernel_exporter_config_up", nil)
	t.Logf("%d scrapers, %v, --programs=all (%v configs up): %d scrapes (%.0f/s), %d failed; latency p50 %v, p99 %v, max %v; exporter RSS %d KiB",
		loadScrapers, d, up, len(lat), float64(len(lat))/d.Seconds(), failed,
		percentile(lat, 0.50).Round(time.Microsecond), percentile(lat, 0.99).Round(time.Microsecond),
		lat[len(lat)-1].Round(time.Microsecond), rssKB(t, e.pid()))
	if int64(len(lat)) != total.Load() || len(lat) < loadScrapers {
		t.Errorf("only %d scrapes in %v", len(lat), d)
	}
	if up < 3 {
		t.Errorf("only %v configs up with --programs=all\n%s", up, e.Logs())
	}
}

// loadWorkload runs, until the returned function is called (or the test
// ends), execs of /bin/true and loopback TCP connections, a few hundred per
// second, so that the maps read by the scrapes keep changing.
func loadWorkload(t *testing.T) (stop func()) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var execErr atomic.Pointer[error]
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("hello\n"))
			c.Close()
		}
	}()
	// every runs fn every d until done is closed.
	every := func(d time.Duration, fn func()) {
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				case <-time.After(d):
				}
				fn()
			}
		}()
	}
	every(5*time.Millisecond, func() {
		if c, err := net.Dial("tcp", l.Addr().String()); err == nil {
			buf := make([]byte, 16)
			c.Read(buf)
			c.Close()
		}
	})
	every(10*time.Millisecond, func() {
		if err := exec.Command("/bin/true").Run(); err != nil {
			werr := fmt.Errorf("exec /bin/true: %w", err)
			execErr.CompareAndSwap(nil, &werr)
		}
	})
	var once sync.Once
	stop = func() {
		once.Do(func() {
			close(done)
			l.Close()
			wg.Wait()
			if err := execErr.Load(); err != nil {
				t.Errorf("load workload: %v", *err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

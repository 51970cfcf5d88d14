// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// statusKB returns a field of /proc/<pid>/status given in kB (VmHWM, VmRSS).
func statusKB(t testing.TB, pid int, field string) int {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("read status of %d: %v", pid, err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			if v, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB")); err == nil {
				return v
			}
		}
	}
	t.Fatalf("/proc/%d/status has no %s line:\n%s", pid, field, data)
	return 0
}

// smallHeaders returns n bytes of request header lines, each a distinct
// short name with an empty value ("h1:\r\n"): the most parsed headers, so
// the most memory, for the bytes sent.
func smallHeaders(n int) []byte {
	b := make([]byte, 0, n+16)
	for i := 0; len(b) < n; i++ {
		b = append(b, 'h')
		b = strconv.AppendInt(b, int64(i), 36)
		b = append(b, ":\r\n"...)
	}
	return b
}

// floodAddr spreads the header flood's clients over 4 loopback addresses,
// 25 each, so that all of them are served, under the per-address cap (64).
func floodAddr(i int) string { return fmt.Sprintf("127.0.0.%d", 2+i%4) }

// dialFrom connects to the exporter at url from the loopback address from.
func dialFrom(url, from string) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	return d.Dial("tcp", strings.TrimPrefix(url, "http://"))
}

// resetPeakRSS sets the VmHWM of pid to its current RSS (clear_refs 5,
// Linux 4.0), so that a later VmHWM is the peak since.
func resetPeakRSS(t *testing.T, pid int) {
	t.Helper()
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		t.Fatalf("reset the peak RSS of %d: %v", pid, err)
	}
}

// TestHardening25HeaderFlood sends 100 concurrent requests with 1 MiB of
// small headers each. Go's default header limit (1 MiB) let them take the
// exporter's peak RSS (VmHWM) from about 40 MB to 664-1057 MB; with
// --web.max-header-bytes (8 KiB) each gets 431 after its first 8 KiB, and
// the peak stays under 100 MB. Then 100 connections each hold a head just
// under the limit, made of the smallest header lines, without ending it:
// the peak stays under 100 MB too. The clients come from 4 addresses, so
// that the per-address connection cap (64) turns none away. A scrape with Prometheus' own headers
// still answers 200.
func TestHardening25HeaderFlood(t *testing.T) {
	const clients, size = 100, 1 << 20
	e := Start(t, "--programs=timers")
	pid := e.pid()
	before := statusKB(t, pid, "VmRSS")
	resetPeakRSS(t, pid)
	headers := smallHeaders(size)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		codes = map[string]int{}
	)
	start := time.Now()
	ready := make(chan struct{})
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status := "no answer"
			defer func() { mu.Lock(); codes[status]++; mu.Unlock() }()
			c, err := dialFrom(e.URL, floodAddr(i))
			if err != nil {
				status = "dial: " + err.Error()
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(30 * time.Second))
			<-ready
			// The server answers 431 and closes once the limit is
			// passed: the rest of the write fails, and is not needed.
			go func() {
				c.Write([]byte("GET /metrics HTTP/1.1\r\nHost: x\r\n"))
				c.Write(headers)
				c.Write([]byte("\r\n"))
			}()
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			status = resp.Status
		}()
	}
	close(ready)
	wg.Wait()
	peak := statusKB(t, pid, "VmHWM")
	t.Logf("%d concurrent requests with %d KiB of small headers each, in %v: answers %v; RSS %d MB before, peak (VmHWM) %d MB",
		clients, size>>10, time.Since(start).Round(time.Millisecond), codes, before>>10, peak>>10)
	if peak > 100<<10 {
		t.Errorf("peak RSS %d MB under the header flood, want under 100 MB", peak>>10)
	}
	// Some see the reset before the 431: no other answer.
	for status, n := range codes {
		if status != "431 Request Header Fields Too Large" && status != "no answer" {
			t.Errorf("%d requests answered %s, want 431 or none", n, status)
		}
	}
	if codes["431 Request Header Fields Too Large"] == 0 {
		t.Errorf("no request got 431: %v", codes)
	}

	// Heads held open just under the default limit (8 KiB), never ended:
	// each stays parsed in memory until the header timeout.
	before = statusKB(t, pid, "VmRSS")
	resetPeakRSS(t, pid)
	held := smallHeaders(8<<10 - 200)
	for i := range clients {
		c, err := dialFrom(e.URL, floodAddr(i))
		if err != nil {
			t.Fatalf("dial #%d: %v", i, err)
		}
		defer c.Close()
		c.Write([]byte("GET /metrics HTTP/1.1\r\nHost: x\r\n"))
		c.Write(held)
	}
	time.Sleep(time.Second)
	peak = statusKB(t, pid, "VmHWM")
	t.Logf("%d connections holding %d bytes of small headers each: RSS %d MB before, peak (VmHWM) %d MB", clients, len(held), before>>10, peak>>10)
	if peak > 100<<10 {
		t.Errorf("peak RSS %d MB with %d held heads, want under 100 MB", peak>>10, clients)
	}

	// Prometheus' own request (its Accept header is the largest
	// legitimate one) is served.
	req, err := http.NewRequest("GET", e.URL+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;escaping=allow-utf-8;q=0.5,application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.4,application/openmetrics-text;version=0.0.1;q=0.3,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.2,text/plain;version=0.0.4;q=0.1,*/*;q=0.05")
	req.Header.Set("User-Agent", "Prometheus/3.5.0")
	req.Header.Set("X-Prometheus-Scrape-Timeout-Seconds", "10")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("scrape with Prometheus' headers after the flood: %s", resp.Status)
	}
}

// TestHardening25SilentConnections keeps 3000 connections from loopback
// open that send nothing (each one the exporter closes is opened again a
// second later),
// and scrapes from loopback too, every 100 ms for 12 s (past one header
// timeout, 10 s): every scrape must answer within 2 s. Before, the silent
// connections held all 512 slots of --web.max-connections in rounds of
// 10 s and /metrics got no answer for about 60 s. Now the kernel queues a
// connection for accept only once it has sent something
// (TCP_DEFER_ACCEPT), or 10 s after its handshake; then a silent
// connection takes the place only of idle ones or ones silent for a
// second, and a scraper's, whose request is there, that of a silent one.
func TestHardening25SilentConnections(t *testing.T) {
	connFlood(t, Start(t, "--programs=timers"), "127.0.0.1", nil, true, 12*time.Second)
}

// TestHardening25PartialRequests opens 3000 connections from 127.0.0.2
// that each send the first bytes of a request and nothing more, which
// TCP_DEFER_ACCEPT does not hold back, and scrapes from 127.0.0.1 every
// 100 ms for 8 s: every scrape must answer within 2 s, and the exporter
// holds at most 64 of the 3000. Before, they held all 512 slots for 10 s
// at a time, as silent ones did; now 127.0.0.2 holds at most
// --web.max-connections-per-address (64), its further connections are
// refused, and the scraper's address has room.
func TestHardening25PartialRequests(t *testing.T) {
	e := Start(t, "--programs=timers")
	before := openFDs(t, e.pid())
	held := connFlood(t, e, "127.0.0.2", []byte("GET "), false, 8*time.Second)
	t.Logf("open fds: %d before the flood, %d during it", before, held)
	if held-before > 64+8 {
		t.Errorf("open fds grew by %d with 3000 connections from one address, want at most its cap 64 (and a few of the scrapes')", held-before)
	}
}

// connFlood opens 3000 connections from address from to e, each sending
// first (nothing when nil) and then nothing more, and when again, opens
// each one the exporter closes again a second later; meanwhile it scrapes
// e from 127.0.0.1 every 100 ms for d, each scrape within 2 s. It returns
// the exporter's open file descriptors at the end of the scrapes.
func connFlood(t *testing.T, e *Exporter, from string, first []byte, again bool, d time.Duration) int {
	const conns, bound = 3000, 2 * time.Second
	addr := strings.TrimPrefix(e.URL, "http://")
	dialer := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	stop := make(chan struct{})
	var (
		flood   sync.WaitGroup
		opened  atomic.Int64
		dialErr atomic.Int64
	)
	start := time.Now()
	up := make(chan struct{}, conns)
	for range conns {
		flood.Go(func() {
			once := true
			for {
				c, err := dialer.Dial("tcp", addr)
				if err != nil {
					dialErr.Add(1)
					time.Sleep(10 * time.Millisecond)
				} else {
					opened.Add(1)
				}
				if once {
					up <- struct{}{}
					once = false
				}
				if err == nil {
					// Held until the exporter closes it.
					go func() { <-stop; c.Close() }()
					c.Write(first)
					c.Read(make([]byte, 1))
					c.Close()
				}
				// Opened again a second later: a persistent
				// client, not a SYN flood (which fills the
				// kernel's queues before the exporter sees it).
				if !again {
					return
				}
				select {
				case <-stop:
					return
				case <-time.After(time.Second):
				}
			}
		})
	}
	defer func() { close(stop); flood.Wait() }()
	for range conns {
		<-up
	}
	what := "silent"
	if first != nil {
		what = fmt.Sprintf("%q-sending", first)
	}
	t.Logf("%d %s connections from %s open in %v", conns, what, from, time.Since(start).Round(time.Millisecond))
	client := &http.Client{Timeout: bound, Transport: &http.Transport{DisableKeepAlives: true}}
	var longest time.Duration
	scrapes, failed := 0, 0
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		s := time.Now()
		resp, err := client.Get(e.URL + "/metrics")
		d := time.Since(s)
		scrapes++
		longest = max(longest, d)
		if err != nil {
			failed++
			t.Errorf("scrape %d, %v into the flood: %v after %v", scrapes, time.Since(start).Round(time.Millisecond), err, d.Round(time.Millisecond))
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			failed++
			t.Errorf("scrape %d: %s", scrapes, resp.Status)
		}
	}
	fds := openFDs(t, e.pid())
	ms := e.Scrape()
	t.Logf("%d scrapes from 127.0.0.1 during the flood, %d failed, longest %v; %d %s connections opened (%d dials failed); the exporter evicted %v new ones and refused %v",
		scrapes, failed, longest.Round(time.Millisecond), opened.Load(), what, dialErr.Load(),
		ms.Value("kernel_exporter_http_connections_evicted_total", L("state", "new")), ms.Value("kernel_exporter_http_connections_refused_total", nil))
	if longest > bound {
		t.Errorf("longest scrape %v during the flood, want at most %v", longest, bound)
	}
	return fds
}

// scrapeHash8 is scrapePassword's bcrypt hash at cost 8.
const scrapeHash8 = "$2a$08$ZnYFRAt7ztbhLTyHFQE/O.H/xdt./Sd.Mb9krjlPA33GTfcmmGCb6"

// TestHardening25AuthFailures keeps 250 requests with wrong passwords in
// flight from 127.0.0.2 (each answered one is sent again) against an
// exporter with basic auth, and checks that the first request with the
// right password, from 127.0.0.1, answers within 1 s. Before, every check
// ran bcrypt, one at a time (exporter-toolkit): the right password waited
// for the 250 wrong ones (2.8 s at cost 4; more than 10 s at cost 8). Now failed checks are limited per
// address (5, then one a second; the rest get 429 without bcrypt) and run
// one at a time per address, so the first right check waits for at most
// one wrong one, and then is cached.
//
// The bound: two bcrypt checks at cost 8 (15-55 ms each here), plus the
// scrape itself on 2 CPUs that also serve the attacker's requests (about
// 1,300 answers of 429 a second) and run its 250 clients: scrapes with
// the password cached took 30-230 ms meanwhile. (The hash is of cost 8:
// at cost 4, 250 checks one after another took about 500 ms, too close
// to a bound to tell.)
func TestHardening25AuthFailures(t *testing.T) {
	const attackers, bound = 250, time.Second
	cfg := filepath.Join(t.TempDir(), "web.yml")
	if err := os.WriteFile(cfg, []byte("basic_auth_users:\n  prom: "+scrapeHash8+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd, url, logs := spawn(t, nil, "--programs=timers", "--web.config.file="+cfg)
	waitPort(t, url, logs)
	e := &Exporter{t: t, cmd: cmd, URL: url, logs: logs}
	from := func(ip string, conns int) *http.Client {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: conns}}
	}
	get := func(c *http.Client, pass string) (int, error) {
		req, err := http.NewRequest("GET", e.URL+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		if pass != "" {
			req.SetBasicAuth("prom", pass)
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	bad := from("127.0.0.2", attackers)
	var (
		stop  = make(chan struct{})
		wg    sync.WaitGroup
		codes sync.Map
	)
	for i := range attackers {
		wg.Go(func() {
			for j := 0; ; j++ {
				select {
				case <-stop:
					return
				default:
				}
				code, err := get(bad, fmt.Sprintf("wrong-%d-%d", i, j))
				if err != nil {
					code = -1
				}
				n, _ := codes.LoadOrStore(code, new(atomic.Int64))
				n.(*atomic.Int64).Add(1)
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()
	time.Sleep(2 * time.Second)

	good := from("127.0.0.1", 1)
	// Its connection first (a request without credentials: 401, no
	// bcrypt), so that what is timed is the check, not the connection
	// among the attacker's (TestHardening25SilentConnections times that).
	if code, err := get(good, ""); err != nil || code != 401 {
		t.Fatalf("request without credentials: %d, %v", code, err)
	}
	var times []time.Duration
	for range 5 {
		start := time.Now()
		code, err := get(good, scrapePassword)
		times = append(times, time.Since(start).Round(time.Millisecond))
		if err != nil || code != 200 {
			t.Fatalf("right password during the attack: %d, %v", code, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	counts := map[int]int64{}
	codes.Range(func(k, v any) bool { counts[k.(int)] = v.(*atomic.Int64).Load(); return true })
	t.Logf("%d wrong attempts in flight: right password answered in %v (the first uncached); wrong ones: %v (status: count, -1 errors)", attackers, times, counts)
	if times[0] > bound {
		t.Errorf("first right password answered in %v during the attack, want at most %v", times[0], bound)
	}
}

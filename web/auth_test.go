// SPDX-License-Identifier: Apache-2.0

package web

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// authClientFrom returns an HTTP client whose connections come from the
// loopback address from (127.0.0.x).
func authClientFrom(from string, conns int) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: conns}}
}

// promWebConfig writes a web config with basic auth of user prom with
// password pass (bcrypt cost 4) and returns its path.
func promWebConfig(t *testing.T, pass string) string {
	t.Helper()
	hash, err := bcrypt.GenerateFromPassword([]byte(pass), 4)
	if err != nil {
		t.Fatal(err)
	}
	web := filepath.Join(t.TempDir(), "web.yml")
	if err := os.WriteFile(web, []byte("basic_auth_users:\n  prom: "+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return web
}

// authGet sends GET /-/healthy as user prom with pass and returns the
// response (body read and closed).
func authGet(t *testing.T, c *http.Client, addr, pass string) (*http.Response, error) {
	req, err := http.NewRequest("GET", "http://"+addr+"/-/healthy", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("prom", pass)
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, nil
}

// TestHardening25AuthFailures keeps 250 requests with wrong passwords in
// flight from 127.0.0.2 and checks that a first request with the right
// password from 127.0.0.1 is served (the attackers run in this process
// too, so the time is only logged: integration's
// TestHardening25AuthFailures bounds it),
// that 127.0.0.2's failed checks stay within 5 and one a second while the
// others get 429 with Retry-After and cost no bcrypt, and that once the
// password was right it is served from the cache, even from the limited
// address.
func TestHardening25AuthFailures(t *testing.T) {
	const attackers = 250
	web := promWebConfig(t, "right")
	o := opts("/metrics")
	o.MaxConnectionsPerAddress = o.MaxConnections // the auth limit alone
	_, addr := serveLocal(t, o, web)
	attack := time.Now()

	bad := authClientFrom("127.0.0.2", attackers)
	var (
		stop                    = make(chan struct{})
		wg                      sync.WaitGroup
		n401, n429, noRetryHint atomic.Int64
	)
	for i := range attackers {
		wg.Go(func() {
			for j := 0; ; j++ {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := authGet(t, bad, addr, fmt.Sprintf("wrong-%d-%d", i, j))
				if err != nil {
					continue
				}
				switch resp.StatusCode {
				case 401:
					n401.Add(1)
				case 429:
					n429.Add(1)
					if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s < 1 {
						noRetryHint.Add(1)
					}
				}
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()
	waitFor(t, "wrong attempts answered", func() bool { return n429.Load() > attackers })

	good := authClientFrom("127.0.0.1", 1)
	start := time.Now()
	resp, err := authGet(t, good, addr, "right")
	first := time.Since(start)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("right password during the attack: %v %v", resp, err)
	}
	start = time.Now()
	resp, err = authGet(t, good, addr, "right")
	again := time.Since(start)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("right password again: %v %v", resp, err)
	}
	// From the attacker's address, whose failures are used up: cached.
	resp, err = authGet(t, bad, addr, "right")
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("right password from the limited address once it was right: %v %v", resp, err)
	}
	t.Logf("%d wrong attempts in flight: right password answered in %v, then %v (cached); wrong ones so far: %d got 401, %d got 429",
		attackers, first.Round(time.Millisecond), again.Round(time.Millisecond), n401.Load(), n429.Load())
	if n := noRetryHint.Load(); n > 0 {
		t.Errorf("%d answers 429 without a Retry-After of 1 s or more", n)
	}
	// 127.0.0.2's failed checks: 5 at once, then about one a second.
	if f, limit := n401.Load(), int64(AuthFailureBurst+AuthFailureRate*time.Since(attack).Seconds()+1); f > limit {
		t.Errorf("%d failed checks (bcrypt) from one address, want at most %d", f, limit)
	}
}

// TestAuthUnknownUserLimited checks that an unknown user's attempts are
// checked (against a hash no one knows: 401) and limited like wrong
// passwords: 5, then 429.
func TestAuthUnknownUserLimited(t *testing.T) {
	web := promWebConfig(t, "right")
	_, addr := serveLocal(t, opts("/metrics"), web)
	c := authClientFrom("127.0.0.3", 1)
	codes := map[int]int{}
	for i := range 8 {
		req, _ := http.NewRequest("GET", "http://"+addr+"/-/healthy", nil)
		req.SetBasicAuth("nobody", "guess"+strconv.Itoa(i))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		codes[resp.StatusCode]++
	}
	if codes[401] < AuthFailureBurst || codes[401] > AuthFailureBurst+1 || codes[429] < 2 {
		t.Errorf("8 attempts of an unknown user: %v, want %d (or one more) 401 and the rest 429", codes, AuthFailureBurst)
	}
}

// SPDX-License-Identifier: Apache-2.0

package web

import (
	"crypto/rand"
	"crypto/sha256"
	"math"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/crypto/bcrypt"
	"golang.org/x/time/rate"
)

// Bounds of basic-auth checking (docs/security.md).
const (
	// AuthFailureBurst and AuthFailureRate bound the password checks
	// (bcrypt) that fail, per client address (see addrKey): a burst of
	// 5, then one a second. A check takes a token before bcrypt runs and
	// gives it back when the password is right; a client with no token
	// gets 429 with Retry-After and costs no bcrypt. A Prometheus with a
	// wrong password (one check per scrape interval) is never limited.
	AuthFailureBurst = 5
	AuthFailureRate  = 1.0 // per second
	// authClients bounds the addresses whose failures are remembered
	// (least recently failed first out; a forgotten one starts with a
	// full burst).
	authClients = 4096
	// authCacheSize bounds the successful checks remembered: a
	// (user, hash, password) whose check passed skips bcrypt and the
	// failure limit until it is pushed out. Only a SHA-256 of the three
	// is kept, never the password.
	authCacheSize = 64
)

// authHandler serves the web config's response headers and basic auth in
// front of next, as exporter-toolkit does, with the cost of failed
// attempts bounded: per client address by a token bucket
// (AuthFailureBurst, AuthFailureRate) and one check at a time, and
// overall by running at most half the CPUs' worth of bcrypt checks at once
// (waiting ones wait their turn, as long as their request lasts).
// Successful checks are cached, so a scraper whose password was right
// once is neither limited nor slowed by others' failures; its first check
// waits for at most one check of each other address.
type authHandler struct {
	next     http.Handler
	src      *webConfigSource
	rejected *prometheus.CounterVec // reason: wrong, rate_limited

	good    *lru.Cache[[sha256.Size]byte, struct{}]
	clients *lru.Cache[string, *authClient]
	mu      sync.Mutex    // orders a client's lookup and reservation
	bcrypt  chan struct{} // one per bcrypt check running; waiters queue in order
}

// authClient is what authHandler keeps of a client address.
type authClient struct {
	failures *rate.Limiter
	checking chan struct{} // holds one while a check of this address runs
}

func newAuthHandler(next http.Handler, src *webConfigSource, rejected *prometheus.CounterVec) *authHandler {
	good, _ := lru.New[[sha256.Size]byte, struct{}](authCacheSize)
	clients, _ := lru.New[string, *authClient](authClients)
	return &authHandler{next: next, src: src, rejected: rejected, good: good, clients: clients,
		bcrypt: make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2))}
}

func (a *authHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	cfg, err := a.src.get()
	if err != nil {
		http.Error(w, http.StatusText(http.StatusInternalServerError), http.StatusInternalServerError)
		return
	}
	for k, v := range cfg.headers {
		w.Header().Set(k, v)
	}
	if len(cfg.users) == 0 {
		a.next.ServeHTTP(w, r)
		return
	}
	user, pass, ok := r.BasicAuth()
	if !ok {
		unauthorized(w)
		return
	}
	hash, known := cfg.users[user]
	if !known {
		hash = fakeHash(cfg.fakeCost)
	}
	key := checkKey(user, hash, pass)
	if _, ok := a.good.Get(key); ok && known {
		a.next.ServeHTTP(w, r)
		return
	}
	// A check that costs a bcrypt: take a token of the client's address.
	client := ClientKey(r)
	a.mu.Lock()
	c, ok := a.clients.Get(client)
	if !ok {
		c = &authClient{failures: rate.NewLimiter(AuthFailureRate, AuthFailureBurst), checking: make(chan struct{}, 1)}
		a.clients.Add(client, c)
	}
	now := time.Now()
	res := c.failures.ReserveN(now, 1)
	a.mu.Unlock()
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		a.count("rate_limited")
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(d.Seconds()))))
		http.Error(w, http.StatusText(http.StatusTooManyRequests), http.StatusTooManyRequests)
		return
	}
	// One check of an address at a time, then one of the bcrypt slots:
	// a check from another address waits for at most one check of each
	// address ahead of it.
	if !acquire(r, c.checking) {
		res.CancelAt(time.Now())
		return
	}
	if !acquire(r, a.bcrypt) {
		<-c.checking
		res.CancelAt(time.Now())
		return
	}
	err = bcrypt.CompareHashAndPassword(hash, []byte(pass))
	<-a.bcrypt
	<-c.checking
	if err != nil || !known {
		a.count("wrong")
		unauthorized(w)
		return
	}
	res.CancelAt(time.Now()) // not a failure: the token goes back
	a.good.Add(key, struct{}{})
	a.next.ServeHTTP(w, r)
}

// fakeHashes holds, per bcrypt cost, the hash of a password no one knows:
// an unknown user's password is checked against the one of the dearest
// cost of the web config, so that failing takes as long as for a known
// user (no telling users apart by time).
var fakeHashes sync.Map // cost: *fakeHashOnce

type fakeHashOnce struct {
	once sync.Once
	hash []byte
}

// fakeHash returns the hash of cost, made at its first use.
func fakeHash(cost int) []byte {
	v, _ := fakeHashes.LoadOrStore(cost, &fakeHashOnce{})
	f := v.(*fakeHashOnce)
	f.once.Do(func() {
		pw := make([]byte, 32)
		rand.Read(pw)
		f.hash, _ = bcrypt.GenerateFromPassword(pw, cost)
	})
	return f.hash
}

// acquire takes a place in sem, waiting as long as r lasts; false when r
// ended first.
func acquire(r *http.Request, sem chan struct{}) bool {
	select {
	case sem <- struct{}{}:
		return true
	case <-r.Context().Done():
		return false
	}
}

// checkKey identifies a (user, hash, password) check in the cache: a
// changed password hash makes a new key.
func checkKey(user string, hash []byte, pass string) [sha256.Size]byte {
	h := sha256.New()
	for _, s := range [][]byte{[]byte(user), hash, []byte(pass)} {
		h.Write([]byte(strconv.Itoa(len(s)) + ":"))
		h.Write(s)
	}
	var k [sha256.Size]byte
	h.Sum(k[:0])
	return k
}

func (a *authHandler) count(reason string) {
	if a.rejected != nil {
		a.rejected.WithLabelValues(reason).Inc()
	}
}

func unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", "Basic")
	http.Error(w, http.StatusText(http.StatusUnauthorized), http.StatusUnauthorized)
}

// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

// Decoder errors are counted per config, metric and decoder (see
// decoderErrors and kernel_exporter_decoder_errors_total) and logged: each
// distinct error once per config and decoder, and at most
// decodeLogBurst lines per config in any decodeLogPer window, so that a map
// full of bad keys cannot flood the log. Error texts quote map bytes only as
// a short hex token (decoder.Token).
const (
	// decodeLogSeen bounds the (config, decoder, error text) triples
	// remembered as already logged; the oldest are forgotten first.
	decodeLogSeen = 4096
	// decodeLogConfigs bounds the configs whose rate limit is tracked.
	decodeLogConfigs = 1024
	// decodeLogBurst lines per config per decodeLogPer, at most.
	decodeLogBurst = 5
	decodeLogPer   = time.Minute
)

// decoderErrors counts the failures of one decoder name in a metric's label
// chains. The slice holding them is built with the metric and never
// changes, so scrapes read the counts without a lock.
type decoderErrors struct {
	decoder string
	n       atomic.Uint64
}

type decodeLogKey struct{ config, decoder, msg string }

// decodeLogger is the process-wide state of decoder error logging.
type decodeLogger struct {
	mu      sync.Mutex
	seen    *lru.Cache[decodeLogKey, struct{}]
	budgets *lru.Cache[string, *logBudget]
	now     func() time.Time
}

// logBudget is a token bucket: decodeLogBurst tokens, refilled at
// decodeLogBurst per decodeLogPer.
type logBudget struct {
	tokens float64
	last   time.Time
}

func newDecodeLogger() *decodeLogger {
	seen, err := lru.New[decodeLogKey, struct{}](decodeLogSeen)
	if err != nil {
		panic(err) // only for a non-positive size
	}
	budgets, err := lru.New[string, *logBudget](decodeLogConfigs)
	if err != nil {
		panic(err)
	}
	return &decodeLogger{seen: seen, budgets: budgets, now: time.Now}
}

var decodeLog = newDecodeLogger()

// log writes one warning to slog.Default() for a decoder error, unless the
// same error of the same decoder was already logged for this config or the
// config's budget of lines is spent. It reports whether it logged.
func (l *decodeLogger) log(config, metric, decoderName string, err error) bool {
	msg := err.Error()
	key := decodeLogKey{config, decoderName, msg}
	l.mu.Lock()
	if l.seen.Contains(key) {
		l.mu.Unlock()
		return false
	}
	now := l.now()
	b, ok := l.budgets.Get(config)
	if !ok {
		b = &logBudget{tokens: decodeLogBurst, last: now}
		l.budgets.Add(config, b)
	}
	if dt := now.Sub(b.last); dt > 0 {
		b.tokens = min(decodeLogBurst, b.tokens+decodeLogBurst*dt.Seconds()/decodeLogPer.Seconds())
	}
	b.last = now
	if b.tokens < 1 {
		l.mu.Unlock()
		return false
	}
	b.tokens--
	l.seen.Add(key, struct{}{})
	l.mu.Unlock()
	slog.Default().Warn("decoder failed, map key dropped",
		"config", config, "metric", metric, "decoder", decoderName, "err", msg)
	return true
}

// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"fmt"
	"testing"
	"time"
)

// TestDecodeLogRateLimit checks the per-config budget of log lines and the
// memory of errors already logged.
func TestDecodeLogRateLimit(t *testing.T) {
	logs := captureLog(t)
	l := newDecodeLogger()
	now := time.Unix(1000, 0)
	l.now = func() time.Time { return now }
	errN := func(i int) error { return fmt.Errorf("ksym: error %d", i) }
	logged := 0
	for i := range 20 {
		if l.log("a", "m", "ksym", errN(i)) {
			logged++
		}
	}
	if logged != decodeLogBurst || logs.len() != decodeLogBurst {
		t.Fatalf("logged %d (%d lines), want %d", logged, logs.len(), decodeLogBurst)
	}
	// Another config has its own budget; the same error of another decoder
	// or config is another line.
	if !l.log("b", "m", "ksym", errN(0)) || !l.log("b", "m", "kstack", errN(0)) {
		t.Error("config b was limited by config a")
	}
	// One budget line comes back every decodeLogPer/decodeLogBurst.
	now = now.Add(decodeLogPer / decodeLogBurst)
	if l.log("a", "m", "ksym", errN(0)) {
		t.Error("an error already logged was logged again")
	}
	if !l.log("a", "m", "ksym", errN(100)) {
		t.Error("no line after the budget refilled")
	}
	if l.log("a", "m", "ksym", errN(101)) {
		t.Error("more than the refilled budget")
	}
	// The set of logged errors is bounded.
	for i := range 2 * decodeLogSeen {
		now = now.Add(decodeLogPer)
		l.log("c", "m", "ksym", errN(i))
	}
	if n := l.seen.Len(); n != decodeLogSeen {
		t.Errorf("seen holds %d errors, want %d", n, decodeLogSeen)
	}
}

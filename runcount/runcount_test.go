// SPDX-License-Identifier: Apache-2.0

package runcount

import (
	"testing"
	"time"

	"github.com/kernel-exporter/kernel_exporter/collector"
)

// TestMessage checks the line the commands print, with a name that is not
// printable made safe.
func TestMessage(t *testing.T) {
	i := Idle{Config: "c", Program: "never", Section: "tracepoint/syscalls/sys_enter_acct"}
	want := "program never (section tracepoint/syscalls/sys_enter_acct) ran 0 times in the 1s window (BPF run count): " +
		"nothing triggered its hook; check that the hook is the one the workload reaches"
	if got := i.Message("in the 1s window"); got != want {
		t.Errorf("Message:\n got %s\nwant %s", got, want)
	}
	i.Program = "a\x1b[2Jb"
	if got := i.String(); got != `program a\x1b[2Jb (section tracepoint/syscalls/sys_enter_acct)` {
		t.Errorf("String with an escape sequence = %q", got)
	}
}

// TestRound checks the lengths shown.
func TestRound(t *testing.T) {
	for d, want := range map[time.Duration]time.Duration{
		35_400 * time.Microsecond: 35 * time.Millisecond,
		1_043 * time.Millisecond:  time.Second,
		1_260 * time.Millisecond:  1300 * time.Millisecond,
		10_400 * time.Millisecond: 10 * time.Second,
	} {
		if got := Round(d); got != want {
			t.Errorf("Round(%v) = %v, want %v", d, got, want)
		}
	}
}

// TestIdleWithoutStatistics checks that a window without statistics says
// nothing: no count moves then.
func TestIdleWithoutStatistics(t *testing.T) {
	w := &Window{status: &collector.Status{}}
	w.Mark()
	if idle := w.Idle(); idle != nil {
		t.Errorf("Idle without statistics = %v, want nil", idle)
	}
	w.Close()
}

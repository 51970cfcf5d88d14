// SPDX-License-Identifier: Apache-2.0

package spans

import (
	"time"

	"golang.org/x/sys/unix"
)

// monotonicNow is CLOCK_MONOTONIC in ns, the clock of bpf_ktime_get_ns. A
// variable for tests.
var monotonicNow = func() uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return uint64(ts.Nano())
}

// wallTime converts a CLOCK_MONOTONIC time in ns to wall-clock time: now
// minus how long ago it was. Both clocks are read together, so the error is
// the few hundred ns between the two reads (and any wall-clock step since
// ts, which CLOCK_MONOTONIC does not see).
func wallTime(ts uint64) time.Time {
	now := time.Now()
	mono := monotonicNow()
	// Signed: a timestamp from the future (a clock read on another CPU an
	// instant later) stays a small positive offset.
	return now.Add(-time.Duration(int64(mono - ts)))
}

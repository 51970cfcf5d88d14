// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// TestProgramSyscalls sends signal 0 with kill() to a pid that cannot exist
// n times and checks the syscalls program counted exactly n kill() calls
// failing with ESRCH, and at least n kill() calls in all.
//
// Exact: every kill() returns through raw_syscalls:sys_exit, whose program
// has updated the map before the syscall returns to us; pid 2^30 is above
// the largest pid_max (2^22), so each call fails with ESRCH. Nothing else on
// a test machine sends signals to nonexistent pids.
func TestProgramSyscalls(t *testing.T) {
	const (
		n       = 1000
		noPid   = 1 << 30
		errors_ = "kernel_syscall_errors_total"
		total   = "kernel_syscalls_total"
	)
	e := Start(t, "--programs=syscalls")
	before := e.Scrape()
	if v := before.Value("kernel_exporter_config_up", L("config", "syscalls")); v != 1 {
		t.Fatalf("config_up{config=syscalls} = %v, want 1\n%s", v, e.Logs())
	}
	for i := range n {
		if err := unix.Kill(noPid, 0); !errors.Is(err, unix.ESRCH) {
			t.Fatalf("kill(%d, 0) #%d = %v, want ESRCH", noPid, i, err)
		}
	}
	after := e.Scrape()

	esrch := L("syscall", "kill", "errno", "ESRCH")
	if d := after.Value(errors_, esrch) - before.Value(errors_, esrch); d != n {
		t.Errorf("%s{syscall=kill,errno=ESRCH} moved by %v, want exactly %d\n%s", errors_, d, n, after.seriesDump(errors_))
	}
	if d := after.Value(total, L("syscall", "kill")) - before.Value(total, L("syscall", "kill")); d < n {
		t.Errorf("%s{syscall=kill} moved by %v, want >= %d", total, d, n)
	}
	// Reading the exporter's HTTP answer took read() calls of this process:
	// the label set of a busy syscall is there too.
	if v := after.Value(total, L("syscall", "read")); v < 1 {
		t.Errorf("%s{syscall=read} = %v, want >= 1\n%s", total, v, after.seriesDump(total))
	}
}

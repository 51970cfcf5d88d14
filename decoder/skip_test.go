package decoder

import (
	"fmt"
	"os"
	"testing"
)

// skipOrFail ends t because something this machine should provide (cgroup2,
// /proc/kallsyms addresses, a block device, network interfaces) is
// missing: SKIP with the reason, or a failure under CI=true, where CI
// machines have all of it and a test must run, never skip.
func skipOrFail(t testing.TB, format string, args ...any) {
	t.Helper()
	reason := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s; CI=true forbids skipping", reason)
		return
	}
	t.Skip(reason)
}

// skipTB records how skipOrFail ended a test, without ending the calling
// goroutine as the real Skip and Fatalf do.
type skipTB struct {
	testing.TB
	skipped, failed string
}

func (s *skipTB) Helper()                        {}
func (s *skipTB) Skip(args ...any)               { s.skipped = fmt.Sprint(args...) }
func (s *skipTB) Fatalf(format string, a ...any) { s.failed = fmt.Sprintf(format, a...) }

func TestSkipOrFail(t *testing.T) {
	t.Setenv("CI", "")
	var tb skipTB
	skipOrFail(&tb, "no cgroup2 mount in %s", "/proc/self/mountinfo")
	if tb.skipped != "no cgroup2 mount in /proc/self/mountinfo" || tb.failed != "" {
		t.Errorf("outside CI: skipped %q, failed %q; want a skip with the reason", tb.skipped, tb.failed)
	}
	t.Setenv("CI", "true")
	tb = skipTB{}
	skipOrFail(&tb, "no cgroup2 mount in %s", "/proc/self/mountinfo")
	if tb.failed != "no cgroup2 mount in /proc/self/mountinfo; CI=true forbids skipping" || tb.skipped != "" {
		t.Errorf("CI=true: skipped %q, failed %q; want a failure with the reason", tb.skipped, tb.failed)
	}
}

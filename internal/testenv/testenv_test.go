// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"fmt"
	"testing"
)

// skipTB records how a helper ended a test, without ending the calling
// goroutine as the real Skip and Fatal do.
type skipTB struct {
	testing.TB
	skipped, failed string
}

func (s *skipTB) Helper()                        {}
func (s *skipTB) Skip(args ...any)               { s.skipped = fmt.Sprint(args...) }
func (s *skipTB) Fatalf(format string, a ...any) { s.failed = fmt.Sprintf(format, a...) }

// TestSkipHelpers checks that a missing CI prerequisite skips outside CI
// and fails under CI=true, and that a kernel feature CI kernels may lack
// skips in both, always with the reason.
func TestSkipHelpers(t *testing.T) {
	for _, ci := range []string{"", "true"} {
		t.Setenv("CI", ci)
		var tb skipTB
		SkipOrFail(&tb, "no %s in PATH", "taskset")
		if ci == "true" {
			if tb.failed != "no taskset in PATH; CI=true forbids skipping" || tb.skipped != "" {
				t.Errorf("CI=%q: skipOrFail failed %q, skipped %q; want a failure", ci, tb.failed, tb.skipped)
			}
		} else if tb.skipped != "no taskset in PATH" || tb.failed != "" {
			t.Errorf("CI=%q: skipOrFail failed %q, skipped %q; want a skip", ci, tb.failed, tb.skipped)
		}

		tb = skipTB{}
		SkipLacking(&tb, "kprobes", "config %s down", "funccount")
		if want := "this kernel or machine lacks kprobes: config funccount down"; tb.skipped != want || tb.failed != "" {
			t.Errorf("CI=%q: SkipLacking(kprobes) failed %q, skipped %q; want skipped %q", ci, tb.failed, tb.skipped, want)
		}

		tb = skipTB{}
		SkipLacking(&tb, "btf", "no /sys/kernel/btf/vmlinux")
		const btf = "this kernel or machine lacks btf: no /sys/kernel/btf/vmlinux"
		if ci == "true" {
			if tb.failed != btf+"; CI=true forbids skipping" || tb.skipped != "" {
				t.Errorf("CI=%q: SkipLacking(btf) failed %q, skipped %q; want a failure", ci, tb.failed, tb.skipped)
			}
		} else if tb.skipped != btf || tb.failed != "" {
			t.Errorf("CI=%q: SkipLacking(btf) failed %q, skipped %q; want a skip", ci, tb.failed, tb.skipped)
		}
	}
}

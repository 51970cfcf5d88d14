// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
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

// TestHostPIDNamespace: this test process is in the host's namespace
// (make test runs there), and a child started by unshare -p in a new one
// is told why it cannot run the BPF tests.
func TestHostPIDNamespace(t *testing.T) {
	if os.Getenv("KE_TESTENV_PIDNS_CHILD") == "1" {
		err := HostPIDNamespace()
		fmt.Printf("child: %v\n", err)
		return
	}
	if err := HostPIDNamespace(); err != nil {
		t.Fatalf("make test runs in the host's PID namespace: %v", err)
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil || os.Geteuid() != 0 {
		SkipOrFail(t, "a new PID namespace needs root and unshare (util-linux): %v", err)
	}
	cmd := exec.Command(unshare, "--pid", "--fork", "--mount-proc", os.Args[0], "-test.run=^TestHostPIDNamespace$", "-test.v")
	cmd.Env = append(os.Environ(), "KE_TESTENV_PIDNS_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("unshare: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "child: this process is in a PID namespace of its own") ||
		!strings.Contains(string(out), "--pid=host") {
		t.Errorf("in a new PID namespace, HostPIDNamespace said:\n%s", out)
	}
	if err := hostPIDNamespace("/nonexistent/ns/pid"); err == nil || !strings.Contains(err.Error(), "cannot tell") {
		t.Errorf("missing file: %v", err)
	}
}

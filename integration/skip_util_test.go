package integration

// How a test that cannot run here ends. A test never passes without
// having checked what it is about: it ends as SKIP with the reason. Under
// CI=true, what every CI machine of this project has (root, the tools of
// make test-deps, and the kernel features in ciKernelFeatures) must be
// there: its absence fails the test instead of skipping it.

import (
	"fmt"
	"os"
	"testing"
)

// ciKernelFeatures are the kernel features of every kernel CI runs on
// (the host and the make test-kernels guests). Kprobes, fentry/fexit and a
// hardware PMU are not among them: CI hosts may lack those, and the matrix
// guests pin what they have with KE_MATRIX_EXPECT.
var ciKernelFeatures = map[string]bool{
	"tracepoint":           true,
	"tp_btf":               true,
	"raw_tp":               true,
	"uprobe":               true,
	"software perf events": true,
	"btf":                  true,
}

func underCI() bool { return os.Getenv("CI") == "true" }

// skipOrFail ends t because a prerequisite that CI machines have is
// missing here: SKIP with the reason, or under CI=true a failure.
func skipOrFail(t testing.TB, format string, args ...any) {
	t.Helper()
	reason := fmt.Sprintf(format, args...)
	if underCI() {
		t.Fatalf("%s; CI=true forbids skipping", reason)
		return
	}
	t.Skip(reason)
}

// skipLacking ends t because this kernel or machine lacks feature: SKIP
// with the reason. A feature of ciKernelFeatures is a prerequisite CI
// machines have (skipOrFail).
func skipLacking(t testing.TB, feature, format string, args ...any) {
	t.Helper()
	reason := fmt.Sprintf("this kernel or machine lacks %s: %s", feature, fmt.Sprintf(format, args...))
	if ciKernelFeatures[feature] {
		skipOrFail(t, "%s", reason)
		return
	}
	t.Skip(reason)
}

// notRootReason is why every test of the package skips without root; see
// TestIntegrationNeedsRoot.
const notRootReason = "integration tests need root (BPF programs, namespaces, cgroups): not root, so every test of this package is skipped"

// TestIntegrationNeedsRoot is the only test TestMain runs without root
// (outside CI), so that the run reports a SKIP with the reason rather than
// an "ok" with nothing run. With root it checks what TestMain prepared.
func TestIntegrationNeedsRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip(notRootReason)
	}
	if st, err := os.Stat(binary); err != nil || !st.Mode().IsRegular() || st.Mode().Perm()&0o100 == 0 {
		t.Fatalf("the exporter binary %q is not an executable file: %v", binary, err)
	}
}

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
		skipOrFail(&tb, "no %s in PATH", "taskset")
		if ci == "true" {
			if tb.failed != "no taskset in PATH; CI=true forbids skipping" || tb.skipped != "" {
				t.Errorf("CI=%q: skipOrFail failed %q, skipped %q; want a failure", ci, tb.failed, tb.skipped)
			}
		} else if tb.skipped != "no taskset in PATH" || tb.failed != "" {
			t.Errorf("CI=%q: skipOrFail failed %q, skipped %q; want a skip", ci, tb.failed, tb.skipped)
		}

		tb = skipTB{}
		skipLacking(&tb, "kprobes", "config %s down", "funccount")
		if want := "this kernel or machine lacks kprobes: config funccount down"; tb.skipped != want || tb.failed != "" {
			t.Errorf("CI=%q: skipLacking(kprobes) failed %q, skipped %q; want skipped %q", ci, tb.failed, tb.skipped, want)
		}

		tb = skipTB{}
		skipLacking(&tb, "btf", "no /sys/kernel/btf/vmlinux")
		const btf = "this kernel or machine lacks btf: no /sys/kernel/btf/vmlinux"
		if ci == "true" {
			if tb.failed != btf+"; CI=true forbids skipping" || tb.skipped != "" {
				t.Errorf("CI=%q: skipLacking(btf) failed %q, skipped %q; want a failure", ci, tb.failed, tb.skipped)
			}
		} else if tb.skipped != btf || tb.failed != "" {
			t.Errorf("CI=%q: skipLacking(btf) failed %q, skipped %q; want a skip", ci, tb.failed, tb.skipped)
		}
	}
}

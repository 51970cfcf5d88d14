// SPDX-License-Identifier: Apache-2.0

// Package testenv decides how a test ends when this machine lacks what it
// needs. A test never passes without having checked what it is about: it
// ends as SKIP with the reason. Under CI=true, what every CI machine of this
// project has (root, the tools of make test-deps, and the kernel features in
// CIKernelFeatures) must be there: its absence fails the test instead.
package testenv

import (
	"fmt"
	"os"
	"testing"
)

// CIKernelFeatures are the kernel features of every kernel CI runs on (the
// host and the make test-kernels guests). Kprobes, fentry/fexit and a
// hardware PMU are not among them: CI hosts may lack those, and the matrix
// guests pin what they have with KE_MATRIX_EXPECT.
var CIKernelFeatures = map[string]bool{
	"tracepoint":           true,
	"tp_btf":               true,
	"raw_tp":               true,
	"uprobe":               true,
	"software perf events": true,
	"btf":                  true,
}

// UnderCI reports whether the tests run in CI (CI=true).
func UnderCI() bool { return os.Getenv("CI") == "true" }

// SkipOrFail ends t because a prerequisite that CI machines have is
// missing here: SKIP with the reason, or under CI=true a failure.
func SkipOrFail(t testing.TB, format string, args ...any) {
	t.Helper()
	reason := fmt.Sprintf(format, args...)
	if UnderCI() {
		t.Fatalf("%s; CI=true forbids skipping", reason)
		return
	}
	t.Skip(reason)
}

// SkipLacking ends t because this kernel or machine lacks feature: SKIP
// with the reason. A feature of CIKernelFeatures is a prerequisite CI
// machines have (SkipOrFail).
func SkipLacking(t testing.TB, feature, format string, args ...any) {
	t.Helper()
	reason := fmt.Sprintf("this kernel or machine lacks %s: %s", feature, fmt.Sprintf(format, args...))
	if CIKernelFeatures[feature] {
		SkipOrFail(t, "%s", reason)
		return
	}
	t.Skip(reason)
}

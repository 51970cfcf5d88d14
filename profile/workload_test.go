// SPDX-License-Identifier: Apache-2.0

package profile

import (
	"os"
	"testing"

	"github.com/kernel-exporter/kernel_exporter/internal/proftest"
	"github.com/kernel-exporter/kernel_exporter/internal/testenv"
)

// needRoot ends t unless it runs as root (BPF programs, perf events).
func needRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.SkipOrFail(t, "profiles need root (BPF programs, perf events)")
	}
}

// startWorkload starts testdata/workload.c with args (see proftest).
func startWorkload(t testing.TB, args ...string) *proftest.Workload {
	t.Helper()
	return proftest.Start(t, proftest.Build(t, "testdata/workload.c"), args...)
}

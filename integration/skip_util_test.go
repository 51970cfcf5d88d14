// SPDX-License-Identifier: Apache-2.0

package integration

// How a test that cannot run here ends: see internal/testenv.

import (
	"os"
	"testing"
)

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

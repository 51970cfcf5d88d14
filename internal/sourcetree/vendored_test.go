// SPDX-License-Identifier: Apache-2.0

package sourcetree

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kernel-exporter/kernel_exporter/internal/testenv"
)

// libbpfDeb is the Debian package and version include/bpf/ was taken from
// (include/bpf/COPYING), the libbpf-dev make bpf-deps installs on Debian 12.
const libbpfDeb, libbpfVersion = "libbpf-dev", "1:1.1.2-0+deb12u1"

// TestVendoredLibbpf: the headers in include/bpf/ are exactly libbpf's, as
// the libbpf-dev installed here has them in /usr/include/bpf, and
// include/bpf/COPYING names each of them and the version.
func TestVendoredLibbpf(t *testing.T) {
	root, files := repoFiles(t)
	var vendored []string
	for _, f := range files {
		if strings.HasPrefix(f, "include/bpf/") && strings.HasSuffix(f, ".h") {
			vendored = append(vendored, f)
		}
	}
	if len(vendored) != 5 {
		t.Fatalf("include/bpf/ holds %d headers, want libbpf's 5: %v", len(vendored), vendored)
	}
	copying, err := os.ReadFile(filepath.Join(root, "include/bpf/COPYING"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range vendored {
		if !bytes.Contains(copying, []byte(filepath.Base(f))) {
			t.Errorf("include/bpf/COPYING does not name %s", filepath.Base(f))
		}
	}
	if !bytes.Contains(copying, []byte(libbpfVersion)) {
		t.Errorf("include/bpf/COPYING does not name the version %s", libbpfVersion)
	}
	out, err := exec.Command("dpkg-query", "-W", "-f=${Version}", libbpfDeb).Output()
	if err != nil {
		testenv.SkipOrFail(t, "%s is not installed (make test-deps installs it): cannot compare include/bpf/ with it (%v)", libbpfDeb, err)
	}
	if v := string(out); v != libbpfVersion {
		testenv.SkipOrFail(t, "%s %s is installed, include/bpf/ is from %s: not compared", libbpfDeb, v, libbpfVersion)
	}
	for _, f := range vendored {
		ours, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		sys := filepath.Join("/usr/include/bpf", filepath.Base(f))
		theirs, err := os.ReadFile(sys)
		if err != nil {
			t.Errorf("%s: %v", sys, err)
			continue
		}
		if !bytes.Equal(ours, theirs) {
			t.Errorf("%s differs from %s of %s %s", f, sys, libbpfDeb, libbpfVersion)
		}
	}
	t.Logf("include/bpf/: %d headers identical to %s %s", len(vendored), libbpfDeb, libbpfVersion)
}

// SPDX-License-Identifier: Apache-2.0

package sourcetree

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/kernel-exporter/kernel_exporter/internal/testenv"
)

// TestFreshCloneMake is README's "make && make install" on a fresh clone:
// with every source and header newer than the committed objects (as a
// checkout may leave them), plain make must build the binary and nothing
// else, and make bpf must find every object up to date by the hashes of
// programs/bpf.sum, without running clang (CLANG names a missing one).
func TestFreshCloneMake(t *testing.T) {
	root, _ := repoFiles(t)
	if _, err := exec.LookPath("make"); err != nil {
		testenv.SkipOrFail(t, "make not found: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "clone")
	if out, err := exec.Command("git", "clone", "-q", "--no-hardlinks", root, dir).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	// The committed objects an hour older than their sources, headers and
	// build scripts (and than the Makefile), as a checkout may leave them.
	now, earlier := time.Now(), time.Now().Add(-time.Hour)
	var touched int
	for _, pattern := range []string{"programs/*.bpf.o", "integration/testdata/*/*.bpf.o",
		"programs/*.bpf.c", "integration/testdata/*/*.bpf.c", "include/*.h", "include/*/*.h",
		"tools/bpf-build.sh", "tools/bpf-sum.sh", "Makefile"} {
		matches, _ := filepath.Glob(filepath.Join(dir, pattern))
		for _, m := range matches {
			when := now
			if strings.HasSuffix(m, ".o") {
				when = earlier
			} else {
				touched++
			}
			if err := os.Chtimes(m, when, when); err != nil {
				t.Fatal(err)
			}
		}
	}
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	make := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("make", append([]string{"--no-print-directory", "GO=" + goBin, "CLANG=clang-missing-for-test",
			"LLVM_STRIP=llvm-strip-missing-for-test"}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}

	out := make("-n")
	if !strings.Contains(out, "go build") || !strings.Contains(out, "-o kernel_exporter ./cmd/kernel_exporter") {
		t.Errorf("plain make -n does not build ./kernel_exporter:\n%s", out)
	}
	for _, bad := range []string{"bpf-build", "bpf-sum", "clang"} {
		if strings.Contains(out, bad) {
			t.Errorf("plain make -n runs %s in a fresh clone:\n%s", bad, out)
		}
	}
	out = make("bpf")
	if !strings.Contains(out, "up to date") || strings.Contains(out, "rebuilding") {
		t.Errorf("make bpf in a fresh clone with %d files touched:\n%s", touched, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "kernel_exporter")); err == nil {
		t.Error("make -n or make bpf built the binary")
	}
	// The Makefile holds the one list of BPF sources (BPF_SRCS).
	check := exec.Command("make", "-s", "bpf-sum-check")
	check.Dir = dir
	if out, err := check.CombinedOutput(); err != nil {
		t.Errorf("make bpf-sum-check: %v\n%s", err, out)
	}
	if st, _ := exec.Command("git", "-C", dir, "status", "--porcelain").Output(); len(st) != 0 {
		t.Errorf("make bpf changed the clone:\n%s", st)
	}
	t.Logf("fresh clone, %d inputs touched: make -n builds the binary only; make bpf: %s", touched, strings.TrimSpace(out))
}

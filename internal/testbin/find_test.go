// SPDX-License-Identifier: Apache-2.0

package testbin

import (
	"os"
	"path/filepath"
	"testing"
)

// TestFind checks the version order and that Find picks the highest
// version of the cache, or the environment's binary.
func TestFind(t *testing.T) {
	if !versionLess("v1.9.0", "v1.37.2") || versionLess("v1.37.2", "v1.37.1") || !versionLess("v0.99.0", "v0.150.0") {
		t.Error("versionLess")
	}
	dir := t.TempDir()
	for _, v := range []string{"v0.99.0", "v0.150.0"} {
		p := filepath.Join(dir, ".cache", "tool", v, "tool")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	got, err := Find("KE_TESTBIN_UNSET", "tool", "tool")
	if want := filepath.Join(dir, ".cache", "tool", "v0.150.0", "tool"); err != nil || got != want {
		t.Errorf("Find = %q, %v; want %q", got, err, want)
	}
	t.Setenv("KE_TESTBIN_SET", "/nonexistent/tool")
	if _, err := Find("KE_TESTBIN_SET", "tool", "tool"); err == nil {
		t.Error("Find accepted a missing $KE_TESTBIN_SET")
	}
}

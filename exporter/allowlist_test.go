// SPDX-License-Identifier: Apache-2.0

package exporter

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/kernel-exporter/kernel_exporter/allowlist"
)

// TestReadAllowed checks read's allow-list, which start-up, reloads and the
// privileged helper's LoadObject all go through: a user program whose
// object is not listed is refused, naming the object, its digest and the
// list, before it is parsed; a listed one and a bundled program pass.
func TestReadAllowed(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "x.yaml"), []byte("metrics:\n  counters:\n    - name: x_total\n      help: x\n      labels: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	obj := []byte("not an ELF file")
	if err := os.WriteFile(filepath.Join(dir, "x.bpf.o"), obj, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(obj)
	digest := hex.EncodeToString(sum[:])
	none, err := allowlist.FromDigests("list", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := "BPF object " + filepath.Join(dir, "x.bpf.o") + ": sha256:" + digest + " is not an allowed digest (list): refused"
	if _, _, _, err := read(Source{Name: "x", Dir: dir}, none); err == nil || err.Error() != want {
		t.Errorf("read(unlisted) = %v, want %s", err, want)
	}
	if _, err := LoadObject(Source{Name: "x", Dir: dir}, LoadSettings{Allowed: none}, ""); err == nil || err.Error() != want {
		t.Errorf("LoadObject(unlisted) = %v, want %s", err, want)
	}
	if _, data, _, err := read(Source{Name: "timers"}, none); err != nil || len(data) == 0 {
		t.Errorf("read(bundled timers) under an empty allow-list = %d bytes, %v; want its object", len(data), err)
	}
	listed, err := allowlist.FromDigests("list", []string{digest})
	if err != nil {
		t.Fatal(err)
	}
	if _, data, _, err := read(Source{Name: "x", Dir: dir}, listed); err != nil || string(data) != string(obj) {
		t.Errorf("read(listed) = %q, %v; want the object", data, err)
	}
}

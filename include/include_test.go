// SPDX-License-Identifier: Apache-2.0

package include

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestEmbeddedMatchTree: the embedded headers are the files of include/
// (what make bpf compiles with), this architecture's vmlinux.h and libbpf's
// headers with their licence among them.
func TestEmbeddedMatchTree(t *testing.T) {
	files := Files()
	want := map[string]bool{"vmlinux.h": true, "asm/errno.h": true, "kernel_exporter/maps.bpf.h": true,
		"kernel_exporter/usdt.bpf.h": true, Arch + "/vmlinux.h": true,
		"bpf/bpf_helpers.h": true, "bpf/bpf_helper_defs.h": true, "bpf/bpf_tracing.h": true,
		"bpf/bpf_core_read.h": true, "bpf/bpf_endian.h": true, "bpf/COPYING": true}
	if len(files) != len(want) {
		t.Errorf("embedded %v, want %v", files, want)
	}
	for _, f := range files {
		if !want[f] {
			t.Errorf("embedded %s, not expected", f)
		}
		emb, err := Read(f)
		if err != nil {
			t.Fatal(err)
		}
		disk, err := os.ReadFile(filepath.FromSlash(f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(emb, disk) {
			t.Errorf("%s: embedded copy differs from the file", f)
		}
	}
	dir := t.TempDir()
	written, err := Write(dir)
	if err != nil || len(written) != len(files) {
		t.Fatalf("Write: %v, %d files", err, len(written))
	}
	if _, err := os.Stat(filepath.Join(dir, Arch, "vmlinux.h")); err != nil {
		t.Error(err)
	}
}

// SPDX-License-Identifier: Apache-2.0

// Package include embeds the headers BPF programs are compiled with
// (clang -I include), so that kernel_exporter new can write them beside a
// new program when no installed copy is found: vmlinux.h, which includes
// <arch>/vmlinux.h for the __TARGET_ARCH_* being built, the kernel_exporter/
// helpers, asm/errno.h, and libbpf's BPF-side headers in bpf/ (vendored from
// libbpf 1.1.2 under LGPL-2.1 OR BSD-2-Clause, with their bpf/COPYING), so
// that clang alone builds a program. Only this machine's architecture's
// vmlinux.h is embedded (about 3 MB); a release's include/ holds both.
package include

import (
	"embed"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

//go:embed vmlinux.h asm/errno.h kernel_exporter/maps.bpf.h kernel_exporter/usdt.bpf.h
//go:embed bpf/bpf_helpers.h bpf/bpf_helper_defs.h bpf/bpf_tracing.h bpf/bpf_core_read.h bpf/bpf_endian.h bpf/COPYING
var common embed.FS

// Files returns the embedded headers by path relative to include/, sorted:
// the common ones and Arch's vmlinux.h (none when Arch is "").
func Files() []string {
	var out []string
	for _, f := range []embed.FS{common, arch} {
		_ = fs.WalkDir(f, ".", func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				out = append(out, p)
			}
			return nil
		})
	}
	sort.Strings(out)
	return out
}

// Read returns the embedded header at path (relative to include/).
func Read(path string) ([]byte, error) {
	if b, err := common.ReadFile(path); err == nil {
		return b, nil
	}
	return arch.ReadFile(path)
}

// Write writes every embedded header under dir (include/ of a new
// program), creating directories, and returns the files written.
func Write(dir string) ([]string, error) {
	var written []string
	for _, p := range Files() {
		b, err := Read(p)
		if err != nil {
			return written, err
		}
		dst := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return written, err
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			return written, err
		}
		written = append(written, dst)
	}
	return written, nil
}

// SPDX-License-Identifier: Apache-2.0

// Package selfprobe lets BPF programs hook the exporter itself, as
// cloudflare/ebpf_exporter's section uprobe//proc/self/exe:post_attach_mark
// does: a uprobe on a function that the exporter calls right after it has
// attached a config's programs, so that a program can initialise its maps
// (its bpf-jit example reads a kernel variable into a map there) before
// the first event it traces.
//
// The reference is a C program with a C function of that name. This
// exporter is pure Go, and its release builds are linked with -s -w
// (no symbol table), so the symbol cannot be looked up in the file.
// Instead the loader asks Offset: the address of the Go function Mark in
// the running process, from the function value, translated into a file
// offset of the executable through the process's own memory map
// (/proc/self/maps: the mapping of the executable that holds the
// address, whatever the load address, PIE or not). A uprobe at that
// offset of the executable fires at every call of Mark.
package selfprobe

import (
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync/atomic"

	"github.com/kernel-exporter/kernel_exporter/bounded"
	"github.com/kernel-exporter/kernel_exporter/internal/procmaps"
)

// Path and Symbol are the uprobe target that means Mark: the section
// "uprobe//proc/self/exe:post_attach_mark" of ebpf_exporter's examples.
const (
	Path   = "/proc/self/exe"
	Symbol = "post_attach_mark"
)

// calls counts calls of Mark; it also gives Mark a body the compiler
// cannot drop.
var calls atomic.Uint64

// Mark is where a uprobe on /proc/self/exe:post_attach_mark fires. The
// exporter calls it once after each config's programs are attached (at
// start and at every reload of the config); it does nothing else.
//
//go:noinline
func Mark() {
	calls.Add(1)
}

// Calls returns the number of calls of Mark so far.
func Calls() uint64 { return calls.Load() }

// maxMaps bounds /proc/self/maps: a Go process has a few dozen mappings;
// a 1 MiB bound leaves room for 10,000 lines.
const maxMaps = 1 << 20

// Offset returns the executable of the running process (the target of
// /proc/self/exe, as the kernel resolves it for a uprobe) and the file
// offset of Mark's first instruction in it. Errors say which step failed:
// reading /proc/self/maps (bounded to 1 MiB), or no executable mapping of
// the file holding Mark.
func Offset() (exe string, off uint64, err error) {
	exe, err = os.Readlink(Path)
	if err != nil {
		return "", 0, fmt.Errorf("resolve %s: %w", Path, err)
	}
	maps, err := bounded.ReadFile("/proc/self/maps", "memory map", maxMaps)
	if err != nil {
		return "", 0, err
	}
	pc := uint64(reflect.ValueOf(Mark).Pointer())
	off, ok := fileOffset(maps, pc)
	if !ok {
		return "", 0, fmt.Errorf("address %#x of %s is in no executable file mapping of /proc/self/maps", pc, Symbol)
	}
	return exe, off, nil
}

// fileOffset finds the executable mapping of a file (a /proc/<pid>/maps
// line "start-end perms offset dev inode path", perms with x) that holds
// address pc and returns pc's offset in that file.
func fileOffset(maps []byte, pc uint64) (uint64, bool) {
	for _, m := range procmaps.Parse(maps) {
		if m.Exec() && strings.HasPrefix(m.Path, "/") && pc >= m.Start && pc < m.End {
			return pc - m.Start + m.Offset, true
		}
	}
	return 0, false
}

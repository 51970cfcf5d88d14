// SPDX-License-Identifier: Apache-2.0

// Package textpages gives back the pages of the running executable that
// start-up touched and serving does not use.
//
// A Go binary is mapped from its file: code (.text) and read-only data
// (.rodata, .gopclntab) are private, read-only file mappings whose pages
// count in the process's resident set (RssFile) once touched. Start-up
// touches most of them: every package's init, loading BPF objects, parsing
// BTF and YAML; and the kernel maps a fault's neighbours with it (fault
// around, 64 KiB), so a process that ran its start-up has nearly the whole
// binary resident (19 of 22.8 MB for the exporter with its default
// programs), although serving runs a fraction of it.
//
// Release drops those mappings' pages from the process (madvise
// MADV_DONTNEED). Nothing is lost: the mappings are read-only, so their
// pages equal the file's, which stay in the page cache; the next access
// to one maps it again (a minor fault, microseconds). What serving uses
// comes back; what only start-up used does not.
package textpages

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/bounded"
	"github.com/kernel-exporter/kernel_exporter/internal/procmaps"
)

// Release drops from the process the pages of the executable's mappings
// that are not writable. It returns the bytes of address space it
// released (mapped or not). Errors are those of reading /proc/self/maps
// and of madvise.
func Release() (int, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, err
	}
	maps, err := bounded.ReadFile("/proc/self/maps", "memory map", bounded.MaxConfig)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, m := range procmaps.Parse(maps) {
		if m.Path != exe || m.Writable() {
			continue
		}
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(m.Start), uintptr(m.End-m.Start), unix.MADV_DONTNEED); errno != 0 {
			return n, fmt.Errorf("madvise %#x-%#x: %w", m.Start, m.End, errno)
		}
		n += int(m.End - m.Start)
	}
	return n, nil
}

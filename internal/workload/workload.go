// SPDX-License-Identifier: Apache-2.0

// Package workload makes the kernel events that the benchmarks measure
// BPF programs against: system calls, failing system calls and O_DIRECT
// block I/O. It is shared by the benchmarks of several packages (the
// integration tests, which assert exact counts, keep their own helpers).
package workload

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Getpid makes n getpid system calls. unix.Getpid is a raw syscall:
// neither libc nor the Go runtime caches the result.
func Getpid(n int) {
	for i := 0; i < n; i++ {
		unix.Getpid()
	}
}

// FailingOpens makes n open calls that fail with ENOENT, and returns an
// error if one does not.
func FailingOpens(n int) error {
	for i := 0; i < n; i++ {
		if _, err := unix.Open("/nonexistent/kernel_exporter", unix.O_RDONLY, 0); !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("open: want ENOENT, got %v", err)
		}
	}
	return nil
}

// DirectIO writes then reads n 4 KiB blocks of path with O_DIRECT, so that
// each one is a block request.
func DirectIO(path string, n int) error {
	const block = 4096
	buf, err := unix.Mmap(-1, 0, block, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return err
	}
	defer unix.Munmap(buf)
	if uintptr(unsafe.Pointer(&buf[0]))%block != 0 {
		return errors.New("unaligned buffer")
	}
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_DIRECT, 0o600)
	if err != nil {
		return fmt.Errorf("open %s O_DIRECT: %w", path, err)
	}
	defer unix.Close(fd)
	for i := 0; i < n; i++ {
		if _, err := unix.Pwrite(fd, buf, int64(i*block)); err != nil {
			return err
		}
	}
	for i := 0; i < n; i++ {
		if _, err := unix.Pread(fd, buf, int64(i*block)); err != nil {
			return err
		}
	}
	return nil
}

// BPFStatsEnabled reports kernel.bpf_stats_enabled ("0", "1" or
// "unknown"): while it is 1 every program run also reads the clock twice,
// which inflates overhead figures.
func BPFStatsEnabled() string {
	b, err := os.ReadFile("/proc/sys/kernel/bpf_stats_enabled")
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}

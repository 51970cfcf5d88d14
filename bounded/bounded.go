// SPDX-License-Identifier: Apache-2.0

// Package bounded opens and reads files that come from outside the exporter
// (configs, BPF objects, uprobe and USDT targets, kallsyms, procfs and sysfs
// files) without letting them hang or exhaust it.
//
// The model: every such file is opened with O_NONBLOCK, so that opening a
// FIFO never waits for a writer, then checked with fstat on the open file
// descriptor (not on the path, which may change in between). Only regular
// files are accepted: a FIFO, socket, device (a symlink to /dev/zero) or
// directory is refused with ErrNotRegular. Reads stop at a limit given by
// the caller, whatever size the file claims (procfs files say 0), and a
// longer file is refused with ErrTooLarge rather than truncated.
//
// Errors are *Error values. Their text names the path, what the file is for
// and the limit, never the file's content.
package bounded

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/internal/plural"
)

// Limits of the files the exporter reads. docs/security.md lists them.
const (
	// MaxConfig bounds a <name>.yaml config (static maps included).
	MaxConfig = 1 << 20 // 1 MiB
	// MaxObject bounds a <name>.bpf.o object.
	MaxObject = 64 << 20 // 64 MiB
	// MaxKallsyms bounds /proc/kallsyms (about 12 MiB on a distribution
	// kernel with modules).
	MaxKallsyms = 128 << 20 // 128 MiB
	// MaxTarget bounds a uprobe or USDT target binary, which is parsed in
	// place (sections are read on demand, not copied whole).
	MaxTarget = 4 << 30 // 4 GiB
	// MaxSmall bounds one-line procfs and sysfs files (uevent, cpu lists).
	MaxSmall = 64 << 10 // 64 KiB
)

// Sentinel errors, matched with errors.Is.
var (
	ErrNotRegular = errors.New("not a regular file")
	ErrTooLarge   = errors.New("file too large")
)

// Error is a refused or failed open or read.
type Error struct {
	Path  string
	What  string // what the file is for, e.g. "config", "BPF object"
	Limit int64  // the size limit in bytes, 0 when not relevant
	Err   error  // ErrNotRegular, ErrTooLarge, or the system error
}

func (e *Error) Error() string {
	switch {
	case errors.Is(e.Err, ErrTooLarge):
		return fmt.Sprintf("%s %s: larger than the %s limit", e.What, e.Path, Size(e.Limit))
	case errors.Is(e.Err, ErrNotRegular):
		return fmt.Sprintf("%s %s: %v", e.What, e.Path, e.Err)
	}
	var pe *fs.PathError
	if errors.As(e.Err, &pe) {
		// The path is already in our text: keep the operation's reason.
		return fmt.Sprintf("%s %s: %v", e.What, e.Path, pe.Err)
	}
	return fmt.Sprintf("%s %s: %v", e.What, e.Path, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Open opens path read-only and returns it only if it is a regular file
// (after following symlinks). It never blocks on a FIFO. what names the
// file's role in errors. The returned file is in blocking mode.
func Open(path, what string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		// Opening a UNIX socket fails with ENXIO ("no such device or
		// address"): say what the path is instead.
		var st unix.Stat_t
		if errors.Is(err, unix.ENXIO) && unix.Stat(path, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFSOCK {
			return nil, &Error{Path: path, What: what, Err: fmt.Errorf("%w (%s)", ErrNotRegular, kind(st.Mode))}
		}
		return nil, &Error{Path: path, What: what, Err: &fs.PathError{Op: "open", Path: path, Err: err}}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &Error{Path: path, What: what, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, &Error{Path: path, What: what, Err: fmt.Errorf("%w (%s)", ErrNotRegular, kind(st.Mode))}
	}
	// Regular files never block; clear O_NONBLOCK all the same so that the
	// file behaves as one opened the ordinary way.
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, &Error{Path: path, What: what, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// OpenLimit is Open for a file whose stat size must be at most limit
// bytes (ErrTooLarge otherwise); it returns the file and that size. For a
// file read in place rather than whole (an ELF target, a BTF file).
func OpenLimit(path, what string, limit int64) (*os.File, int64, error) {
	f, err := Open(path, what)
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, &Error{Path: path, What: what, Err: err}
	}
	if fi.Size() > limit {
		f.Close()
		return nil, 0, &Error{Path: path, What: what, Limit: limit, Err: ErrTooLarge}
	}
	return f, fi.Size(), nil
}

// OpenInRoot is OpenLimit for path as seen from the directory root, as if
// root were "/": absolute paths, "..", and symbolic links all resolve
// inside root (openat2 with RESOLVE_IN_ROOT and RESOLVE_NO_MAGICLINKS,
// Linux 5.6+), so that a path read from another mount namespace
// (/proc/<pid>/root of a container) cannot make the caller open a file of
// its own namespace. On kernels without openat2 it fails with the system
// error (ENOSYS): callers then have nothing safe to fall back to.
func OpenInRoot(root, path, what string, limit int64) (*os.File, int64, error) {
	full := strings.TrimSuffix(root, "/") + "/" + strings.TrimPrefix(path, "/")
	dir, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, 0, &Error{Path: full, What: what, Err: &fs.PathError{Op: "open", Path: root, Err: err}}
	}
	defer unix.Close(dir)
	fd, err := unix.Openat2(dir, path, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_NONBLOCK | unix.O_CLOEXEC | unix.O_NOCTTY,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return nil, 0, &Error{Path: full, What: what, Err: &fs.PathError{Op: "open", Path: full, Err: err}}
	}
	return checkOpened(fd, full, what, limit)
}

// checkOpened takes an fd opened with O_NONBLOCK and returns it as a file
// if it is a regular file of at most limit bytes, with its size.
func checkOpened(fd int, path, what string, limit int64) (*os.File, int64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, 0, &Error{Path: path, What: what, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, 0, &Error{Path: path, What: what, Err: fmt.Errorf("%w (%s)", ErrNotRegular, kind(st.Mode))}
	}
	if st.Size > limit {
		unix.Close(fd)
		return nil, 0, &Error{Path: path, What: what, Limit: limit, Err: ErrTooLarge}
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, 0, &Error{Path: path, What: what, Err: err}
	}
	return os.NewFile(uintptr(fd), path), st.Size, nil
}

// CheckEnvFiles checks the files named by the environment variables vars
// (those set and not empty) for a library that reads them whole without a
// bound of its own (the OTLP exporters' certificate and key files): each
// must open as Open opens (a regular file, not a FIFO or a device) and be
// at most limit bytes. The error is the first file's, naming the variable
// and the path, never the content.
func CheckEnvFiles(limit int64, vars ...string) error {
	for _, env := range vars {
		path := os.Getenv(env)
		if path == "" {
			continue
		}
		f, _, err := OpenLimit(path, env, limit)
		if err != nil {
			return err
		}
		f.Close()
	}
	return nil
}

// ReadFile reads a whole regular file of at most limit bytes. A larger file
// is refused with ErrTooLarge, whatever its stat size says (procfs files say
// 0).
func ReadFile(path, what string, limit int64) ([]byte, error) {
	f, _, err := OpenLimit(path, what, limit)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, &Error{Path: path, What: what, Err: err}
	}
	if int64(len(data)) > limit {
		return nil, &Error{Path: path, What: what, Limit: limit, Err: ErrTooLarge}
	}
	return data, nil
}

// Size formats a byte count the way limits are written in docs and errors:
// "1 MiB", "64 KiB", "512 bytes".
func Size(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return plural.Count(n, "byte")
}

func kind(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFIFO:
		return "a FIFO"
	case unix.S_IFCHR:
		return "a character device"
	case unix.S_IFBLK:
		return "a block device"
	case unix.S_IFDIR:
		return "a directory"
	case unix.S_IFSOCK:
		return "a socket"
	}
	return "not a regular file"
}

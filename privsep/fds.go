// SPDX-License-Identifier: Apache-2.0

package privsep

import (
	"errors"
	"math"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// Descriptors the helpers inherit. A process inherits every descriptor of
// its parent that lacks FD_CLOEXEC: the exporter's own (Go opens all of
// them close-on-exec), but also whatever the exporter itself inherited
// and never marked: a descriptor its shell left open, the listening
// sockets of systemd socket activation (LISTEN_FDS, which the exporter
// may not use all of). The helpers hold CAP_SYS_ADMIN and must not keep
// any of those. Two measures, each enough alone:
//
//   - markInheritedCloexec, in the exporter before it starts the
//     supervisor, sets FD_CLOEXEC on every descriptor from 3 up
//     (close_range(2) with CLOSE_RANGE_CLOEXEC, Linux 5.11+, else one
//     fcntl per open descriptor), so that exec closes them;
//
//   - closeInherited, first thing in each helper, closes every descriptor
//     above its socket (3) that lacks FD_CLOEXEC: the Go runtime opens
//     its own (the netpoller's) close-on-exec, so what lacks it was
//     inherited.

// markInheritedCloexec sets FD_CLOEXEC on every descriptor from 3 up.
func markInheritedCloexec() error {
	err := unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC)
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EINVAL) {
		return err
	}
	fds, err := openFDs()
	if err != nil {
		return err
	}
	for _, fd := range fds {
		if fd >= 3 {
			unix.CloseOnExec(fd)
		}
	}
	return nil
}

// closeInherited closes every descriptor above keep that lacks
// FD_CLOEXEC, and returns how many it closed.
func closeInherited(keep int) (int, error) {
	fds, err := openFDs()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, fd := range fds {
		if fd <= keep {
			continue
		}
		fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil || fl&unix.FD_CLOEXEC != 0 {
			continue // closed meanwhile, or the process's own
		}
		if unix.Close(fd) == nil {
			n++
		}
	}
	return n, nil
}

// openFDs lists the open descriptors from /proc/self/fd, read with raw
// system calls (an os.File would start the Go netpoller, whose own
// descriptors would then stay open in the helper).
func openFDs() ([]int, error) {
	dir, err := unix.Open("/proc/self/fd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dir)
	var out []int
	buf := make([]byte, 4096)
	for {
		n, err := unix.ReadDirent(dir, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			break
		}
		var names []string
		_, _, names = syscall.ParseDirent(buf[:n], -1, names)
		for _, name := range names {
			fd, err := strconv.Atoi(name)
			if err == nil && fd != dir {
				out = append(out, fd)
			}
		}
	}
	return out, nil
}

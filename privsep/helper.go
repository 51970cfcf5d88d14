// SPDX-License-Identifier: Apache-2.0

package privsep

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/loader"
)

// HelperCapabilities is what the helper keeps (of what it was started
// with): CAP_SYS_ADMIN for BPF_ENABLE_STATS (kernel/bpf/syscall.c,
// bpf_enable_stats), CAP_PERFMON for perf_event_open of a tracepoint
// (kernel/events/core.c, perf_event_paranoid above -1), and
// CAP_DAC_READ_SEARCH to read the event id under tracefs (mode 0700 root)
// when not running as root.
const HelperCapabilities = loader.CapSet(1)<<loader.CapSysAdmin | loader.CapSet(1)<<loader.CapPerfmon | loader.CapSet(1)<<loader.CapDacReadSearch

// socketFD is the helper's end of the socketpair: ExtraFiles[0].
const socketFD = 3

// ops are the privileged operations; tests replace them.
type ops interface {
	enableStats() (int, error)
	openTracepoint(group, event string) (int, error)
}

// Main runs the helper (the hidden command Command): it drops to
// HelperCapabilities, sets PR_SET_PDEATHSIG, and serves requests on file
// descriptor 3 until end of file. It returns the exit code: 0 at end of
// file, 1 when setting up or the socket failed.
func Main(log *slog.Logger) int {
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		log.Error("privileged helper: PR_SET_PDEATHSIG", "err", err)
		return 1
	}
	if os.Getppid() == 1 {
		return 0 // the parent died before PR_SET_PDEATHSIG
	}
	r, err := loader.DropCapabilitiesTo(HelperCapabilities)
	if err != nil {
		log.Error("privileged helper: dropping capabilities failed", "err", err)
		return 1
	}
	log.Info("privileged helper running", "pid", os.Getpid(), "cap_eff", r.After.Effective.Hex(), "effective", r.After.Effective.String())
	if err := serve(socketFD, realOps{}); err != nil {
		log.Error("privileged helper", "err", err)
		return 1
	}
	return 0
}

// serve answers requests on the SOCK_SEQPACKET socket fd until end of
// file (nil) or a socket error.
func serve(fd int, o ops) error {
	buf := make([]byte, MaxRequest+1)
	for {
		n, _, flags, _, err := unix.Recvmsg(fd, buf, nil, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read request: %w", err)
		}
		if n == 0 {
			return nil // end of file: the exporter closed its end or died
		}
		var req request
		if flags&unix.MSG_TRUNC != 0 || n > MaxRequest {
			err = fmt.Errorf("request longer than %d bytes", MaxRequest)
		} else {
			req, err = parseRequest(buf[:n])
		}
		newFD := -1
		if err == nil {
			switch req.kind {
			case reqStats:
				newFD, err = o.enableStats()
			case reqTracepoint:
				newFD, err = o.openTracepoint(req.group, req.event)
			}
		}
		if err != nil {
			if _, serr := unix.SendmsgN(fd, errorReply(err), nil, nil, 0); serr != nil {
				return fmt.Errorf("write reply: %w", serr)
			}
			continue
		}
		_, serr := unix.SendmsgN(fd, []byte(replyOK), unix.UnixRights(newFD), nil, 0)
		unix.Close(newFD) // the exporter holds its own copy now
		if serr != nil {
			return fmt.Errorf("write reply: %w", serr)
		}
	}
}

// realOps are the kernel's operations.
type realOps struct{}

func (realOps) enableStats() (int, error) {
	c, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		return -1, fmt.Errorf("BPF_ENABLE_STATS: %w", err)
	}
	return takeFD(c)
}

// takeFD duplicates the descriptor of c (cilium/ebpf's *sys.FD) and
// closes c.
func takeFD(c io.Closer) (int, error) {
	defer c.Close()
	f, ok := c.(interface{ Int() int })
	if !ok {
		return -1, errors.New("BPF_ENABLE_STATS: no file descriptor")
	}
	fd, err := unix.FcntlInt(uintptr(f.Int()), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("dup: %w", err)
	}
	return fd, nil
}

func (realOps) openTracepoint(group, event string) (int, error) {
	f, err := loader.OpenTracepointEvent(group, event)
	if err != nil {
		return -1, err
	}
	defer f.Close()
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("dup: %w", err)
	}
	return fd, nil
}

// SPDX-License-Identifier: Apache-2.0

package privsep

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"runtime/debug"
	"slices"
	"strconv"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/exporter"
	"github.com/kernel-exporter/kernel_exporter/loader"
)

// HelperCapabilities is what the worker keeps, and the supervisor passes
// on (of what the exporter was started with): what loading and attaching
// needs, so that a reload loads as start-up did (docs/security.md lists
// each use): CAP_BPF (maps and programs), CAP_PERFMON (tracing programs,
// perf events; kernel/bpf/syscall.c, kernel/events/core.c), CAP_SYSLOG
// (kaddrs from /proc/kallsyms), CAP_DAC_READ_SEARCH (tracefs, mode 0700
// root; config files and probe targets the user cannot read),
// CAP_SYS_ADMIN (BPF_ENABLE_STATS for the CPU budget, mounting tracefs),
// and CAP_NET_ADMIN (xdp programs). Not CAP_SYS_RESOURCE: the exporter
// raised RLIMIT_MEMLOCK at start where the kernel charges BPF memory to it
// (loader.PrepareMemlock), before starting the helper, which inherits the
// raised limit.
const HelperCapabilities = loader.CapSet(1)<<loader.CapBPF | loader.CapSet(1)<<loader.CapPerfmon |
	loader.CapSet(1)<<loader.CapSyslog | loader.CapSet(1)<<loader.CapDacReadSearch |
	loader.CapSet(1)<<loader.CapSysAdmin | loader.CapSet(1)<<loader.CapNetAdmin

// socketFD is a helper's end of its socketpair: file descriptor 3.
const socketFD = 3

// ops are the worker's privileged operations; tests replace them.
type ops interface {
	enableStats() (int, error)
	openTracepoint(group, event string) (int, error)
	// load returns the descriptors of a loaded config and a function
	// that closes the worker's own copies once they are sent.
	load(config, digest string) (loader.Handover, func(), error)
}

// workerMain runs the worker: it drops to HelperCapabilities and serves
// requests on file descriptor 3 until end of file.
func workerMain(log *slog.Logger, s Settings) int {
	r, err := loader.DropCapabilitiesTo(HelperCapabilities)
	if err != nil {
		log.Error("privileged helper: dropping capabilities failed", "err", err)
		return 1
	}
	log.Info("privileged helper running", "pid", os.Getpid(), "cap_eff", r.After.Effective.Hex(), "effective", r.After.Effective.String())
	nameAsExporter() // bpflist.go
	if err := serve(socketFD, &realOps{settings: s}); err != nil {
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
		if err == nil && req.kind == reqLoad {
			if err := serveLoad(fd, o, req); err != nil {
				return err
			}
			continue
		}
		newFD := -1
		if err == nil {
			switch req.kind {
			case reqStats:
				newFD, err = o.enableStats()
			case reqTracepoint:
				newFD, err = o.openTracepoint(req.group, req.event)
			case reqBPFObjects:
				newFD, err = listBPF(o)
			}
		}
		if err != nil {
			if err := send(fd, errorReply(err), nil); err != nil {
				return err
			}
			continue
		}
		serr := send(fd, []byte(replyOK), []int{newFD})
		unix.Close(newFD) // the exporter holds its own copy now
		if serr != nil {
			return serr
		}
	}
}

// send writes one message with fds attached.
func send(fd int, msg []byte, fds []int) error {
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	for {
		err := unix.Sendmsg(fd, msg, oob, nil, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("write reply: %w", err)
		}
		return nil
	}
}

// serveLoad answers a load request: the loaded config's descriptors in
// messages, then "ok"; or one error reply. It returns only socket
// errors.
func serveLoad(fd int, o ops, req request) error {
	h, release, err := o.load(req.config, req.digest)
	if err == nil {
		defer release()
		err = checkHandover(h)
	}
	if err != nil {
		return send(fd, errorReply(err), nil)
	}
	for _, n := range slices.Sorted(maps.Keys(h.Maps)) {
		if err := send(fd, []byte(msgMap+" "+n), []int{h.Maps[n]}); err != nil {
			return err
		}
	}
	for _, n := range slices.Sorted(maps.Keys(h.Programs)) {
		if err := send(fd, []byte(msgProg+" "+n), []int{h.Programs[n]}); err != nil {
			return err
		}
	}
	for _, n := range slices.Sorted(maps.Keys(h.Links)) {
		fds := h.Links[n]
		for len(fds) > 0 {
			k := min(len(fds), MaxFDsPerMessage)
			if err := send(fd, []byte(msgLink+" "+n), fds[:k]); err != nil {
				return err
			}
			fds = fds[k:]
		}
	}
	for g, chosen := range h.Chosen {
		if err := send(fd, []byte(msgAlt+" "+strconv.Itoa(g)+" "+strconv.Itoa(chosen)), nil); err != nil {
			return err
		}
		for c, text := range h.Errors[g] {
			if text == "" {
				continue
			}
			msg := cut(msgAltErr+" "+strconv.Itoa(g)+" "+strconv.Itoa(c)+" "+printable(text), MaxLoadMessage)
			if err := send(fd, msg, nil); err != nil {
				return err
			}
		}
	}
	return send(fd, []byte(replyOK), nil)
}

// checkHandover checks, before anything is sent, that the reply fits the
// protocol: names, counts, alternatives indexes.
func checkHandover(h loader.Handover) error {
	nfds, msgs := 0, 0
	for _, m := range []map[string]int{h.Maps, h.Programs} {
		for n := range m {
			if err := checkObjectName(n); err != nil {
				return err
			}
			nfds++
			msgs++
		}
	}
	for n, fds := range h.Links {
		if err := checkObjectName(n); err != nil {
			return err
		}
		if _, ok := h.Programs[n]; !ok || len(fds) == 0 {
			return fmt.Errorf("links of program %s without the program", n)
		}
		nfds += len(fds)
		msgs += (len(fds) + MaxFDsPerMessage - 1) / MaxFDsPerMessage
	}
	if len(h.Chosen) > maxIndex+1 || len(h.Errors) != len(h.Chosen) {
		return fmt.Errorf("%d alternatives groups", len(h.Chosen))
	}
	for g, c := range h.Chosen {
		if c < -1 || c > maxIndex || len(h.Errors[g]) > maxIndex+1 {
			return fmt.Errorf("alternatives group %d: choice %d of %d", g, c, len(h.Errors[g]))
		}
		msgs += 1 + len(h.Errors[g])
	}
	if nfds > MaxLoadFDs || msgs > MaxLoadMessages {
		return fmt.Errorf("%d descriptors in %d messages: more than %d or %d", nfds, msgs, MaxLoadFDs, MaxLoadMessages)
	}
	return nil
}

// realOps are the kernel's operations.
type realOps struct {
	settings Settings
}

func (*realOps) enableStats() (int, error) {
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

func (*realOps) openTracepoint(group, event string) (int, error) {
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

// load loads one of the settings' configs (exporter.LoadObject). The
// decoded kernel BTF is dropped after each load: the worker mostly waits.
func (o *realOps) load(config, digest string) (loader.Handover, func(), error) {
	src, ok := o.settings.source(config)
	if !ok {
		return loader.Handover{}, nil, fmt.Errorf("config %s is not one the exporter was started with", config)
	}
	defer func() {
		loader.ReleaseKernelTypes()
		debug.FreeOSMemory()
	}()
	s := exporter.LoadSettings{BTFPath: o.settings.BTFPath, DisableAttach: o.settings.DisableAttach, AttachTo: o.settings.AttachTo[config], Allowed: o.settings.Allowed}
	obj, err := exporter.LoadObject(src, s, digest)
	if err != nil {
		return loader.Handover{}, nil, err
	}
	h, err := obj.Handover()
	if err != nil {
		obj.Close()
		return loader.Handover{}, nil, err
	}
	return h, obj.Close, nil
}

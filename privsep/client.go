// SPDX-License-Identifier: Apache-2.0

package privsep

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/loader"
)

// Client is the exporter's end of the helper: its process and socket. Its
// methods are safe for concurrent use (requests are serialized).
type Client struct {
	mu   sync.Mutex
	fd   int // -1 once closed
	cmd  *exec.Cmd
	done chan struct{} // closed when the helper exited
	err  error         // the helper's exit, once done
}

// Options start the helper; the zero value re-executes /proc/self/exe.
type Options struct {
	// Path and Args run the helper: default /proc/self/exe and [Command].
	Path string
	Args []string
	// Stderr receives the helper's log (default os.Stderr).
	Stderr io.Writer
	Logger *slog.Logger // unused by Start; StartLogged's
}

// Start starts the helper (see the package doc) and returns its client.
// Call it while the process still holds the capabilities the helper
// should keep, before loader.DropAfterAttach. Errors: the socketpair's, or
// exec's (then no process runs).
func Start(opts Options) (*Client, error) {
	if opts.Path == "" {
		opts.Path = "/proc/self/exe"
	}
	if opts.Args == nil {
		opts.Args = []string{Command}
	}
	if opts.Stderr == nil {
		opts.Stderr = os.Stderr
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("privileged helper: socketpair: %w", err)
	}
	child := os.NewFile(uintptr(fds[1]), "privsep")
	cmd := exec.Command(opts.Path, opts.Args...)
	cmd.ExtraFiles = []*os.File{child} // file descriptor 3 in the helper
	cmd.Stderr = opts.Stderr
	cmd.Env = []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		child.Close()
		unix.Close(fds[0])
		return nil, fmt.Errorf("privileged helper: start %s: %w", opts.Path, err)
	}
	child.Close()
	tv := unix.NsecToTimeval(ReplyTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fds[0], unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		unix.Close(fds[0])
		return nil, fmt.Errorf("privileged helper: SO_RCVTIMEO: %w", err)
	}
	c := &Client{fd: fds[0], cmd: cmd, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

// newClient wraps an already connected socket (tests).
func newClient(fd int) *Client { return &Client{fd: fd} }

// Pid is the helper's process id (0 for a client without a process).
func (c *Client) Pid() int {
	if c.cmd == nil || c.cmd.Process == nil {
		return 0
	}
	return c.cmd.Process.Pid
}

// EnableStats turns BPF run-time statistics on until the returned file is
// closed: budget.CPUOptions.EnableStats. Errors: the helper's (say,
// BPF_ENABLE_STATS refused with EPERM when it lacks CAP_SYS_ADMIN), or
// that it is gone.
func (c *Client) EnableStats() (io.Closer, error) {
	return c.call(reqStats, "bpf_stats")
}

// OpenTracepoint returns the perf event of tracepoint group/event (every
// process, CPU 0), for loader.LinkPerfEvent: loader.TracepointOpener.
// Names are 1 to MaxName bytes of [A-Za-z0-9_]; others are refused before
// anything is sent.
func (c *Client) OpenTracepoint(group, event string) (*os.File, error) {
	for _, n := range []string{group, event} {
		if err := checkName(n); err != nil {
			return nil, fmt.Errorf("privileged helper: %w", err)
		}
	}
	return c.call(reqTracepoint+" "+group+" "+event, "perf_event:"+group+":"+event)
}

// call sends one request and returns the descriptor of its reply.
func (c *Client) call(req, name string) (*os.File, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fd < 0 {
		return nil, errors.New("privileged helper: closed")
	}
	if _, err := unix.SendmsgN(c.fd, []byte(req), nil, nil, 0); err != nil {
		return nil, fmt.Errorf("privileged helper: send request: %w", err)
	}
	buf := make([]byte, MaxReply+1)
	oob := make([]byte, unix.CmsgSpace(4))
	for {
		n, oobn, _, _, err := unix.Recvmsg(c.fd, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			// A late reply would answer the next request: stop here (the
			// helper reads end of file and exits).
			unix.Close(c.fd)
			c.fd = -1
			return nil, fmt.Errorf("privileged helper: read reply: %w", err)
		}
		if n == 0 {
			return nil, errors.New("privileged helper: exited")
		}
		fds, perr := replyFDs(oob[:oobn])
		reply := string(buf[:n])
		if reply == replyOK && perr == nil && len(fds) == 1 {
			return os.NewFile(uintptr(fds[0]), name), nil
		}
		for _, fd := range fds {
			unix.Close(fd)
		}
		if msg, ok := strings.CutPrefix(reply, replyErr); ok {
			return nil, fmt.Errorf("privileged helper: %s", excerptReply(msg))
		}
		return nil, errors.New("privileged helper: malformed reply")
	}
}

// replyFDs returns the descriptors of a reply's SCM_RIGHTS messages.
func replyFDs(oob []byte) ([]int, error) {
	if len(oob) == 0 {
		return nil, nil
	}
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var out []int
	for _, m := range msgs {
		fds, err := unix.ParseUnixRights(&m)
		if err != nil {
			return out, err
		}
		out = append(out, fds...)
	}
	return out, nil
}

// excerptReply keeps an error reply's printable ASCII.
func excerptReply(s string) string {
	b := []byte(s)
	for i, ch := range b {
		if ch < 0x20 || ch >= 0x7f {
			b[i] = '?'
		}
	}
	return string(b)
}

// Close closes the socket, so the helper reads end of file and exits, and
// waits up to 2 s for it (then kills it). It returns nil once the helper
// is gone.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.fd >= 0 {
		unix.Close(c.fd)
		c.fd = -1
	}
	c.mu.Unlock()
	if c.done == nil {
		return nil
	}
	select {
	case <-c.done:
	case <-time.After(2 * time.Second):
		c.cmd.Process.Kill()
		<-c.done
	}
	return nil
}

// StartLogged is Start for the exporter's main: the helper's failure to
// start is logged at WARN and gives nil (the CPU budget then measures
// only while statistics are on otherwise, and re-attaches need the
// capabilities kept with --capabilities.keep).
func StartLogged(log *slog.Logger) *Client {
	c, err := Start(Options{Logger: log})
	if err != nil {
		log.Warn("privileged helper not started: the CPU budget cannot turn BPF statistics on or re-attach tracepoint programs after the capability drop", "err", err)
		return nil
	}
	log.Info("privileged helper started", "pid", c.Pid())
	return c
}

// StatsFunc returns c.EnableStats for budget.CPUOptions.EnableStats, or nil
// for a nil client (the supervisor then calls BPF_ENABLE_STATS itself).
func (c *Client) StatsFunc() func() (io.Closer, error) {
	if c == nil {
		return nil
	}
	return c.EnableStats
}

// Tracepoints returns c as a loader.TracepointOpener for
// exporter.Options.Tracepoints, or a nil interface for a nil client.
func (c *Client) Tracepoints() loader.TracepointOpener {
	if c == nil {
		return nil
	}
	return c
}

// Stop is Close for a client that may be nil.
func (c *Client) Stop() {
	if c != nil {
		c.Close()
	}
}

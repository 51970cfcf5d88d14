// SPDX-License-Identifier: Apache-2.0

package privsep

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/config"
	"github.com/kernel-exporter/kernel_exporter/exporter"
	"github.com/kernel-exporter/kernel_exporter/loader"
)

// Client is the exporter's end of the helpers: the supervisor's process
// and control socket, and the socket of the worker running now. Its
// methods are safe for concurrent use (requests are serialized).
type Client struct {
	req sync.Mutex // one request at a time

	mu      sync.Mutex
	conn    *net.UnixConn // the worker's socket; nil while none runs
	pid     int           // the worker's
	upCh    chan struct{} // closed while a worker runs
	started bool          // a worker ran before

	stopping atomic.Bool // the exporter is stopping (Stopping)

	ctl  *net.UnixConn // the supervisor's socket (nil: a bare client)
	cmd  *exec.Cmd
	done chan struct{} // closed when the supervisor exited
	err  error         // the supervisor's exit, once done

	log         *slog.Logger
	loadTimeout time.Duration
	up          prometheus.Gauge
	restarts    prometheus.Counter
}

// Options start the helper; the zero value re-executes /proc/self/exe.
type Options struct {
	// Path and Args run the supervisor: default /proc/self/exe and
	// [Command]; Settings' Args are appended.
	Path string
	Args []string
	// Settings are what the worker may load (see Settings).
	Settings Settings
	// LoadTimeout bounds the wait for a load's reply (default
	// 2 minutes, exporter.DefaultLoadTimeout).
	LoadTimeout time.Duration
	// Stderr receives the helpers' log (default os.Stderr).
	Stderr io.Writer
	Logger *slog.Logger
}

// defaultLoadTimeout is Options.LoadTimeout's default.
const defaultLoadTimeout = 2 * time.Minute

// Start starts the helper (see the package doc) and returns its client at
// once; requests wait up to ReplyTimeout for the first worker. Call it
// while the process still holds the capabilities the helper should keep,
// before loader.DropAfterAttach. It marks every descriptor from 3 up
// close-on-exec first, so that the helpers inherit none of them. Errors:
// the socketpair's, or exec's (then no process runs).
func Start(opts Options) (*Client, error) {
	if opts.Path == "" {
		opts.Path = selfExe
	}
	if opts.Args == nil {
		opts.Args = []string{Command}
	}
	if opts.Stderr == nil {
		opts.Stderr = os.Stderr
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.LoadTimeout <= 0 {
		opts.LoadTimeout = defaultLoadTimeout
	}
	if err := markInheritedCloexec(); err != nil {
		return nil, fmt.Errorf("privileged helper: marking inherited descriptors close-on-exec: %w", err)
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("privileged helper: socketpair: %w", err)
	}
	child := os.NewFile(uintptr(fds[1]), "privsep")
	cmd := exec.Command(opts.Path, append(append([]string{}, opts.Args...), opts.Settings.Args()...)...)
	cmd.ExtraFiles = []*os.File{child} // file descriptor 3 in the helper
	cmd.Stderr = opts.Stderr
	cmd.Env = helperEnv
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		child.Close()
		unix.Close(fds[0])
		return nil, fmt.Errorf("privileged helper: start %s: %w", opts.Path, err)
	}
	child.Close()
	ctl, err := unixConn(fds[0], "privsep-supervisor")
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("privileged helper: %w", err)
	}
	c := newClient(opts.Logger, opts.LoadTimeout)
	c.ctl, c.cmd, c.done = ctl, cmd, make(chan struct{})
	go func() {
		c.err = cmd.Wait()
		close(c.done)
	}()
	go c.follow()
	return c, nil
}

func newClient(log *slog.Logger, loadTimeout time.Duration) *Client {
	return &Client{
		upCh:        make(chan struct{}),
		log:         log,
		loadTimeout: loadTimeout,
		up: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kernel_exporter_privileged_helper_up",
			Help: "Whether the privileged helper (which loads reloads, turns BPF statistics on for the CPU budget and opens tracepoints for re-attaches) is running (1) or not (0: it exited and is restarted after a backoff, or its supervisor is gone).",
		}),
		restarts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kernel_exporter_privileged_helper_restarts_total",
			Help: "Times the privileged helper was started again after it exited.",
		}),
	}
}

// unixConn wraps a SOCK_SEQPACKET socket in a *net.UnixConn (deadlines,
// and a Close that ends reads waiting on it) and closes fd.
func unixConn(fd int, name string) (*net.UnixConn, error) {
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	nc, err := net.FileConn(f)
	if err != nil {
		return nil, fmt.Errorf("socket %s: %w", name, err)
	}
	uc, ok := nc.(*net.UnixConn)
	if !ok {
		nc.Close()
		return nil, fmt.Errorf("socket %s: not a unix socket", name)
	}
	return uc, nil
}

// newConnClient wraps a connected worker socket (tests).
func newConnClient(fd int) (*Client, error) {
	uc, err := unixConn(fd, "privsep")
	if err != nil {
		return nil, err
	}
	c := newClient(slog.Default(), defaultLoadTimeout)
	c.setConn(uc, 0)
	return c, nil
}

// setConn makes uc (or nil) the worker's socket, closing the previous one
// (which ends a request waiting on it).
func (c *Client) setConn(uc *net.UnixConn, pid int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != nil {
		c.conn.Close()
	}
	c.conn, c.pid = uc, pid
	if uc != nil {
		close(c.upCh)
		c.up.Set(1)
		return
	}
	select {
	case <-c.upCh:
		c.upCh = make(chan struct{})
	default:
	}
	c.up.Set(0)
}

// dropConn closes uc if it is still the worker's socket: after a reply
// that did not come in time or broke the protocol, a late answer must
// never answer a later request. The worker reads end of file and exits,
// and the supervisor starts another.
func (c *Client) dropConn(uc *net.UnixConn) {
	c.mu.Lock()
	same := c.conn == uc
	c.mu.Unlock()
	if same {
		c.setConn(nil, 0)
	} else {
		uc.Close()
	}
}

// follow reads the supervisor's messages until its socket ends.
func (c *Client) follow() {
	buf := make([]byte, MaxReply+1)
	oob := make([]byte, unix.CmsgSpace(4*MaxFDsPerMessage))
	for {
		n, oobn, flags, _, err := c.ctl.ReadMsgUnix(buf, oob)
		if err != nil || n == 0 {
			c.setConn(nil, 0)
			if c.stopping.Load() {
				c.log.Debug("privileged helper supervisor exited while the exporter stops", "err", err)
			} else if !errors.Is(err, net.ErrClosed) {
				c.log.Error("privileged helper supervisor exited: the helper will not be restarted (reloads of changed configs, the CPU budget's statistics and re-attaches of tracepoint programs fail from now on)", "err", err)
			}
			return
		}
		fds, perr := replyFDs(oob[:oobn])
		if perr == nil && (flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 || n > MaxReply) {
			perr = errors.New("truncated")
		}
		var m supervisorMessage
		if perr == nil {
			m, perr = parseSupervisorMessage(buf[:n], len(fds))
		}
		if perr != nil {
			closeAll(fds)
			c.log.Error("privileged helper supervisor: bad message", "err", perr)
			continue
		}
		if !m.up {
			c.setConn(nil, 0)
			if c.stopping.Load() {
				c.log.Debug("privileged helper exited while the exporter stops", "pid", m.pid, "status", m.status)
				continue
			}
			c.log.Warn("privileged helper exited: it is started again after a backoff", "pid", m.pid, "status", m.status)
			continue
		}
		uc, err := unixConn(fds[0], "privsep")
		if err != nil {
			c.log.Error("privileged helper", "err", err)
			continue
		}
		c.mu.Lock()
		restarted := c.started
		c.started = true
		c.mu.Unlock()
		if restarted {
			c.restarts.Inc()
			c.log.Info("privileged helper restarted", "pid", m.pid)
		} else {
			c.log.Debug("privileged helper up", "pid", m.pid)
		}
		c.setConn(uc, m.pid)
	}
}

// Stopping tells c that the exporter has begun to stop (a SIGTERM or
// SIGINT, which systemd and a terminal send to the helpers too): from
// now on an exit of the helpers is part of the stop, logged at debug
// level, not reported as a failure. Safe on a nil client.
func (c *Client) Stopping() {
	if c != nil {
		c.stopping.Store(true)
	}
}

// Pid is the running worker's process id (0 when none runs).
func (c *Client) Pid() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pid
}

// SupervisorPid is the supervisor's process id (0 for a bare client).
func (c *Client) SupervisorPid() int {
	if c.cmd == nil || c.cmd.Process == nil {
		return 0
	}
	return c.cmd.Process.Pid
}

// Describe and Collect make the client a prometheus.Collector of
// kernel_exporter_privileged_helper_up and _restarts_total.
func (c *Client) Describe(ch chan<- *prometheus.Desc) {
	c.up.Describe(ch)
	c.restarts.Describe(ch)
}

func (c *Client) Collect(ch chan<- prometheus.Metric) {
	c.up.Collect(ch)
	c.restarts.Collect(ch)
}

// worker returns the worker's socket, waiting up to ReplyTimeout for one
// to run.
func (c *Client) worker() (*net.UnixConn, error) {
	t := time.NewTimer(ReplyTimeout)
	defer t.Stop()
	for {
		c.mu.Lock()
		uc, ch := c.conn, c.upCh
		c.mu.Unlock()
		if uc != nil {
			return uc, nil
		}
		select {
		case <-ch:
		case <-c.done:
			return nil, errors.New("privileged helper: not running (its supervisor exited)")
		case <-t.C:
			return nil, fmt.Errorf("privileged helper: not running (none started within %v: restarting after an exit?)", ReplyTimeout)
		}
	}
}

// EnableStats turns BPF run-time statistics on until the returned file is
// closed: budget.CPUOptions.EnableStats. Errors: the helper's (say,
// BPF_ENABLE_STATS refused with EPERM when it lacks CAP_SYS_ADMIN), or
// that it is not running.
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
	var out *os.File
	err := c.exchange(req, ReplyTimeout, MaxReply, func(msg []byte, fds []int) (bool, error) {
		reply := string(msg)
		if reply == replyOK && len(fds) == 1 {
			out = os.NewFile(uintptr(fds[0]), name)
			return true, nil
		}
		closeAll(fds)
		if text, ok := strings.CutPrefix(reply, replyErr); ok {
			return true, replyError{text}
		}
		return true, errors.New("malformed reply")
	})
	return out, err
}

// replyError is the helper's error reply: the request failed, the
// protocol holds.
type replyError struct{ text string }

func (e replyError) Error() string { return "privileged helper: " + printable(e.text) }

// exchange sends req and hands each reply message (at most maxMsg bytes)
// and its descriptors to each until it says done, all within timeout. A
// replyError from each ends the exchange with the protocol intact; any
// other error, a timeout or a socket error closes the socket (see
// dropConn).
func (c *Client) exchange(req string, timeout time.Duration, maxMsg int, each func(msg []byte, fds []int) (bool, error)) error {
	c.req.Lock()
	defer c.req.Unlock()
	uc, err := c.worker()
	if err != nil {
		return err
	}
	fail := func(err error) error {
		c.dropConn(uc)
		return fmt.Errorf("privileged helper: %w", err)
	}
	if err := uc.SetDeadline(time.Now().Add(timeout)); err != nil {
		return fail(err)
	}
	if _, _, err := uc.WriteMsgUnix([]byte(req), nil, nil); err != nil {
		return fail(fmt.Errorf("send request: %w", err))
	}
	buf := make([]byte, maxMsg+1)
	oob := make([]byte, unix.CmsgSpace(4*MaxFDsPerMessage))
	for {
		n, oobn, flags, _, err := uc.ReadMsgUnix(buf, oob)
		if err != nil {
			return fail(fmt.Errorf("read reply: %w", err))
		}
		if n == 0 {
			c.dropConn(uc)
			return errors.New("privileged helper: exited")
		}
		fds, perr := replyFDs(oob[:oobn])
		if perr == nil && (flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 || n > maxMsg) {
			perr = errors.New("reply truncated")
		}
		if perr != nil {
			closeAll(fds)
			return fail(perr)
		}
		done, err := each(buf[:n], fds)
		if _, ok := err.(replyError); ok {
			return err
		}
		if err != nil {
			return fail(err)
		}
		if done {
			return nil
		}
	}
}

// LoadObject asks the worker to load and attach config name, whose files
// the exporter read as digest (exporter.SourceDigest), and adopts what it
// hands over into spec and cfg (loader.Adopt; tracepoint programs that
// came without links are linked through c): exporter.ObjectLoader.
// Errors: the helper's (its load's error text), the protocol's (then the
// socket is closed, and the supervisor starts a new worker), or Adopt's.
func (c *Client) LoadObject(name, digest string, spec *ebpf.CollectionSpec, cfg *config.Config) (*loader.Object, error) {
	h, err := c.load(name, digest, cfg)
	if err != nil {
		return nil, err
	}
	return loader.Adopt(spec, cfg, h, c)
}

// load sends a load request and collects the reply into a Handover (its
// descriptors are closed on any error).
func (c *Client) load(name, digest string, cfg *config.Config) (loader.Handover, error) {
	h := loader.Handover{Maps: map[string]int{}, Programs: map[string]int{}, Links: map[string][]int{}}
	for _, g := range cfg.Alternatives {
		h.Chosen = append(h.Chosen, -2) // not given yet
		h.Errors = append(h.Errors, make([]string, len(g.Programs)))
	}
	nfds, nmsgs := 0, 0
	err := c.exchange(reqLoad+" "+name+" "+digest, c.loadTimeout, MaxLoadMessage, func(msg []byte, fds []int) (bool, error) {
		nmsgs++
		nfds += len(fds)
		m, err := parseLoadMessage(msg, len(fds))
		if err == nil && (nfds > MaxLoadFDs || nmsgs > MaxLoadMessages) {
			err = fmt.Errorf("reply of more than %d descriptors or %d messages", MaxLoadFDs, MaxLoadMessages)
		}
		if err != nil {
			closeAll(fds)
			return true, err
		}
		switch m.kind {
		case replyOK:
			for g, ch := range h.Chosen {
				if ch == -2 {
					return true, fmt.Errorf("alternatives group %d not resolved", g)
				}
			}
			return true, nil
		case replyErr:
			return true, replyError{m.text}
		case msgMap, msgProg:
			dst := h.Maps
			if m.kind == msgProg {
				dst = h.Programs
			}
			if _, dup := dst[m.name]; dup {
				closeAll(fds)
				return true, fmt.Errorf("%s %s given twice", m.kind, m.name)
			}
			dst[m.name] = fds[0]
		case msgLink:
			h.Links[m.name] = append(h.Links[m.name], fds...)
		case msgAlt, msgAltErr:
			if m.group >= len(h.Chosen) || m.choice >= len(h.Errors[m.group]) {
				return true, fmt.Errorf("alternatives group %d choice %d: the config has %d groups", m.group, m.choice, len(h.Chosen))
			}
			if m.kind == msgAlt {
				h.Chosen[m.group] = m.choice
			} else {
				h.Errors[m.group][m.choice] = m.text
			}
		}
		return false, nil
	})
	if err != nil {
		h.Close()
		return loader.Handover{}, err
	}
	return h, nil
}

// replyFDs returns the descriptors of a message's SCM_RIGHTS.
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
			closeAll(out)
			return nil, err
		}
		out = append(out, fds...)
	}
	return out, nil
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// Close closes the sockets, so that the supervisor reads end of file,
// kills the worker and exits, and waits up to 2 s for it (then kills it).
// It returns nil once the supervisor is gone.
func (c *Client) Close() error {
	c.stopping.Store(true)
	if c.ctl != nil {
		c.ctl.Close()
	}
	c.setConn(nil, 0)
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
// start is logged at WARN and gives nil (reloads then load in this
// process, which fails for changed configs once capabilities are
// dropped; the CPU budget measures only while statistics are on
// otherwise; re-attaches need the capabilities kept with
// --capabilities.keep).
func StartLogged(log *slog.Logger, s Settings, loadTimeout time.Duration) *Client {
	c, err := Start(Options{Logger: log, Settings: s, LoadTimeout: loadTimeout})
	if err != nil {
		log.Warn("privileged helper not started: reloads of changed configs, the CPU budget's statistics and re-attaches of tracepoint programs fail after the capability drop", "err", err)
		return nil
	}
	log.Info("privileged helper started", "supervisor_pid", c.SupervisorPid())
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

// Loader returns c as an exporter.ObjectLoader for
// exporter.Options.Loader, or a nil interface for a nil client.
func (c *Client) Loader() exporter.ObjectLoader {
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

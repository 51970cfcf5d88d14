// SPDX-License-Identifier: Apache-2.0

package privsep

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/loader"
)

// Restart backoff of the worker: RestartBackoff after its first exit,
// doubling at each exit up to MaxRestartBackoff; a worker that ran
// StableRun or longer resets it.
const (
	RestartBackoff    = 250 * time.Millisecond
	MaxRestartBackoff = time.Minute
	StableRun         = 5 * time.Minute
)

// helperEnv is the helpers' whole environment. containermaxprocs=0: the
// Go runtime would otherwise keep two cgroup files open for its life
// (GOMAXPROCS follows the CPU limit), which a helper does not need.
var helperEnv = []string{"GODEBUG=containermaxprocs=0"}

// selfExe is the binary the helpers run: the exporter's own, even if the
// file was replaced since it started.
const selfExe = "/proc/self/exe"

// Main runs a helper process (the hidden command Command) with its
// arguments: the supervisor, or with "worker" first, the worker (see the
// package doc). Both ask for SIGKILL when their parent dies, close the
// descriptors they inherited but 0 to 3, and parse the settings. SIGINT
// and SIGTERM do not end them at once (StopGrace). It returns the exit
// code: 0 at end of file on the socket, 1 when setting up failed, 2 for
// bad arguments.
func Main(log *slog.Logger, args []string) int {
	stop := catchStop()
	worker := len(args) > 0 && args[0] == argWorker
	if worker {
		args = args[1:]
	}
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		log.Error("privileged helper: PR_SET_PDEATHSIG", "err", err)
		return 1
	}
	if os.Getppid() == 1 {
		return 0 // the parent died before PR_SET_PDEATHSIG
	}
	if n, err := closeInherited(socketFD); err != nil {
		log.Error("privileged helper: closing inherited descriptors", "err", err)
		return 1
	} else if n > 0 {
		log.Debug("privileged helper: closed inherited descriptors", "count", n)
	}
	s, err := ParseArgs(args)
	if err != nil {
		log.Error("privileged helper: bad arguments", "err", err)
		return 2
	}
	if worker {
		afterStop(log, stop, StopGrace, func(sig os.Signal) {
			log.Warn("privileged helper: stop signal, but its socket stayed open: exiting (the supervisor starts another)", "pid", os.Getpid(), "signal", sig.String(), "grace", StopGrace)
			os.Exit(0)
		})
		return workerMain(log, s)
	}
	return supervise(log, socketFD, args, stop)
}

// supervise runs the supervisor on the control socket ctl: it runs a
// worker with args, sends the exporter "up <pid>" with the worker's
// socket, waits for the worker to exit, sends "down <pid> <status>", and
// runs the next one after the backoff; at end of file on ctl it kills the
// worker and exits 0. After a signal on stop (SIGINT, SIGTERM) that end
// of file is awaited for StopGrace at most.
func supervise(log *slog.Logger, ctl int, args []string, stop <-chan os.Signal) int {
	// The workers' PR_SET_PDEATHSIG fires when the thread that started
	// them exits: keep this goroutine on one thread for good.
	runtime.LockOSThread()
	r, err := loader.PassOnCapabilities(HelperCapabilities)
	if err != nil {
		log.Error("privileged helper: reducing capabilities failed", "err", err)
		return 1
	}
	unix.CloseOnExec(ctl)
	log.Info("privileged helper supervisor running", "pid", os.Getpid(), "cap_prm", r.After.Permitted.Hex(), "passed_on", r.After.Permitted.String())
	var current atomic.Int64 // the running worker's pid
	var closing atomic.Bool  // end of file on ctl: exiting
	reaped := make(chan struct{})
	// end kills the worker and waits for the loop below to reap it, so
	// that the exporter's stop leaves no process behind (systemd would
	// kill it, and log so) and the loop does not report it as a worker
	// that died.
	end := func() {
		closing.Store(true)
		if pid := current.Load(); pid > 0 {
			unix.Kill(int(pid), unix.SIGKILL)
			select {
			case <-reaped:
			case <-time.After(time.Second):
			}
		}
	}
	afterStop(log, stop, StopGrace, func(sig os.Signal) {
		end()
		log.Error("privileged helper supervisor: stop signal, but the exporter kept running: exiting, the helper will not be restarted (reloads of changed configs, the CPU budget's statistics and re-attaches of tracepoint programs fail from now on)", "pid", os.Getpid(), "signal", sig.String(), "grace", StopGrace)
		os.Exit(0)
	})
	go func() {
		// Nothing is read from the exporter but the end of the socket.
		buf := make([]byte, 1)
		for {
			n, _, _, _, err := unix.Recvmsg(ctl, buf, nil, 0)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil || n == 0 {
				end()
				os.Exit(0)
			}
		}
	}()
	backoff := RestartBackoff
	for {
		pid, sock, err := startWorker(args)
		if err != nil {
			log.Error("privileged helper: starting the worker failed", "err", err, "retry_in", backoff)
		} else {
			current.Store(int64(pid))
			err := send(ctl, []byte(msgUp+" "+strconv.Itoa(pid)), []int{sock})
			unix.Close(sock)
			if err != nil {
				unix.Kill(pid, unix.SIGKILL)
				return 0 // the exporter is gone
			}
			start := time.Now()
			status, clean := waitExit(pid)
			current.Store(0)
			// A worker exits 0 only at the end of its own socket, which the
			// exporter closes with ctl when it stops: give the reader of
			// ctl the moment it needs to see that end too.
			if closing.Load() || clean && awaitTrue(&closing, closingWait) {
				close(reaped)
				select {} // the exit is under way
			}
			ran := time.Since(start)
			if ran >= StableRun {
				backoff = RestartBackoff
			}
			log.Warn("privileged helper worker exited: starting another", "pid", pid, "status", status, "ran", ran.Round(time.Millisecond), "restart_in", backoff)
			if err := send(ctl, cut(msgDown+" "+strconv.Itoa(pid)+" "+status, MaxReply), nil); err != nil {
				return 0
			}
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, MaxRestartBackoff)
	}
}

// closingWait is how long the supervisor waits, after a worker exited 0,
// for the end of file on its own socket that comes with the exporter's
// stop, before it counts the exit as a worker that died.
const closingWait = time.Second

// awaitTrue reports whether b becomes true within d.
func awaitTrue(b *atomic.Bool, d time.Duration) bool {
	for deadline := time.Now().Add(d); !b.Load(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// startWorker runs a worker with args and returns its pid and the
// supervisor's end of its socket. The worker gets the supervisor's
// standard streams and its end of the socket as 3, nothing else.
func startWorker(args []string) (int, int, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, -1, fmt.Errorf("socketpair: %w", err)
	}
	argv := append([]string{selfExe, Command, argWorker}, args...)
	pid, err := syscall.ForkExec(selfExe, argv, &syscall.ProcAttr{
		Env:   helperEnv,
		Files: []uintptr{0, 1, 2, uintptr(fds[1])},
		Sys:   &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	})
	unix.Close(fds[1])
	if err != nil {
		unix.Close(fds[0])
		return 0, -1, fmt.Errorf("start %s: %w", selfExe, err)
	}
	return pid, fds[0], nil
}

// waitExit waits for pid and describes how it ended; clean is whether it
// exited with status 0.
func waitExit(pid int) (status string, clean bool) {
	var ws unix.WaitStatus
	for {
		_, err := unix.Wait4(pid, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return "wait: " + err.Error(), false
		}
		break
	}
	switch {
	case ws.Signaled():
		return "killed by " + unix.SignalName(ws.Signal()), false
	case ws.Exited():
		return "exit status " + strconv.Itoa(ws.ExitStatus()), ws.ExitStatus() == 0
	}
	return "ended", false
}

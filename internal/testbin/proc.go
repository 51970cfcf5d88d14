// SPDX-License-Identifier: Apache-2.0

// Package testbin runs the helper servers tests need (a kube-apiserver, an
// OpenTelemetry Collector ...): it finds a binary built into the module's
// .cache/<name>/<version>/ by its tools/<name>/build.sh, picks free loopback
// ports, and runs the process with its output in a log file, stopped when
// the test ends.
package testbin

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/kernel-exporter/kernel_exporter/bounded"
)

// Proc is one server process, its output going to a log file.
type Proc struct {
	Name string // for messages
	Log  string // the log file's path
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	err  error         // Wait's result, valid once done is closed
}

// StartProc starts bin with args, stdout and stderr to the file logPath. The
// process gets SIGKILL if the test binary dies first.
func StartProc(name, logPath, bin string, args ...string) (*Proc, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout = f
	cmd.Stderr = f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	p := &Proc{Name: name, Log: logPath, cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// Pdeathsig fires when the OS thread that started the child
		// ends, not the test process: the Go runtime ends the thread of
		// a goroutine that exits while locked to it (integration's
		// inNetns does so), and any goroutine may have been on the thread
		// that ran Start. The child is started and waited for from this
		// goroutine, locked to its thread until the child has exited, so
		// that no other goroutine ever runs on that thread.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			f.Close()
			started <- fmt.Errorf("testbin: start %s: %w", name, err)
			return
		}
		started <- nil
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
}

// Exited reports whether the process has ended, and how.
func (p *Proc) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Stop sends SIGTERM, then SIGKILL after grace, and waits for the exit.
func (p *Proc) Stop(grace time.Duration) {
	if ok, _ := p.Exited(); ok {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// Tail returns the last n lines of the process' log.
func (p *Proc) Tail(n int) string {
	const window = 64 << 10 // the tail is read from the last 64 KiB
	f, err := bounded.Open(p.Log, p.Name+" log")
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > window {
		_, _ = f.Seek(fi.Size()-window, io.SeekStart)
	}
	b, err := io.ReadAll(io.LimitReader(f, window))
	if err != nil {
		return fmt.Sprintf("(%s log: %v)", p.Name, err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "--- last %d lines of %s (%s) ---\n", len(lines), p.Name, p.Log)
	for _, l := range lines {
		buf.WriteString(l)
		buf.WriteByte('\n')
	}
	return buf.String()
}

// FreePorts returns n distinct free TCP ports on 127.0.0.1, all held open
// until all are chosen.
func FreePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("testbin: free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

package kubetest

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/kernel-exporter/kernel_exporter/bounded"
)

// proc is one server process of the cluster, its output going to a log file.
type proc struct {
	name string
	log  string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	err  error         // Wait's result, valid once done is closed
}

// startProc starts bin with args, stdout and stderr to the file logPath. The
// process gets SIGKILL if the test binary dies first.
func startProc(name, logPath, bin string, args ...string) (*proc, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout = f
	cmd.Stderr = f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("kubetest: start %s: %w", name, err)
	}
	p := &proc{name: name, log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended, and how.
func (p *proc) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// stop sends SIGTERM, then SIGKILL after grace, and waits for the exit.
func (p *proc) stop(grace time.Duration) {
	if ok, _ := p.exited(); ok {
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

// tail returns the last n lines of the process' log.
func (p *proc) tail(n int) string {
	const window = 64 << 10 // the tail is read from the last 64 KiB
	f, err := bounded.Open(p.log, p.name+" log")
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > window {
		_, _ = f.Seek(fi.Size()-window, io.SeekStart)
	}
	b, err := io.ReadAll(io.LimitReader(f, window))
	if err != nil {
		return fmt.Sprintf("(%s log: %v)", p.name, err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "--- last %d lines of %s (%s) ---\n", len(lines), p.name, p.log)
	for _, l := range lines {
		buf.WriteString(l)
		buf.WriteByte('\n')
	}
	return buf.String()
}

// freePorts returns n distinct free TCP ports on 127.0.0.1, all held open
// until all are chosen.
func freePorts(n int) ([]int, error) {
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
			return nil, fmt.Errorf("kubetest: free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

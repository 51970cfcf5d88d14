// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestProgramAcceptPerProcess checks accept_per_process's per-process
// counts exactly: two listeners (127.0.0.1 and ::1, random ports), and two
// child processes, one after the other, each with its accepting thread
// named after the test. Child A accepts 7 connections on the IPv4
// listener with accept4() and 3 on the IPv6 one with accept(); child B 2
// and 11. Each {pid, port, family, comm} series must have moved by exactly
// that number: the pid is the child's own, so nothing else on the machine
// can add to it.
func TestProgramAcceptPerProcess(t *testing.T) {
	e := Start(t, "--programs=accept_per_process")
	if v := e.Scrape().Value("kernel_exporter_config_up", L("config", "accept_per_process")); v != 1 {
		t.Fatalf("config_up{config=accept_per_process} = %v, want 1\n%s", v, e.Logs())
	}
	checkAcceptPerProcess(t, e)
}

// TestMatrixAcceptPerProcess is TestProgramAcceptPerProcess as a row of the
// kernel matrix (make test-kernels runs only TestMatrix* tests), so that
// each kernel of the matrix reports it.
func TestMatrixAcceptPerProcess(t *testing.T) {
	r := matrixReport(t, "accept_per_process", "default")
	e := Start(t, "--programs=accept_per_process")
	checkChoice(t, e, "accept_per_process", "tracepoint", r)
	r.result = "moved: " + checkAcceptPerProcess(t, e)
}

// checkAcceptPerProcess runs the workload of TestProgramAcceptPerProcess
// against e and checks the counts; it returns a summary.
func checkAcceptPerProcess(t *testing.T, e *Exporter) string {
	t.Helper()
	const metric = "kernel_accepted_connections_total"
	l4 := listenSocket(t, unix.AF_INET, loopback4(0))
	l6 := listenSocket(t, unix.AF_INET6, loopback6(0))
	p4, err := localPort(l4)
	if err != nil {
		t.Fatal(err)
	}
	p6, err := localPort(l6)
	if err != nil {
		t.Fatal(err)
	}

	type child struct {
		comm   string
		n4, n6 int
		pid    int
	}
	children := []*child{
		{comm: randomName(t, "kxa-"), n4: 7, n6: 3},
		{comm: randomName(t, "kxb-"), n4: 2, n6: 11},
	}
	for _, c := range children {
		// One child at a time: each accepts exactly the connections
		// dialed while it runs (they wait in the accept queue until it
		// does), and has exited before the next one starts.
		cmd := childCmd(t, "accept", fmt.Sprintf("%s:%d:%d", c.comm, c.n4, c.n6), nil)
		// The child gets duplicates, closed here once it has started: an
		// *os.File owns its descriptor (and closes it when collected), so
		// the listeners themselves must not be wrapped.
		for _, l := range []int{l4, l6} {
			d, err := unix.Dup(l)
			if err != nil {
				t.Fatal(err)
			}
			cmd.ExtraFiles = append(cmd.ExtraFiles, os.NewFile(uintptr(d), "listener"))
		}
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Start()
		for _, f := range cmd.ExtraFiles {
			f.Close()
		}
		if err != nil {
			t.Fatal(err)
		}
		c.pid = cmd.Process.Pid
		dial := func(family, port, n int) {
			for i := range n {
				fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
				if err != nil {
					t.Fatal(err)
				}
				to := loopback4(port)
				if family == unix.AF_INET6 {
					to = loopback6(port)
				}
				if err := unix.Connect(fd, to); err != nil {
					t.Fatalf("connect #%d to port %d: %v", i, port, err)
				}
				unix.Close(fd)
			}
		}
		dial(unix.AF_INET, p4, c.n4)
		dial(unix.AF_INET6, p6, c.n6)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("accept child %s: %v\n%s", c.comm, err, out.String())
		}
	}

	ms := e.Scrape()
	var summary []string
	for _, c := range children {
		pid := strconv.Itoa(c.pid)
		for _, s := range []struct {
			port   int
			family string
			want   int
		}{{p4, "inet", c.n4}, {p6, "inet6", c.n6}} {
			lbl := L("pid", pid, "port", strconv.Itoa(s.port), "family", s.family, "comm", c.comm)
			if v := ms.Value(metric, lbl); v != float64(s.want) {
				t.Errorf("%s%v = %v, want exactly %d\n%s", metric, lbl, v, s.want, ms.seriesDump(metric))
			} else {
				t.Logf("%s%v = %v", metric, lbl, v)
				summary = append(summary, fmt.Sprintf("%s %v", s.family, v))
			}
		}
		if n := ms.Series(metric, L("pid", pid)); n != 2 {
			t.Errorf("pid %s has %d series, want 2 (one per listener)\n%s", pid, n, ms.seriesDump(metric))
		}
	}
	return "2 processes accepted " + strings.Join(summary, ", ")
}

// listenSocket opens a TCP listener of family bound to bind, closed at test
// cleanup.
func listenSocket(t *testing.T, family int, bind unix.Sockaddr) int {
	t.Helper()
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, bind); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 128); err != nil {
		t.Fatal(err)
	}
	return fd
}

// acceptN is the "accept" child mode: arg is "comm:n4:n". The calling
// thread is named comm, then takes n4 connections from fd 3 with accept4()
// and n from fd 4 with the older accept(), closing each.
func acceptN(arg string) error {
	parts := strings.Split(arg, ":")
	if len(parts) != 3 {
		return fmt.Errorf("accept: bad argument %q", arg)
	}
	n4, err1 := strconv.Atoi(parts[1])
	n, err2 := strconv.Atoi(parts[2])
	if err1 != nil || err2 != nil || n4 < 0 || n < 0 || n4 > 1000 || n > 1000 {
		return fmt.Errorf("accept: bad counts in %q", arg)
	}
	runtime.LockOSThread()
	name, err := unix.BytePtrFromString(parts[0])
	if err != nil {
		return fmt.Errorf("accept: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(name)), 0, 0, 0); err != nil {
		return fmt.Errorf("accept: name thread: %w", err)
	}
	for i := range n4 {
		fd, _, err := unix.Accept4(3, unix.SOCK_CLOEXEC)
		if err != nil {
			return fmt.Errorf("accept4 #%d: %w", i, err)
		}
		unix.Close(fd)
	}
	for i := range n {
		fd, _, errno := unix.Syscall(unix.SYS_ACCEPT, 4, 0, 0)
		if errno != 0 {
			return fmt.Errorf("accept #%d: %w", i, errno)
		}
		unix.Close(int(fd))
	}
	return nil
}

// TestProgramAcceptPerProcessHelpers runs accept_per_process's fallback for
// kernels without bpf_get_current_task_btf (before 5.11), which reads
// every task field with helpers, on this kernel (the choices swapped in a
// copy of the config), with TestProgramAcceptPerProcess's exact
// checks.
func TestProgramAcceptPerProcessHelpers(t *testing.T) {
	e, ms := startBundledVariant(t, "accept_per_process",
		"      - [accept4_exit_btf, accept_exit_btf]\n      - [accept4_exit, accept_exit]\n",
		"      - [accept4_exit, accept_exit]\n      - [accept4_exit_btf, accept_exit_btf]\n")
	checkAttached(t, ms, "accept_per_process", "accept4_exit", "accept_exit")
	checkAcceptPerProcess(t, e)
}

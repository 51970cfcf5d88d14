// SPDX-License-Identifier: Apache-2.0

package privsep

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/internal/testenv"
	"github.com/kernel-exporter/kernel_exporter/loader"
)

// TestMain runs the helper when the test binary is started as one (by
// TestStartHelper).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == Command {
		os.Exit(Main(slog.New(slog.NewTextHandler(os.Stderr, nil))))
	}
	os.Exit(m.Run())
}

// fakeOps answer with a pipe's read end, or fail.
type fakeOps struct {
	fail   error
	called []string
}

func (f *fakeOps) fd() (int, error) {
	if f.fail != nil {
		return -1, f.fail
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return -1, err
	}
	unix.Close(p[1])
	return p[0], nil
}

func (f *fakeOps) enableStats() (int, error) {
	f.called = append(f.called, "stats")
	return f.fd()
}

func (f *fakeOps) openTracepoint(group, event string) (int, error) {
	f.called = append(f.called, "tracepoint "+group+"/"+event)
	return f.fd()
}

// pair starts serve on one end of a socketpair with o and returns a
// client on the other end and the channel serve's result comes on.
func pair(t *testing.T, o ops) (*Client, int, <-chan error) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- serve(fds[1], o)
		unix.Close(fds[1])
	}()
	c := newClient(fds[0])
	t.Cleanup(func() { c.Close() })
	return c, fds[0], done
}

func TestParseRequest(t *testing.T) {
	for _, tc := range []struct {
		in, err string
	}{
		{"stats", ""},
		{"tracepoint syscalls sys_enter_getpid", ""},
		{"tracepoint sched sched_switch", ""},
		{"stats now", "no argument"},
		{"tracepoint syscalls", "want: tracepoint"},
		{"tracepoint a b c", "want: tracepoint"},
		{"tracepoint ../.. id", "only A-Z"},
		{"tracepoint a/b c", "only A-Z"},
		{"tracepoint  c", "1 to 128"},
		{"tracepoint " + strings.Repeat("a", 129) + " b", "1 to 128"},
		{"tracepoint a b\n", "only A-Z"},
		{"STATS", "unknown request"},
		{"", "unknown request"},
		{"mount /", "unknown request"},
		{strings.Repeat("x", MaxRequest+1), "more than"},
	} {
		_, err := parseRequest([]byte(tc.in))
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("parseRequest(%q) = %v, want %q", tc.in, err, tc.err)
		}
	}
}

// TestServe runs the protocol over a socketpair with fake operations: a
// valid request gets a descriptor, a failed one the error text, a bad or
// unknown one is refused without calling anything, an oversized one too,
// and end of file ends serve with nil.
func TestServe(t *testing.T) {
	o := &fakeOps{}
	c, fd, done := pair(t, o)
	f, err := c.EnableStats()
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	tp, err := c.OpenTracepoint("syscalls", "sys_enter_getpid")
	if err != nil {
		t.Fatal(err)
	}
	if fl, err := unix.FcntlInt(tp.Fd(), unix.F_GETFD, 0); err != nil || fl&unix.FD_CLOEXEC == 0 {
		t.Errorf("received descriptor: flags %d %v, want FD_CLOEXEC", fl, err)
	}
	tp.Close()
	// The client refuses a bad name itself; the helper refuses it too.
	if _, err := c.OpenTracepoint("../x", "id"); err == nil || !strings.Contains(err.Error(), "only A-Z") {
		t.Errorf("bad name: %v", err)
	}
	for _, req := range []string{"tracepoint ../x id", "unknown", strings.Repeat("y", 4*MaxRequest)} {
		f, err := c.call(req, "x")
		if err == nil {
			f.Close()
			t.Errorf("request %.20q accepted", req)
			continue
		}
		if !strings.Contains(err.Error(), "privileged helper: ") {
			t.Errorf("request %.20q: %v", req, err)
		}
		t.Logf("%.20q: %v", req, err)
	}
	o.fail = errors.New("BPF_ENABLE_STATS: operation not permitted")
	if _, err := c.EnableStats(); err == nil || !strings.Contains(err.Error(), "operation not permitted") {
		t.Errorf("failed operation: %v, want its error text", err)
	}
	if got := strings.Join(o.called, ","); got != "stats,tracepoint syscalls/sys_enter_getpid,stats" {
		t.Errorf("operations called: %s", got)
	}
	unix.Shutdown(fd, unix.SHUT_WR)
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve at end of file: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("serve did not end at end of file")
	}
	if _, err := c.EnableStats(); err == nil {
		t.Error("request after the helper ended succeeded")
	}
}

// TestErrorReplyBounded: a long error text is cut to MaxReply.
func TestErrorReplyBounded(t *testing.T) {
	if r := errorReply(errors.New(strings.Repeat("e", 4*MaxReply))); len(r) != MaxReply {
		t.Errorf("error reply of %d bytes, want %d", len(r), MaxReply)
	}
}

// TestStartHelper starts the real helper (this test binary, see TestMain):
// it keeps exactly HelperCapabilities with no_new_privs, turns statistics
// on, opens a tracepoint, refuses an unknown one with the kernel's error,
// and exits when the client closes.
func TestStartHelper(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.SkipOrFail(t, "needs root for the helper's capabilities")
	}
	var logs bytes.Buffer
	c, err := Start(Options{Path: os.Args[0], Stderr: &logs})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	f, err := c.EnableStats()
	if err != nil {
		t.Fatalf("EnableStats: %v\n%s", err, logs.String())
	}
	f.Close()
	tp, err := c.OpenTracepoint("syscalls", "sys_enter_getpid")
	if err != nil {
		t.Fatalf("OpenTracepoint: %v", err)
	}
	tp.Close()
	if _, err := c.OpenTracepoint("syscalls", "no_such_event"); err == nil || !strings.Contains(err.Error(), "no_such_event") {
		t.Errorf("unknown tracepoint: %v", err)
	}
	caps, err := loader.StatusCaps("/proc/" + strconv.Itoa(c.Pid()) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"CapEff", "CapPrm", "CapBnd"} {
		if caps[k] != HelperCapabilities {
			t.Errorf("helper %s %s (%s), want %s (%s)", k, caps[k].Hex(), caps[k], HelperCapabilities.Hex(), HelperCapabilities)
		}
	}
	if caps["CapInh"] != 0 || caps["CapAmb"] != 0 || caps["NoNewPrivs"] != 1 {
		t.Errorf("helper CapInh %s CapAmb %s NoNewPrivs %d", caps["CapInh"], caps["CapAmb"], caps["NoNewPrivs"])
	}
	t.Logf("helper pid %d CapEff %s (%s)", c.Pid(), caps["CapEff"].Hex(), caps["CapEff"])
	pid := c.Pid()
	c.Close()
	if err := unix.Kill(pid, 0); !errors.Is(err, unix.ESRCH) {
		t.Errorf("helper %d still there after Close: %v", pid, err)
	}
}

// SPDX-License-Identifier: Apache-2.0

package privsep

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	dto "github.com/prometheus/client_model/go"
	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/allowlist"
	"github.com/kernel-exporter/kernel_exporter/config"
	"github.com/kernel-exporter/kernel_exporter/exporter"
	"github.com/kernel-exporter/kernel_exporter/internal/proctest"
	"github.com/kernel-exporter/kernel_exporter/internal/testenv"
	"github.com/kernel-exporter/kernel_exporter/loader"
	"github.com/kernel-exporter/kernel_exporter/programs"
)

// TestMain runs the helper when the test binary is started as one (by
// Start in the tests below, and by the supervisor for its worker).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == Command {
		os.Exit(Main(slog.New(slog.NewTextHandler(os.Stderr, nil)), os.Args[2:]))
	}
	os.Exit(m.Run())
}

// fakeOps answer with a pipe's read end, or fail.
type fakeOps struct {
	fail   error
	called []string
	// handover is what load hands over (pipes stand for maps, programs
	// and links); released counts its releases.
	handover func() loader.Handover
	released atomic.Int32
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

func (f *fakeOps) load(config, digest string) (loader.Handover, func(), error) {
	f.called = append(f.called, "load "+config)
	if f.fail != nil {
		return loader.Handover{}, nil, f.fail
	}
	h := f.handover()
	return h, func() { h.Close(); f.released.Add(1) }, nil
}

// pipeFD is a pipe's read end (standing for a kernel object).
func pipeFD(t *testing.T) int {
	t.Helper()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	unix.Close(p[1])
	return p[0]
}

// pair starts serve on one end of a socketpair with o and returns a
// client on the other end and the channel serve's result comes on.
func pair(t *testing.T, o ops) (*Client, <-chan error) {
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
	c, err := newConnClient(fds[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, done
}

func TestParseRequest(t *testing.T) {
	digest := strings.Repeat("0123456789abcdef", 4)
	for _, tc := range []struct {
		in, err string
	}{
		{"stats", ""},
		{"tracepoint syscalls sys_enter_getpid", ""},
		{"tracepoint sched sched_switch", ""},
		{"load timers bundled", ""},
		{"load my.cfg-1 " + digest, ""},
		{"stats now", "no argument"},
		{"tracepoint syscalls", "want: tracepoint"},
		{"tracepoint a b c", "want: tracepoint"},
		{"tracepoint ../.. id", "only A-Z"},
		{"tracepoint a/b c", "only A-Z"},
		{"tracepoint  c", "1 to 128"},
		{"tracepoint " + strings.Repeat("a", 129) + " b", "1 to 128"},
		{"tracepoint a b\n", "only A-Z"},
		{"load timers", "want: load"},
		{"load ../etc bundled", "no /"},
		{"load .. bundled", "not a file name"},
		{"load x " + strings.ToUpper(digest), "hex"},
		{"load x abc", "64 hex"},
		{"load x bundled y", "want: load"},
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

func TestParseLoadMessage(t *testing.T) {
	for _, tc := range []struct {
		in   string
		nfds int
		err  string
	}{
		{"map counts", 1, ""},
		{"map .rodata", 1, ""},
		{"prog handle_exec", 1, ""},
		{"link handle_exec", 64, ""},
		{"alt 0 -1", 0, ""},
		{"alt 3 2", 0, ""},
		{"alterr 0 1 load: verifier rejected program", 0, ""},
		{"ok", 0, ""},
		{"error: no such config", 0, ""},
		{"map counts", 0, "0 descriptors"},
		{"map counts", 2, "2 descriptors"},
		{"link x", 65, "65 descriptors"},
		{"ok", 1, "1 descriptors"},
		{"error: x", 1, "with descriptors"},
		{"map ../x", 1, "only A-Z"},
		{"map ", 1, "name of 0 bytes"},
		{"alt 0 -2", 0, "want -1 to 63"},
		{"alt 64 0", 0, "want 0 to 63"},
		{"alt 01 0", 0, "want 0 to 63"},
		{"alterr 0 -1 x", 0, "want 0 to 63"},
		{"alterr 0 1", 0, "want: alterr"},
		{"ok now", 0, "no argument"},
		{"mount /", 0, "unknown load reply"},
		{strings.Repeat("x", MaxLoadMessage+1), 0, "more than"},
	} {
		_, err := parseLoadMessage([]byte(tc.in), tc.nfds)
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("parseLoadMessage(%.30q, %d) = %v, want %q", tc.in, tc.nfds, err, tc.err)
		}
	}
}

func TestParseSupervisorMessage(t *testing.T) {
	if m, err := parseSupervisorMessage([]byte("up 4242"), 1); err != nil || !m.up || m.pid != 4242 {
		t.Errorf("up: %+v %v", m, err)
	}
	if m, err := parseSupervisorMessage([]byte("down 4242 killed by SIGKILL"), 0); err != nil || m.up || m.status != "killed by SIGKILL" {
		t.Errorf("down: %+v %v", m, err)
	}
	for _, bad := range []struct {
		in   string
		nfds int
	}{{"up 4242", 0}, {"up 0", 1}, {"up -1", 1}, {"up 4242 x", 1}, {"down 1 x", 1}, {"down 1", 0}, {"sideways 1 x", 0}} {
		if _, err := parseSupervisorMessage([]byte(bad.in), bad.nfds); err == nil {
			t.Errorf("parseSupervisorMessage(%q, %d) accepted", bad.in, bad.nfds)
		}
	}
}

func TestSettingsArgs(t *testing.T) {
	s := Settings{
		Sources:       []exporter.Source{{Name: "timers"}, {Name: "rl", Dir: "/etc/kernel_exporter/a=b"}},
		AttachTo:      map[string][]string{"rl": {"prog=vfs_read"}},
		DisableAttach: []string{"kprobe"},
		BTFPath:       "/tmp/vmlinux",
	}
	allowed, err := allowlist.FromDigests("--config.allowed-digests-file /a=b", []string{strings.Repeat("ab", 32), strings.Repeat("0", 64)})
	if err != nil {
		t.Fatal(err)
	}
	s.Allowed = allowed
	got, err := ParseArgs(s.Args())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Sources, s.Sources) || got.BTFPath != s.BTFPath || !slices.Equal(got.DisableAttach, s.DisableAttach) || !slices.Equal(got.AttachTo["rl"], s.AttachTo["rl"]) ||
		!slices.Equal(got.Allowed.Digests(), s.Allowed.Digests()) || got.Allowed.Source() != s.Allowed.Source() {
		t.Errorf("round trip: %+v, want %+v", got, s)
	}
	// No allow-list stays none; an empty one stays one that allows nothing.
	if got, err := ParseArgs(Settings{}.Args()); err != nil || got.Allowed != nil {
		t.Errorf("no allow-list: %+v, %v; want Allowed nil", got.Allowed, err)
	}
	empty, _ := allowlist.FromDigests("f", nil)
	if got, err := ParseArgs(Settings{Allowed: empty}.Args()); err != nil || got.Allowed == nil || len(got.Allowed.Digests()) != 0 {
		t.Errorf("empty allow-list: %+v, %v; want an empty list", got.Allowed, err)
	}
	for _, a := range s.Args() {
		if strings.HasPrefix(a, "-") {
			t.Errorf("argument %q starts with -", a)
		}
	}
	for _, bad := range [][]string{
		{"source=../x=/d"}, {"source=a=/d", "source=a=/e"}, {"attach-to=b=f"}, {"disable=bogus"},
		{"btf="}, {"mount=/"}, {"source"}, {"source=a\x00=/d"},
		{"allow=" + strings.Repeat("0", 64)}, {"allow-list=f", "allow=#" + strings.Repeat("0", 63)}, {"allow-list=f", "allow=x"},
	} {
		if _, err := ParseArgs(bad); err == nil {
			t.Errorf("ParseArgs(%q) accepted", bad)
		}
	}
}

// TestServe runs the protocol over a socketpair with fake operations: a
// valid request gets a descriptor, a failed one the error text, a bad or
// unknown one is refused without calling anything, an oversized one too,
// and end of file ends serve with nil.
func TestServe(t *testing.T) {
	o := &fakeOps{}
	c, done := pair(t, o)
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
	c.mu.Lock()
	c.conn.CloseWrite()
	c.mu.Unlock()
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

// openCount is the number of descriptors this process holds.
func openCount(t *testing.T) int {
	t.Helper()
	fds, err := openFDs()
	if err != nil {
		t.Fatal(err)
	}
	return len(fds)
}

// TestServeLoad hands over a fake load (pipes for 2 maps, 2 programs and
// 70 links of one program, more than one message holds, and an
// alternatives group): the client gets every descriptor under its name
// and the alternatives, the worker releases its copies once, a failed
// load is its error text with the socket still usable, and no descriptor
// is left open on either side.
func TestServeLoad(t *testing.T) {
	// Start the netpoller (its descriptors stay) before counting.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	w.Close()
	before := openCount(t)
	o := &fakeOps{handover: func() loader.Handover {
		h := loader.Handover{Maps: map[string]int{"counts": pipeFD(t), ".rodata": pipeFD(t)},
			Programs: map[string]int{"a": pipeFD(t), "b": pipeFD(t)}, Links: map[string][]int{},
			Chosen: []int{1}, Errors: [][]string{{"load: fentry not supported", ""}}}
		for range 70 {
			h.Links["a"] = append(h.Links["a"], pipeFD(t))
		}
		return h
	}}
	c, done := pair(t, o)
	cfg := &config.Config{Alternatives: []config.Alternative{{Name: "g", Programs: []config.Choice{{"x"}, {"y"}}}}}
	h, err := c.load("rl", bundledDigest, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Maps) != 2 || len(h.Programs) != 2 || len(h.Links["a"]) != 70 || len(h.Links) != 1 {
		t.Errorf("handover: %d maps, %d programs, links %d/%d", len(h.Maps), len(h.Programs), len(h.Links), len(h.Links["a"]))
	}
	if h.Chosen[0] != 1 || h.Errors[0][0] != "load: fentry not supported" || h.Errors[0][1] != "" {
		t.Errorf("alternatives: chosen %v errors %q", h.Chosen, h.Errors)
	}
	for _, fd := range h.FDs() {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
			t.Errorf("descriptor %d: %v", fd, err)
		}
	}
	h.Close()
	// The worker releases its copies after its last message is sent: the
	// client may read that message first.
	for i := 0; i < 500 && o.released.Load() == 0; i++ {
		time.Sleep(2 * time.Millisecond)
	}
	if n := o.released.Load(); n != 1 {
		t.Errorf("worker released its copies %d times, want 1", n)
	}
	o.fail = errors.New("rl.bpf.o: load: verifier rejected program")
	if _, err := c.load("rl", bundledDigest, cfg); err == nil || !strings.Contains(err.Error(), "verifier rejected") {
		t.Errorf("failed load: %v", err)
	}
	o.fail = nil
	if f, err := c.EnableStats(); err != nil {
		t.Errorf("stats after a failed load: %v", err)
	} else {
		f.Close()
	}
	// A reply of the wrong shape for the config: refused, socket closed.
	if _, err := c.load("rl", bundledDigest, &config.Config{}); err == nil {
		t.Error("a reply with an alternatives group the config lacks was accepted")
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("serve did not end once the client dropped the socket")
	}
	c.Close()
	if after := openCount(t); after != before {
		t.Errorf("%d descriptors open before, %d after", before, after)
	}
}

// TestErrorReplyBounded: a long error text is cut to MaxReply.
func TestErrorReplyBounded(t *testing.T) {
	if r := errorReply(errors.New(strings.Repeat("e", 4*MaxReply))); len(r) != MaxReply {
		t.Errorf("error reply of %d bytes, want %d", len(r), MaxReply)
	}
}

// runtimeFD reports whether a descriptor target is one the Go runtime
// opens for itself, close-on-exec, in every process of this binary: its
// netpoller (started at init by a dependency that opens the executable,
// google.golang.org/protobuf/internal/detrand).
func runtimeFD(target string) bool {
	return target == "anon_inode:[eventpoll]" || target == "anon_inode:[eventfd]"
}

// checkHelperFDs checks that pid holds 0, 1, 2, a socket as 3, and
// nothing else but the Go runtime's own descriptors (runtimeFD), waiting
// up to 2 s for it (a helper closes what it inherited at its start).
func checkHelperFDs(t *testing.T, what string, pid int) {
	t.Helper()
	var fds map[int]string
	var bad []string
	deadline := time.Now().Add(2 * time.Second)
	for {
		var err error
		if fds, err = proctest.FDs(pid); err != nil {
			t.Fatal(err)
		}
		bad = nil
		for n, target := range fds {
			if n > 3 && !runtimeFD(target) || n == 3 && !strings.HasPrefix(target, "socket:") {
				bad = append(bad, strconv.Itoa(n)+" -> "+target)
			}
		}
		for n := range 4 {
			if _, ok := fds[n]; !ok {
				bad = append(bad, strconv.Itoa(n)+" missing")
			}
		}
		if len(bad) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("%s %d descriptors: %v", what, pid, fds)
	if len(bad) > 0 {
		t.Errorf("%s %d: descriptors %v, want only 0, 1, 2, its socket as 3 and the Go runtime's poller", what, pid, bad)
	}
}

// gone waits up to 2 s for pid to be gone (or a zombie, whose parent has
// not reaped it yet).
func gone(pid int) bool {
	for range 100 {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return true
		}
		if _, rest, ok := strings.Cut(string(b), ") "); ok && strings.HasPrefix(rest, "Z") {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// logFile is a file the helpers log into (their stderr, passed as is, so
// no goroutine copies it); String reads it.
type logFile struct{ *os.File }

func newLogFile(t *testing.T) logFile {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "helper-log")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return logFile{f}
}

func (l logFile) String() string {
	b, _ := os.ReadFile(l.Name())
	return string(b)
}

// startHelper starts the real helper (this test binary, see TestMain)
// with s, logging into a file.
func startHelper(t *testing.T, s Settings) (*Client, logFile) {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.SkipOrFail(t, "needs root for the helper's capabilities")
	}
	logs := newLogFile(t)
	c, err := Start(Options{Path: os.Args[0], Stderr: logs.File, Settings: s, Logger: slog.New(slog.NewTextHandler(logs.File, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, logs
}

// TestStartHelper starts the real helper with a descriptor this process
// leaves open across exec (as a shell's fd 9): the supervisor passes on
// exactly HelperCapabilities (permitted, inheritable, ambient; none
// effective) with no_new_privs; the worker keeps exactly
// HelperCapabilities (effective, permitted, bounding) with no_new_privs,
// turns statistics on, opens a tracepoint and refuses an unknown one
// with the kernel's error; neither holds any descriptor but 0 to 3; both
// are gone after Close.
func TestStartHelper(t *testing.T) {
	marker, err := unix.Open("/proc/self/status", unix.O_RDONLY, 0) // no O_CLOEXEC
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(marker)
	c, logs := startHelper(t, Settings{})
	f, err := c.EnableStats()
	if err != nil {
		t.Fatalf("EnableStats: %v\n%s", err, logs)
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
	self, err := loader.CurrentCapabilities()
	if err != nil {
		t.Fatal(err)
	}
	want := HelperCapabilities & self.Permitted // each only if this process had it
	sup, worker := c.SupervisorPid(), c.Pid()
	if kids := proctest.Children(sup); !slices.Equal(kids, []int{worker}) {
		t.Errorf("supervisor %d has children %v, want the worker %d", sup, kids, worker)
	}
	wcaps, err := loader.StatusCaps("/proc/" + strconv.Itoa(worker) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"CapEff", "CapPrm", "CapBnd"} {
		if wcaps[k] != want {
			t.Errorf("worker %s %s (%s), want %s (%s)", k, wcaps[k].Hex(), wcaps[k], want.Hex(), want)
		}
	}
	if wcaps["CapInh"] != 0 || wcaps["CapAmb"] != 0 || wcaps["NoNewPrivs"] != 1 {
		t.Errorf("worker CapInh %s CapAmb %s NoNewPrivs %d", wcaps["CapInh"], wcaps["CapAmb"], wcaps["NoNewPrivs"])
	}
	scaps, err := loader.StatusCaps("/proc/" + strconv.Itoa(sup) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"CapPrm", "CapInh", "CapAmb", "CapBnd"} {
		if scaps[k] != want {
			t.Errorf("supervisor %s %s (%s), want %s", k, scaps[k].Hex(), scaps[k], want.Hex())
		}
	}
	if scaps["CapEff"] != 0 || scaps["NoNewPrivs"] != 1 {
		t.Errorf("supervisor CapEff %s NoNewPrivs %d, want none and 1", scaps["CapEff"], scaps["NoNewPrivs"])
	}
	t.Logf("supervisor %d CapPrm %s; worker %d CapEff %s (%s)", sup, scaps["CapPrm"].Hex(), worker, wcaps["CapEff"].Hex(), wcaps["CapEff"])
	checkHelperFDs(t, "supervisor", sup)
	checkHelperFDs(t, "worker", worker)
	c.Close()
	for _, pid := range []int{sup, worker} {
		if !gone(pid) {
			t.Errorf("helper %d still there 2 s after Close", pid)
		}
	}
}

// TestCloseInherited starts the supervisor by hand with a descriptor it
// must not keep as 4 (without markInheritedCloexec, which Start runs):
// closeInherited closes it before anything else, in the supervisor and
// so in the worker.
func TestCloseInherited(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.SkipOrFail(t, "needs root for the helper's capabilities")
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctl, err := unixConn(fds[0], "ctl")
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Close()
	child := os.NewFile(uintptr(fds[1]), "child")
	marker, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer marker.Close()
	logs := newLogFile(t)
	cmd := exec.Command(os.Args[0], Command)
	cmd.ExtraFiles = []*os.File{child, marker}
	cmd.Stderr = logs.File
	cmd.Env = helperEnv
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	child.Close()
	defer cmd.Wait()
	defer cmd.Process.Kill()
	buf, oob := make([]byte, MaxReply), make([]byte, unix.CmsgSpace(4))
	ctl.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, oobn, _, _, err := ctl.ReadMsgUnix(buf, oob)
	if err != nil {
		t.Fatalf("no message from the supervisor: %v\n%s", err, logs.String())
	}
	wfds, _ := replyFDs(oob[:oobn])
	m, err := parseSupervisorMessage(buf[:n], len(wfds))
	if err != nil || !m.up {
		closeAll(wfds)
		t.Fatalf("first message %q: %v", buf[:n], err)
	}
	// A request answered: the worker has run its start-up.
	c, err := newConnClient(wfds[0])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if f, err := c.EnableStats(); err != nil {
		t.Fatalf("EnableStats: %v\n%s", err, logs.String())
	} else {
		f.Close()
	}
	checkHelperFDs(t, "supervisor", cmd.Process.Pid)
	checkHelperFDs(t, "worker", m.pid)
}

// metricValue returns the value of a gauge or counter of c.
func metricValue(t *testing.T, c *Client, name string) float64 {
	t.Helper()
	var m dto.Metric
	switch name {
	case "up":
		c.up.Write(&m)
		return m.GetGauge().GetValue()
	default:
		c.restarts.Write(&m)
		return m.GetCounter().GetValue()
	}
}

// TestRestart kills the worker: the client sees it down (up 0), the
// supervisor starts another after RestartBackoff, up is 1 again and
// restarts_total 1, and the new worker answers.
func TestRestart(t *testing.T) {
	c, logs := startHelper(t, Settings{})
	f, err := c.EnableStats()
	if err != nil {
		t.Fatalf("EnableStats: %v\n%s", err, logs)
	}
	f.Close()
	first := c.Pid()
	if v := metricValue(t, c, "up"); v != 1 {
		t.Fatalf("up %v with a worker running", v)
	}
	t0 := time.Now()
	if err := unix.Kill(first, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var sawDown bool
	var down, up time.Duration
	for time.Since(t0) < 10*time.Second {
		v := metricValue(t, c, "up")
		if v == 0 && !sawDown {
			sawDown, down = true, time.Since(t0)
		}
		if v == 1 && sawDown && c.Pid() != first {
			up = time.Since(t0)
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !sawDown || up == 0 {
		t.Fatalf("after killing worker %d: down seen %v, up again after %v\n%s", first, sawDown, up, logs)
	}
	t.Logf("worker %d killed: up 0 after %v, worker %d up after %v (backoff %v)", first, down, c.Pid(), up, RestartBackoff)
	if v := metricValue(t, c, "restarts"); v != 1 {
		t.Errorf("restarts_total %v, want 1", v)
	}
	f, err = c.EnableStats()
	if err != nil {
		t.Fatalf("EnableStats from the new worker: %v", err)
	}
	f.Close()
	if !strings.Contains(logs.String(), "killed by SIGKILL") {
		t.Errorf("the worker's end is not logged\n%s", logs)
	}
}

// TestLoadBundled has the real worker load the bundled timers program
// (as for a reload: the embedded bundle, digest "bundled") and adopts it:
// its program is attached and counts timer starts into the adopted map;
// a config the helper was not started with, or a digest that does not
// match, is refused.
func TestLoadBundled(t *testing.T) {
	c, logs := startHelper(t, Settings{Sources: []exporter.Source{{Name: "timers"}}})
	y, err := fs.ReadFile(programs.FS, "timers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse("timers.yaml", y)
	if err != nil {
		t.Fatal(err)
	}
	data, err := fs.ReadFile(programs.FS, "timers.bpf.o")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := loader.ParseObject("timers.bpf.o", data)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := c.LoadObject("timers", bundledDigest, spec, cfg)
	if err != nil {
		t.Fatalf("load through the helper: %v\n%s", err, logs)
	}
	defer obj.Close()
	if len(obj.Programs) != 1 || !obj.Programs[0].Attached() {
		t.Fatalf("programs %+v, want one attached", obj.Programs)
	}
	m := obj.Collection.Maps["timer_starts_total"]
	if m == nil {
		t.Fatalf("maps %v: no timer_starts_total", obj.Collection.Maps)
	}
	sum := func() uint64 {
		var k, v uint64
		var total uint64
		it := m.Iterate()
		for it.Next(&k, &v) {
			total += v
		}
		return total
	}
	s0 := sum()
	time.Sleep(200 * time.Millisecond)
	if s1 := sum(); s1 <= s0 {
		t.Errorf("timer starts %d then %d over 200 ms: the adopted program does not count", s0, s1)
	} else {
		t.Logf("adopted timers: %d timer starts in 200 ms", s1-s0)
	}
	info, err := obj.Programs[0].Prog.Info()
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := info.ID(); id == 0 {
		t.Error("adopted program has no id")
	}
	if _, err := c.LoadObject("runqlat", bundledDigest, spec, cfg); err == nil || !strings.Contains(err.Error(), "not one the exporter was started with") {
		t.Errorf("load of a config not given: %v", err)
	}
	if _, err := c.LoadObject("timers", strings.Repeat("0", 64), spec, cfg); err == nil || !strings.Contains(err.Error(), "changed") {
		t.Errorf("load with another digest: %v", err)
	}
	if typ := m.Type(); typ != ebpf.Hash {
		t.Errorf("timer_starts_total adopted as a %v, want a hash", typ)
	}
}

// TestStopSignal sends SIGTERM to both helpers, as systemd's default
// KillMode=control-group does at a stop (and SIGINT, as Ctrl-C does): they
// keep running and answering until the exporter closes the socket, then
// exit at once, and no line at WARN or ERROR is logged by the client or
// the helpers.
func TestStopSignal(t *testing.T) {
	for _, sig := range []unix.Signal{unix.SIGTERM, unix.SIGINT} {
		t.Run(unix.SignalName(sig), func(t *testing.T) {
			c, logs := startHelper(t, Settings{})
			f, err := c.EnableStats()
			if err != nil {
				t.Fatalf("EnableStats: %v\n%s", err, logs)
			}
			f.Close()
			sup, worker := c.SupervisorPid(), c.Pid()
			for _, pid := range []int{sup, worker} {
				if err := unix.Kill(pid, sig); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(500 * time.Millisecond)
			if c.Pid() != worker || gone(sup) {
				t.Fatalf("after %v: supervisor gone %v, worker %d (was %d)\n%s", sig, gone(sup), c.Pid(), worker, logs)
			}
			// Still answering: the stop is the exporter's to finish.
			f, err = c.EnableStats()
			if err != nil {
				t.Fatalf("EnableStats after %v: %v\n%s", sig, err, logs)
			}
			f.Close()
			t0 := time.Now()
			c.Close()
			for _, pid := range []int{sup, worker} {
				if !gone(pid) {
					t.Errorf("helper %d still there 2 s after Close", pid)
				}
			}
			t.Logf("%v to both helpers: both answered 500 ms later, gone %v after Close", sig, time.Since(t0).Round(time.Millisecond))
			for _, line := range strings.Split(logs.String(), "\n") {
				if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
					t.Errorf("logged at a clean stop: %s", line)
				}
			}
		})
	}
}

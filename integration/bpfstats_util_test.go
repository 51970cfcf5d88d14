// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// bpfspin builds and returns the bpfspin binary: a separate process that
// loads BPF programs as another agent would (testdata/bpfspin). It is
// built in t's temporary directory, which any user may enter (the
// exporter may run as nobody); the build cache makes a second build a
// link.
func bpfspin(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "bpfspin")
	build := exec.Command("go", "build", "-o", path, "./integration/testdata/bpfspin")
	build.Dir = repoRoot
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build bpfspin: %v\n%s", err, out)
	}
	return path
}

// bpfSpin is a running "bpfspin spin": a tracepoint program on
// sys_enter_ioprio_get that spins for spinNs at each ioprio_get(2) of this
// test process.
type bpfSpin struct {
	cmd      *exec.Cmd
	in       io.WriteCloser
	out      *bufio.Scanner
	prog, mp uint32
	pid      int
	stderr   *syncBuffer
}

// startBPFSpin starts bpfspin spin for this process, stopped at cleanup.
func startBPFSpin(t *testing.T, spinNs int) *bpfSpin {
	t.Helper()
	s := &bpfSpin{stderr: &syncBuffer{}}
	s.cmd = exec.Command(bpfspin(t), "spin", strconv.Itoa(os.Getpid()), strconv.Itoa(spinNs))
	s.cmd.Stderr = s.stderr
	var err error
	if s.in, err = s.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.in.Close(); s.cmd.Wait() })
	s.pid = s.cmd.Process.Pid
	s.out = bufio.NewScanner(stdout)
	if !s.out.Scan() {
		t.Fatalf("bpfspin spin printed nothing: %s", s.stderr)
	}
	if _, err := fmt.Sscanf(s.out.Text(), "prog=%d map=%d", &s.prog, &s.mp); err != nil {
		t.Fatalf("bpfspin spin: %q: %v", s.out.Text(), err)
	}
	return s
}

// counts returns the program's runs (any process' ioprio_get) and the
// runs that spun (this process').
func (s *bpfSpin) counts(t *testing.T) (calls, spun uint64) {
	t.Helper()
	if _, err := io.WriteString(s.in, "count\n"); err != nil {
		t.Fatal(err)
	}
	if !s.out.Scan() {
		t.Fatalf("bpfspin: no count: %s", s.stderr)
	}
	if _, err := fmt.Sscanf(s.out.Text(), "calls=%d spun=%d", &calls, &spun); err != nil {
		t.Fatalf("bpfspin: %q: %v", s.out.Text(), err)
	}
	return calls, spun
}

// ioprioGets calls ioprio_get(2) n times from one thread of this process,
// the i-th at start + i*every (at once when every is 0), and returns when
// the last returned.
func ioprioGets(n int, every time.Duration) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := time.Now()
	for i := 0; i < n; i++ {
		if every > 0 {
			if d := time.Until(start.Add(time.Duration(i) * every)); d > 0 {
				time.Sleep(d)
			}
		}
		unix.Syscall(unix.SYS_IOPRIO_GET, 1 /* IOPRIO_WHO_PROCESS */, 0, 0)
	}
}

// bpftoolJSON runs bpftool <args> -j and decodes its output into v.
func bpftoolJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	bt := probeNeedTool(t, "the kernel's own view of a BPF program", "bpftool")
	out, err := exec.Command(bt, append(args, "-j")...).Output()
	if err != nil {
		t.Fatalf("bpftool %v: %v", args, err)
	}
	if err := json.Unmarshal(out, v); err != nil {
		t.Fatalf("bpftool %v: %v: %s", args, err, out)
	}
}

// bpftoolProg returns bpftool's run time (ns) and run count of program id.
func bpftoolProg(t *testing.T, id uint32) (runTimeNs, runs uint64) {
	t.Helper()
	var p struct {
		RunTimeNs uint64 `json:"run_time_ns"`
		RunCnt    uint64 `json:"run_cnt"`
	}
	bpftoolJSON(t, &p, "prog", "show", "id", strconv.FormatUint(uint64(id), 10))
	return p.RunTimeNs, p.RunCnt
}

// vmRSS returns the resident memory of pid in bytes.
func vmRSS(t *testing.T, pid int) uint64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

// bpfspinCmd returns the command bin (bpfspin) args, its stderr in the
// test's log.
func bpfspinCmd(t *testing.T, bin string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Stderr = &testWriter{t}
	return cmd
}

// testWriter writes to t's log.
type testWriter struct{ t *testing.T }

func (w *testWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s", p)
	return len(p), nil
}

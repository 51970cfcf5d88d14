package profile

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kernel-exporter/kernel_exporter/internal/testenv"
)

// needRoot ends t unless it runs as root (BPF programs and perf events).
func needRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.SkipOrFail(t, "profiles need root (BPF programs, perf events)")
	}
}

var (
	workloadOnce sync.Once
	workloadBin  string
	workloadErr  error
)

// buildWorkload compiles testdata/workload.c once per test binary, with
// frame pointers.
func buildWorkload(t testing.TB) string {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		testenv.SkipOrFail(t, "gcc is missing (make test-deps installs it)")
	}
	workloadOnce.Do(func() {
		dir, err := os.MkdirTemp("", "profile-workload-")
		if err != nil {
			workloadErr = err
			return
		}
		workloadBin = filepath.Join(dir, "workload")
		out, err := exec.Command("gcc", "-O1", "-fno-omit-frame-pointer", "-Wall", "-o", workloadBin, "testdata/workload.c").CombinedOutput()
		if err != nil {
			workloadErr = err
			workloadBin = string(out)
		}
	})
	if workloadErr != nil {
		t.Fatalf("build testdata/workload.c: %v\n%s", workloadErr, workloadBin)
	}
	return workloadBin
}

// workload is a running testdata/workload.c process, waiting for go.
type workload struct {
	t     testing.TB
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
	PID   uint32
}

func startWorkload(t testing.TB, args ...string) *workload {
	t.Helper()
	cmd := exec.Command(buildWorkload(t), args...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &workload{t: t, cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout), PID: uint32(cmd.Process.Pid)}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		w.end()
	})
	return w
}

// begin lets the workload start.
func (w *workload) begin() {
	if _, err := io.WriteString(w.stdin, "go\n"); err != nil {
		w.t.Errorf("start workload: %v", err)
	}
}

// wait waits for the workload to finish its work and returns the time
// it took; the process stays until end.
func (w *workload) wait() time.Duration {
	line, err := w.out.ReadString('\n')
	if err != nil {
		w.t.Errorf("workload: %v", err)
		return 0
	}
	secs, err := strconv.ParseFloat(strings.TrimSpace(line), 64)
	if err != nil {
		w.t.Errorf("workload printed %q", line)
	}
	return time.Duration(secs * float64(time.Second))
}

// end lets the workload exit and waits for it.
func (w *workload) end() {
	w.stdin.Close()
	_ = w.cmd.Wait()
}

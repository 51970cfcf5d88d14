// SPDX-License-Identifier: Apache-2.0

// Package proftest builds and runs profile/testdata/workload.c, the
// processes the profile tests measure (package profile's tests and the
// integration tests): a C program with frame pointers that waits for a
// line on its standard input before it starts, prints the seconds its
// work took, and exits when its standard input ends.
package proftest

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

var (
	buildMu sync.Mutex
	built   = map[string]string{}
)

// PrebuiltEnv names the prebuilt workload that Build returns instead of
// compiling: make test-kernels builds profile/testdata/workload.c static
// on the host and sets it in its guests, which have no compiler.
const PrebuiltEnv = "KE_PROFILE_WORKLOAD"

// Build compiles the workload source src with gcc -O1
// -fno-omit-frame-pointer once per test binary and returns the binary, or
// returns $KE_PROFILE_WORKLOAD when that is set (src is then not read).
func Build(t testing.TB, src string) string {
	t.Helper()
	if bin := os.Getenv(PrebuiltEnv); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("%s: %v", PrebuiltEnv, err)
		}
		return bin
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		testenv.SkipOrFail(t, "gcc is missing (make test-deps installs it)")
	}
	buildMu.Lock()
	defer buildMu.Unlock()
	if bin, ok := built[src]; ok {
		return bin
	}
	dir, err := os.MkdirTemp("", "ke-profile-workload-")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "workload")
	if out, err := exec.Command("gcc", "-O1", "-fno-omit-frame-pointer", "-Wall", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", src, err, out)
	}
	built[src] = bin
	return bin
}

// Workload is a running workload process, waiting for Begin.
type Workload struct {
	t     testing.TB
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
	PID   uint32
}

// Start starts bin with args; the process is killed at cleanup.
func Start(t testing.TB, bin string, args ...string) *Workload {
	t.Helper()
	cmd := exec.Command(bin, args...)
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
	w := &Workload{t: t, cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout), PID: uint32(cmd.Process.Pid)}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		w.End()
	})
	return w
}

// Begin lets the workload start its work.
func (w *Workload) Begin() {
	if _, err := io.WriteString(w.stdin, "go\n"); err != nil {
		w.t.Errorf("start workload: %v", err)
	}
}

// Wait waits for the workload to finish its work and returns the time it
// took; the process stays until End.
func (w *Workload) Wait() time.Duration {
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

// End lets the workload exit and waits for it.
func (w *Workload) End() {
	w.stdin.Close()
	_ = w.cmd.Wait()
}

// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kernel-exporter/kernel_exporter/internal/testenv"
)

// TestProfilePodman profiles a process in a container from the host: the
// frame-pointer workload (profile/testdata/workload.c, linked statically)
// is the only file of a podman container's root file system, at a path
// that does not exist on the host, and spends 70% of its time in burn_a.
// A kernel_exporter profile of its host pid (8 s, 499 Hz, folded) must
// name burn_a and burn_b in its user stacks, under that process, with
// burn_a's share within 10 points of 70%: the symbols can only have been
// read through /proc/<pid>/root.
func TestProfilePodman(t *testing.T) {
	for _, tool := range []string{"podman", "runc", "gcc"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.SkipOrFail(t, "%s not found: the container profile test needs Debian's podman, runc and gcc (make test-deps) (%v)", tool, err)
		}
	}
	name := randomName(t, "kxpod-") // 6 + 8 = 14 bytes: the comm
	if _, err := os.Stat("/" + name); err == nil {
		t.Fatalf("/%s exists on the host", name)
	}
	rootfs := t.TempDir()
	bin := filepath.Join(rootfs, name)
	if out, err := exec.Command("gcc", "-static", "-O1", "-fno-omit-frame-pointer", "-Wall", "-o", bin,
		filepath.Join(repoRoot, "profile/testdata/workload.c")).CombinedOutput(); err != nil {
		t.Fatalf("gcc -static: %v\n%s", err, out)
	}

	// runc and the ulimits: see imageRunFlags.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "podman", "run", "-i", "--rm", "--name", name,
		"--runtime", "runc", "--ulimit", "nofile=20000:20000", "--ulimit", "nproc=32768:32768",
		"--network=none", "--rootfs", rootfs, "/"+name, "burn", "0.7", "10")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		_, _ = exec.Command("podman", "rm", "-f", name).CombinedOutput()
		_ = cmd.Wait()
	})

	var pid int
	Eventually(t, 60*time.Second, func() bool {
		out, err := exec.Command("podman", "inspect", "--format", "{{.State.Pid}}", name).Output()
		if err != nil {
			return false
		}
		pid, _ = strconv.Atoi(strings.TrimSpace(string(out)))
		return pid > 0
	}, "container %s never started: %s", name, &stderr)
	if comm, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm"); strings.TrimSpace(string(comm)) != name {
		t.Fatalf("host pid %d of container %s has comm %q, want %q", pid, name, comm, name)
	}
	progress(t, "podman: container %s runs /%s as host pid %d", name, name, pid)

	out := filepath.Join(t.TempDir(), "container.folded")
	if _, err := io.WriteString(stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
	r := startProfile(t, "--duration=8s", "--frequency=499", "--pid="+strconv.Itoa(pid), "-o", out)
	r.wait(t)
	line, _ := readLine(stdout)
	t.Logf("workload in the container: ran %s s", strings.TrimSpace(line))

	counts, all := readFoldedFile(t, out, name)
	a, b := counts["burn_a"], counts["burn_b"]
	t.Logf("container process %s (host pid %d): burn_a %d, burn_b %d of %d samples", name, pid, a, b, all)
	if all < 200 {
		t.Fatalf("%d samples of the container's process, want at least 200 (8 s at 499 Hz)", all)
	}
	if share := float64(a) / float64(all); share < 0.6 || share > 0.8 || b == 0 {
		t.Errorf("burn_a %d and burn_b %d of %d samples: want burn_a at 60 to 80%% and burn_b present (symbols read through /proc/%d/root)", a, b, all, pid)
	}
}

// readLine reads one line from r, byte by byte (the workload prints one
// line when its work is done).
func readLine(r io.Reader) (string, error) {
	var sb strings.Builder
	buf := make([]byte, 1)
	for {
		n, err := r.Read(buf)
		if n == 1 {
			if buf[0] == '\n' {
				return sb.String(), nil
			}
			sb.WriteByte(buf[0])
		}
		if err != nil {
			return sb.String(), err
		}
	}
}

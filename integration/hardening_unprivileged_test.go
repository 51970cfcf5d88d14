// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Issue 31, defect 4: run unprivileged, dump said "raise memlock limit:
// failed to set memlock rlimit", profile "MEMLOCK may be too low,
// consider rlimit.RemoveMemlock" and top bpf "BPF_PROG_GET_NEXT_ID:
// operation not permitted": the call that failed, not what to grant.

// exitNoPrivilege is the exit code of a command run without the
// capabilities it needs (cmd/kernel_exporter's ExitNoPrivilege).
const exitNoPrivilege = 4

// runAs runs the exporter binary at bin with args as uid and gid 65534
// (nobody), holding the capabilities ambient only (none: an unprivileged
// user's process), and returns its exit code and stderr.
func runAs(t *testing.T, bin string, ambient []uintptr, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}, AmbientCaps: ambient}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, stderr.String()
	case errors.As(err, &ee) && ctx.Err() == nil:
		return ee.ExitCode(), stderr.String()
	}
	t.Fatalf("kernel_exporter %q as nobody: %v\n%s", args, err, stderr.String())
	return 0, ""
}

// TestUnprivilegedCommands runs every command that loads BPF or lists
// the host's BPF objects as nobody with no capability: each exits with
// exitNoPrivilege before doing anything, with one error line that names
// the command, the capabilities it lacks (and those it also uses), how to
// grant them (root, setcap, AmbientCapabilities as the unit does), and
// nothing about RLIMIT_MEMLOCK or the bpf() call that would have failed.
// With CAP_BPF alone, dump names CAP_PERFMON as missing and CAP_BPF not.
// profile diff, which needs
// no privilege, runs.
func TestUnprivilegedCommands(t *testing.T) {
	bin := publicCopy(t)
	load := []string{"CAP_BPF (to create BPF maps and load programs)", "CAP_PERFMON (to load tracing programs and open perf events)"}
	for _, tc := range []struct {
		args       []string
		name       string
		need, also []string
	}{
		{args: []string{"--web.listen-address=127.0.0.1:0"}, name: "serve", need: load, also: []string{"CAP_SYSLOG", "CAP_DAC_READ_SEARCH", "CAP_SYS_ADMIN"}},
		{args: []string{"serve", "--config.check"}, name: "serve --config.check", need: load, also: []string{"CAP_SYSLOG", "CAP_DAC_READ_SEARCH"}},
		{args: []string{"--programs=none", "--web.listen-address=127.0.0.1:0"}, name: "serve", need: []string{"CAP_SYS_ADMIN (to list the host's BPF programs"}},
		{args: []string{"--profile.enable", "--web.listen-address=127.0.0.1:0"}, name: "serve", need: load, also: []string{"CAP_SYS_PTRACE"}},
		{args: []string{"dump", "--duration=1s"}, name: "dump", need: load, also: []string{"CAP_SYSLOG", "CAP_DAC_READ_SEARCH"}},
		{args: []string{"hist", "runqlat", "--count=1"}, name: "hist runqlat", need: load},
		{args: []string{"top", "timers", "--count=1"}, name: "top timers", need: load},
		{args: []string{"top", "bpf", "--count=1"}, name: "top bpf", need: []string{"CAP_SYS_ADMIN (to list the host's BPF programs"}},
		{args: []string{"top", "cpu", "--count=1"}, name: "top cpu", need: load, also: []string{"CAP_SYSLOG", "CAP_SYS_PTRACE", "CAP_DAC_READ_SEARCH"}},
		{args: []string{"profile", "--duration=1s", "-o", "/dev/null"}, name: "profile", need: load, also: []string{"CAP_SYS_PTRACE"}},
		{args: []string{"profile", "record", "--duration=1s", "-o", "/dev/null"}, name: "profile", need: load},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stderr := runAs(t, bin, nil, tc.args...)
			line := strings.TrimSuffix(stderr, "\n")
			if code != exitNoPrivilege || strings.Count(stderr, "\n") != 1 {
				t.Fatalf("exit %d, stderr %q; want exit %d and one line", code, stderr, exitNoPrivilege)
			}
			want := append([]string{"kernel_exporter: error: kernel_exporter " + tc.name + " needs ", "which this process lacks (uid 65534, effective capabilities: none)",
				": run it as root, or grant them: setcap ", "+ep " + bin, "AmbientCapabilities=", "as deploy/kernel_exporter.service does"}, tc.need...)
			if len(tc.also) > 0 {
				want = append(want, "; it also uses ")
			}
			for _, w := range append(want, tc.also...) {
				if !strings.Contains(line, w) {
					t.Errorf("error %q lacks %q", line, w)
				}
			}
			for _, bad := range []string{"MEMLOCK", "memlock", "rlimit", "operation not permitted", "BPF_PROG_GET_NEXT_ID"} {
				if strings.Contains(line, bad) {
					t.Errorf("error %q says %q: the privilege is the problem", line, bad)
				}
			}
			t.Logf("%s", line)
		})
	}
	t.Run("CAP_BPF alone", func(t *testing.T) {
		code, stderr := runAs(t, bin, []uintptr{capBPF}, "dump", "--duration=1s")
		if code != exitNoPrivilege || !strings.Contains(stderr, "kernel_exporter dump needs CAP_PERFMON (to load tracing programs and open perf events) (or CAP_SYS_ADMIN, which stands for it), which this process lacks (uid 65534, effective capabilities: CAP_BPF)") ||
			strings.Contains(stderr, "CAP_BPF (to") || !strings.Contains(stderr, "cap_perfmon,cap_bpf+ep") {
			t.Errorf("dump with CAP_BPF alone: exit %d, stderr %q; want %d naming CAP_PERFMON as missing, CAP_BPF as held, and both to grant", code, stderr, exitNoPrivilege)
		}
	})
	t.Run("profile diff", func(t *testing.T) {
		// Two folded profiles in the binary's directory, which nobody
		// may read.
		dir := filepath.Dir(bin)
		for _, f := range []string{"a.folded", "b.folded"} {
			if err := os.WriteFile(filepath.Join(dir, f), []byte("main;work 10\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if code, stderr := runAs(t, bin, nil, "profile", "diff", filepath.Join(dir, "a.folded"), filepath.Join(dir, "b.folded")); code != 0 {
			t.Errorf("profile diff as nobody: exit %d, stderr %q; want 0 (it needs no privilege)", code, stderr)
		}
	})
}

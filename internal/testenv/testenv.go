// SPDX-License-Identifier: Apache-2.0

// Package testenv decides how a test ends when this machine lacks what it
// needs. A test never passes without having checked what it is about: it
// ends as SKIP with the reason. Under CI=true, what every CI machine of this
// project has (root, the tools of make test-deps, and the kernel features in
// CIKernelFeatures) must be there: its absence fails the test instead.
package testenv

import (
	"fmt"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// CIKernelFeatures are the kernel features of every kernel CI runs on (the
// host and the make test-kernels guests). Kprobes, fentry/fexit and a
// hardware PMU are not among them: CI hosts may lack those, and the matrix
// guests pin what they have with KE_MATRIX_EXPECT.
var CIKernelFeatures = map[string]bool{
	"tracepoint":           true,
	"tp_btf":               true,
	"raw_tp":               true,
	"uprobe":               true,
	"software perf events": true,
	"btf":                  true,
}

// UnderCI reports whether the tests run in CI (CI=true).
func UnderCI() bool { return os.Getenv("CI") == "true" }

// SkipOrFail ends t because a prerequisite that CI machines have is
// missing here: SKIP with the reason, or under CI=true a failure.
func SkipOrFail(t testing.TB, format string, args ...any) {
	t.Helper()
	reason := fmt.Sprintf(format, args...)
	if UnderCI() {
		t.Fatalf("%s; CI=true forbids skipping", reason)
		return
	}
	t.Skip(reason)
}

// SkipLacking ends t because this kernel or machine lacks feature: SKIP
// with the reason. A feature of CIKernelFeatures is a prerequisite CI
// machines have (SkipOrFail).
func SkipLacking(t testing.TB, feature, format string, args ...any) {
	t.Helper()
	reason := fmt.Sprintf("this kernel or machine lacks %s: %s", feature, fmt.Sprintf(format, args...))
	if CIKernelFeatures[feature] {
		SkipOrFail(t, "%s", reason)
		return
	}
	t.Skip(reason)
}

// initPIDNamespaceInode is the inode number of the kernel's initial PID
// namespace (PROC_PID_INIT_INO, include/linux/proc_ns.h), the same on every
// kernel since 3.8.
const initPIDNamespaceInode = 0xEFFFFFFC

// HostPIDNamespace returns an error naming the cause when this process is
// not in the kernel's initial PID namespace (a container without the
// host's, unshare -p). BPF programs see the kernel's PIDs
// (bpf_get_current_pid_tgid), which then differ from os.Getpid(), so every
// test that looks for its own PID in a map finds nothing. Comparing with
// /proc/1/ns/pid would not tell: inside a namespace, PID 1 is the
// namespace's own init.
func HostPIDNamespace() error {
	return hostPIDNamespace("/proc/self/ns/pid")
}

func hostPIDNamespace(path string) error {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return fmt.Errorf("cannot tell the PID namespace: %s: %w", path, err)
	}
	if st.Ino != initPIDNamespaceInode {
		return fmt.Errorf("this process is in a PID namespace of its own (%s is inode %d, the host's is %d): "+
			"BPF programs see host PIDs, which differ from this process' view, so tests that count events by PID "+
			"cannot find theirs; run the tests in the host's PID namespace (a container: --pid=host)",
			path, st.Ino, uint64(initPIDNamespaceInode))
	}
	return nil
}

// RequireHostPIDNamespace fails t at once, with the reason, when this
// process is not in the host's PID namespace (HostPIDNamespace): a test
// that reads PIDs from BPF would otherwise fail later with a misleading
// "0 series of pid N".
func RequireHostPIDNamespace(t testing.TB) {
	t.Helper()
	if err := HostPIDNamespace(); err != nil {
		t.Fatal(err)
	}
}

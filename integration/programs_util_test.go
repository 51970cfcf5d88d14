// SPDX-License-Identifier: Apache-2.0

package integration

// Helpers for the tests of the bundled program library: private network
// namespaces, memory-limited cgroups, and child processes (this test binary
// re-executed) that put themselves into such a cgroup before allocating.

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Environment of a child process started by runChild: which helper to
// run, the cgroup.procs files to join first (separated by ":"), and the
// helper's argument.
const (
	childEnvMode    = "KERNEL_EXPORTER_IT_CHILD"
	childEnvCgroups = "KERNEL_EXPORTER_IT_CGROUPS"
	childEnvArg     = "KERNEL_EXPORTER_IT_ARG"
)

// init turns this test binary into a helper process when started by
// runChild; it never returns then. It runs before TestMain, so a child
// neither builds the exporter nor runs tests.
func init() {
	mode := os.Getenv(childEnvMode)
	if mode == "" {
		return
	}
	if err := childMain(mode); err != nil {
		fmt.Fprintf(os.Stderr, "child %s: %v\n", mode, err)
		os.Exit(2)
	}
	os.Exit(0)
}

// childMain joins the cgroups given in the environment, then runs mode:
//
//	alloc      touch KERNEL_EXPORTER_IT_ARG MiB of anonymous memory (in a
//	           memory-limited cgroup an OOM kill ends it; surviving is an
//	           error)
//	pagecache  write KERNEL_EXPORTER_IT_ARG ("file:MiB") through the page
//	           cache, then read it back
//	getpids    two threads named after KERNEL_EXPORTER_IT_ARG ("secs:comm")
//	           make getpid() calls for secs seconds (see getpidThreads)
//	spin       a busy loop for at most KERNEL_EXPORTER_IT_ARG seconds
//	nanosleeps KERNEL_EXPORTER_IT_ARG nanosleep(1 ms) calls on one thread
//	           (see runqChild)
//	getppids   KERNEL_EXPORTER_IT_ARG getppid() calls (see getppidN)
//	accept     a thread named after KERNEL_EXPORTER_IT_ARG ("comm:n4:n")
//	           accepts n4 connections with accept4() on inherited fd 3,
//	           then n with accept() on fd 4 (see acceptN)
//	compatlabels  magic pread64 calls of the compatibility suite
//	           (KERNEL_EXPORTER_IT_ARG "code:n:dev", see compatLabelsChild)
func childMain(mode string) error {
	for _, procs := range strings.Split(os.Getenv(childEnvCgroups), ":") {
		if procs == "" {
			continue
		}
		if err := os.WriteFile(procs, []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
			return fmt.Errorf("join cgroup: %w", err)
		}
	}
	arg := os.Getenv(childEnvArg)
	switch mode {
	case "alloc":
		mib, err := strconv.Atoi(arg)
		if err != nil {
			return fmt.Errorf("alloc: size %q: %w", arg, err)
		}
		b, err := unix.Mmap(-1, 0, mib<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
		if err != nil {
			return fmt.Errorf("alloc: mmap %d MiB: %w", mib, err)
		}
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		return fmt.Errorf("alloc: touched %d MiB and was not killed", mib)
	case "pagecache":
		file, size, ok := strings.Cut(arg, ":")
		mib, err := strconv.Atoi(size)
		if !ok || err != nil {
			return fmt.Errorf("pagecache: bad argument %q", arg)
		}
		return pageCacheRoundTrip(file, mib)
	case "getpids":
		secs, comm, ok := strings.Cut(arg, ":")
		n, err := strconv.Atoi(secs)
		if !ok || err != nil || n < 1 || n > 300 {
			return fmt.Errorf("getpids: bad argument %q", arg)
		}
		return getpidThreads(time.Duration(n)*time.Second, comm)
	case "spin", "nanosleeps": // runqlat_cgroup's workload
		return runqChild(mode, arg)
	case "accept":
		return acceptN(arg)
	case "getppids":
		return getppidN(arg)
	case "compatlabels":
		return compatLabelsChild(arg)
	}
	return fmt.Errorf("unknown child mode %q", mode)
}

// pageCacheRoundTrip writes mib MiB to file with buffered writes, then
// reads the file back.
func pageCacheRoundTrip(file string, mib int) error {
	f, err := os.OpenFile(file, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("pagecache: %w", err)
	}
	defer f.Close()
	buf := bytes.Repeat([]byte{0x5a}, 1<<20)
	for i := range mib {
		if _, err := f.Write(buf); err != nil {
			return fmt.Errorf("pagecache: write MiB %d of %s: %w", i, file, err)
		}
	}
	for i := range mib {
		if _, err := f.ReadAt(buf, int64(i)<<20); err != nil {
			return fmt.Errorf("pagecache: read MiB %d of %s: %w", i, file, err)
		}
	}
	return nil
}

// runChild runs this test binary as a helper (see childMain) in mode,
// after it joined the cgroup.procs files procs, and waits for it. It
// returns what the child printed and its exit error.
func runChild(t *testing.T, mode, arg string, procs []string) (string, error) {
	t.Helper()
	out, err := childCmd(t, mode, arg, procs).CombinedOutput()
	return string(out), err
}

// childCmd is the command that runs this test binary as a helper in mode
// (see childMain), not started.
func childCmd(t *testing.T, mode, arg string, procs []string) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatalf("find test binary: %v", err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(),
		childEnvMode+"="+mode,
		childEnvCgroups+"="+strings.Join(procs, ":"),
		childEnvArg+"="+arg)
	return cmd
}

// randomName returns prefix followed by 8 random hex digits.
func randomName(t *testing.T, prefix string) string {
	t.Helper()
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return prefix + hex.EncodeToString(b)
}

// mustCmd runs a command and fails the test with its output if it fails.
func mustCmd(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// newNetns creates a network namespace kx-test-<random> with its loopback
// up, deleted (with everything in it: interfaces, iptables rules, sockets'
// routes) at cleanup, and returns its name.
func newNetns(t *testing.T) string {
	t.Helper()
	name := randomName(t, "kx-test-")
	mustCmd(t, "ip", "netns", "add", name)
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v\n%s", name, err, out)
		}
	})
	mustCmd(t, "ip", "-n", name, "link", "set", "lo", "up")
	return name
}

// nsCmd runs a command inside network namespace ns (ip netns exec) and
// fails the test if it fails.
func nsCmd(t *testing.T, ns string, args ...string) string {
	t.Helper()
	return mustCmd(t, "ip", append([]string{"netns", "exec", ns}, args...)...)
}

// inNetns runs fn on an OS thread that has joined network namespace ns, so
// that the sockets fn creates live there (they stay there when used from
// other goroutines later). The thread is never returned to the host
// namespace: it stays locked and exits with its goroutine.
func inNetns(t *testing.T, ns string, fn func() error) {
	t.Helper()
	f, err := os.Open(filepath.Join("/run/netns", ns))
	if err != nil {
		t.Fatalf("open netns %s: %v", ns, err)
	}
	defer f.Close()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with us
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- fmt.Errorf("setns %s: %w", ns, err)
			return
		}
		done <- fn()
	}()
	if err := <-done; err != nil {
		t.Fatalf("in netns %s: %v", ns, err)
	}
}

// loopback4 and loopback6 return the loopback address with port.
func loopback4(port int) unix.Sockaddr {
	return &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}
}

func loopback6(port int) unix.Sockaddr {
	return &unix.SockaddrInet6{Port: port, Addr: [16]byte{15: 1}}
}

// udpSocket opens a UDP socket bound to bind (for example loopback4(0)),
// closed at test cleanup. Call it inside inNetns for a namespaced socket.
func udpSocket(t *testing.T, bind unix.Sockaddr) (int, error) {
	family := unix.AF_INET
	if _, ok := bind.(*unix.SockaddrInet6); ok {
		family = unix.AF_INET6
	}
	fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err != nil {
		return -1, fmt.Errorf("udp socket: %w", err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, bind); err != nil {
		return -1, fmt.Errorf("bind udp socket: %w", err)
	}
	return fd, nil
}

// sendN sends n datagrams of size bytes from fd to to.
func sendN(fd int, to unix.Sockaddr, n, size int) error {
	buf := bytes.Repeat([]byte{'k'}, size)
	for i := range n {
		if err := unix.Sendto(fd, buf, 0, to); err != nil {
			return fmt.Errorf("sendto #%d: %w", i, err)
		}
	}
	return nil
}

// unixRecvfrom receives one datagram from fd into buf.
func unixRecvfrom(fd int, buf []byte) (int, unix.Sockaddr, error) {
	for {
		n, from, err := unix.Recvfrom(fd, buf, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return n, from, err
	}
}

// localPort returns the port socket fd is bound to.
func localPort(fd int) (int, error) {
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return 0, fmt.Errorf("getsockname: %w", err)
	}
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return a.Port, nil
	case *unix.SockaddrInet6:
		return a.Port, nil
	}
	return 0, fmt.Errorf("getsockname: unexpected %T", sa)
}

// skMeminfoDrops is SK_MEMINFO_DROPS, the index of the drop count in the
// SO_MEMINFO array (include/uapi/linux/sock_diag.h).
const skMeminfoDrops = 8

// socketDrops returns the kernel's count of packets socket fd dropped on
// receive (sk_drops, as SO_MEMINFO reports it).
func socketDrops(fd int) (uint32, error) {
	var info [16]uint32
	size := uint32(unsafe.Sizeof(info))
	_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_MEMINFO,
		uintptr(unsafe.Pointer(&info[0])), uintptr(unsafe.Pointer(&size)), 0)
	if errno != 0 {
		return 0, fmt.Errorf("getsockopt SO_MEMINFO: %w", errno)
	}
	if size <= skMeminfoDrops*4 {
		return 0, fmt.Errorf("getsockopt SO_MEMINFO: only %d bytes", size)
	}
	return info[skMeminfoDrops], nil
}

// cgroupMount is one cgroup hierarchy mounted on this machine.
type cgroupMount struct {
	dir  string // mount point
	root string // the hierarchy's path mounted there ("/" usually)
}

// cgroupMounts finds, in /proc/self/mountinfo, the cgroup v1 hierarchy that
// has the memory controller (ok1 false if none) and the cgroup2 hierarchy
// (ok2 false if none).
func cgroupMounts(t *testing.T) (memV1 cgroupMount, ok1 bool, v2 cgroupMount, ok2 bool) {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		// id parent maj:min root mountpoint options [optional...] - fstype source superoptions
		pre, post, found := strings.Cut(sc.Text(), " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !found || len(f) < 5 || len(g) < 3 {
			continue
		}
		m := cgroupMount{dir: unescapeMountinfo(f[4]), root: unescapeMountinfo(f[3])}
		switch g[0] {
		case "cgroup2":
			if !ok2 {
				v2, ok2 = m, true
			}
		case "cgroup":
			for _, o := range strings.Split(g[2], ",") {
				if o == "memory" && !ok1 {
					memV1, ok1 = m, true
				}
			}
		}
	}
	return memV1, ok1, v2, ok2
}

// unescapeMountinfo undoes the octal escapes (\040 for a space) of
// /proc/self/mountinfo.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ownCgroup returns this process's path in the v1 hierarchy with controller
// ("" for cgroup2) from /proc/self/cgroup.
func ownCgroup(t *testing.T, controller string) string {
	t.Helper()
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if controller == "" && parts[0] == "0" && parts[1] == "" {
			return parts[2]
		}
		for _, c := range strings.Split(parts[1], ",") {
			if controller != "" && c == controller {
				return parts[2]
			}
		}
	}
	t.Fatalf("/proc/self/cgroup has no %q hierarchy:\n%s", controller, data)
	return ""
}

// oomKill runs a child (childMain's "alloc" mode) that touches 256 MiB in
// cg, fails the test unless the OOM killer killed it (SIGKILL), then waits
// up to timeout for e's metric{cgroup=<cg's path>} to reach 1 and returns
// that scrape. cg's limit must be well below 256 MiB.
func oomKill(t *testing.T, e *Exporter, cg *memCgroup, metric string, timeout time.Duration) Metrics {
	t.Helper()
	out, err := runChild(t, "alloc", "256", cg.Procs)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child in %s (limit in %s) ended with %v, want killed by SIGKILL\n%s", cg.V2Path, cg.LimitFile, err, out)
	}
	// The label is resolved from the cgroup id at scrape time; the cgroup
	// still exists (it is removed at cleanup).
	var after Metrics
	Eventually(t, timeout, func() bool {
		after = e.Scrape()
		return after.Value(metric, L("cgroup", cg.V2Path)) >= 1
	}, "no %s{cgroup=%q} after the child was OOM-killed\n%s", metric, cg.V2Path, e.Logs)
	return after
}

// memCgroup is a memory-limited cgroup made for one test.
type memCgroup struct {
	// Procs lists the cgroup.procs files a child writes its pid to:
	// the cgroup2 directory, then the v1 memory cgroup if there is one.
	Procs []string
	// V2Path is the cgroup2 directory's path in the hierarchy, as the
	// cgroup decoder prints it: "/kx-test-1a2b3c4d".
	V2Path string
	// LimitFile is the file holding the memory limit, for messages.
	LimitFile string
}

// newMemCgroup creates a cgroup limited to limit bytes of memory, without
// swap, and removes it at cleanup (once its processes are gone).
//
// The cgroup2 directory (for the victim's cgroup id, which is what the
// oomkill program labels with) is made directly under the cgroup2 mount.
// The memory limit is set with the memory controller wherever it is: in a
// v1 hierarchy (a child of this process's own memory cgroup), or else in
// cgroup2 (memory.max; the controller is enabled in the root's
// subtree_control if it is not yet). Mounts are found in
// /proc/self/mountinfo.
func newMemCgroup(t *testing.T, limit int64) *memCgroup {
	t.Helper()
	return newMemCgroupAt(t, limit, "")
}

// newMemCgroupAt is newMemCgroup whose cgroup2 directory is below (a
// relative path, "" for none) below the new directory; every level is
// created, and with the memory controller in cgroup2 it is enabled down to
// the leaf.
func newMemCgroupAt(t *testing.T, limit int64, below string) *memCgroup {
	t.Helper()
	memV1, hasV1, v2, hasV2 := cgroupMounts(t)
	if !hasV2 {
		t.Fatal("no cgroup2 file system in /proc/self/mountinfo: the oomkill and direct_reclaim tests need one")
	}
	name := randomName(t, "kx-test-")
	cg := &memCgroup{}
	var dirs []string
	t.Cleanup(func() {
		// Remove in reverse order of creation; an OOM-killed child may
		// take a moment to leave its cgroups.
		for i := len(dirs) - 1; i >= 0; i-- {
			var err error
			for range 50 {
				if err = unix.Rmdir(dirs[i]); err == nil || errors.Is(err, unix.ENOENT) {
					err = nil
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err != nil {
				t.Errorf("remove cgroup %s: %v", dirs[i], err)
			}
		}
	})
	mkdir := func(dir string) {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatalf("create cgroup: %v", err)
		}
		dirs = append(dirs, dir)
	}
	write := func(file, value string) {
		if err := os.WriteFile(file, []byte(value), 0o644); err != nil {
			t.Fatalf("write %q to %s: %v", value, file, err)
		}
	}

	v2dir := filepath.Join(v2.dir, name)
	mkdir(v2dir)
	cg.V2Path = strings.TrimSuffix(v2.root, "/") + "/" + name
	levels := []string{v2dir} // v2dir's levels, for subtree_control
	for c := range strings.SplitSeq(below, "/") {
		if c != "" {
			v2dir = filepath.Join(v2dir, c)
			mkdir(v2dir)
			cg.V2Path += "/" + c
			levels = append(levels, v2dir)
		}
	}
	cg.Procs = append(cg.Procs, filepath.Join(v2dir, "cgroup.procs"))
	limitStr := strconv.FormatInt(limit, 10)

	if hasV1 {
		own := ownCgroup(t, "memory")
		rel, err := filepath.Rel(memV1.root, own)
		if err != nil || strings.HasPrefix(rel, "..") {
			t.Fatalf("own memory cgroup %s is outside the mounted %s", own, memV1.root)
		}
		dir := filepath.Join(memV1.dir, rel, name)
		mkdir(dir)
		cg.LimitFile = filepath.Join(dir, "memory.limit_in_bytes")
		write(cg.LimitFile, limitStr)
		if _, err := os.Stat(filepath.Join(dir, "memory.memsw.limit_in_bytes")); err == nil {
			write(filepath.Join(dir, "memory.memsw.limit_in_bytes"), limitStr)
		}
		cg.Procs = append(cg.Procs, filepath.Join(dir, "cgroup.procs"))
		return cg
	}

	ctrl, err := os.ReadFile(filepath.Join(v2.dir, "cgroup.controllers"))
	if err != nil || !containsWord(string(ctrl), "memory") {
		t.Fatalf("no memory controller: none in a v1 hierarchy, and %s/cgroup.controllers = %q (%v)", v2.dir, ctrl, err)
	}
	sub, _ := os.ReadFile(filepath.Join(v2.dir, "cgroup.subtree_control"))
	if !containsWord(string(sub), "memory") {
		write(filepath.Join(v2.dir, "cgroup.subtree_control"), "+memory")
	}
	for _, dir := range levels[:len(levels)-1] {
		write(filepath.Join(dir, "cgroup.subtree_control"), "+memory")
	}
	cg.LimitFile = filepath.Join(v2dir, "memory.max")
	write(cg.LimitFile, limitStr)
	if _, err := os.Stat(filepath.Join(v2dir, "memory.swap.max")); err == nil {
		write(filepath.Join(v2dir, "memory.swap.max"), "0")
	}
	return cg
}

func containsWord(s, w string) bool {
	for _, f := range strings.Fields(s) {
		if f == w {
			return true
		}
	}
	return false
}

// seriesDump lists the series of name (labels and value, or count for a
// histogram), for failure messages.
func (ms Metrics) seriesDump(name string) string {
	mf, ok := ms[name]
	if !ok {
		return "  (no series of " + name + ")"
	}
	var lines []string
	for _, m := range mf.GetMetric() {
		var ls []string
		for _, lp := range m.GetLabel() {
			ls = append(ls, fmt.Sprintf("%s=%q", lp.GetName(), lp.GetValue()))
		}
		v := m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue()
		if h := m.GetHistogram(); h != nil {
			v = float64(h.GetSampleCount())
		}
		lines = append(lines, fmt.Sprintf("  %s{%s} %g", name, strings.Join(ls, ","), v))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

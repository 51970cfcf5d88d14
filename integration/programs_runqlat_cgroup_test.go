// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/config"
	"github.com/kernel-exporter/kernel_exporter/loader"
	"github.com/kernel-exporter/kernel_exporter/programs"
)

// runqChild runs the workload modes of TestMatrixRunqlatCgroup in a child
// (see childMain), on one OS thread pinned to CPU 0: "spin" busy-loops for
// arg seconds at most (the test kills it sooner), "nanosleeps" makes arg
// nanosleep(1 ms) calls, each ending in one wakeup of that thread.
func runqChild(mode, arg string) error {
	n, err := strconv.Atoi(arg)
	if err != nil || n < 1 || n > 100000 {
		return fmt.Errorf("%s: bad argument %q", mode, arg)
	}
	runtime.LockOSThread()
	var cpu0 unix.CPUSet
	cpu0.Set(0)
	if err := unix.SchedSetaffinity(0, &cpu0); err != nil {
		return fmt.Errorf("%s: pin to CPU 0: %w", mode, err)
	}
	if mode == "spin" {
		end := time.Now().Add(time.Duration(n) * time.Second)
		for x := 0; time.Now().Before(end); x++ {
			for range 100000 {
				x ^= x << 1
			}
		}
		return nil
	}
	ts := unix.Timespec{Nsec: 1e6}
	for range n {
		if err := unix.Nanosleep(&ts, nil); err != nil && err != unix.EINTR {
			return err
		}
	}
	return nil
}

// cgroup2Dir returns the cgroup2 mount (see cgroupMounts); where there is
// none (the kernel matrix VM mounts none), it mounts one on a temporary
// directory for the test.
func cgroup2Dir(t *testing.T) cgroupMount {
	t.Helper()
	if _, _, v2, ok := cgroupMounts(t); ok {
		return v2
	}
	dir := filepath.Join(os.TempDir(), randomName(t, "kx-cgroup2-"))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("cgroup2", dir, "cgroup2", 0, ""); err != nil {
		t.Fatalf("mount cgroup2 on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
		_ = os.Remove(dir)
	})
	return cgroupMount{dir: dir, root: "/"}
}

// mkCgroup makes the cgroup name directly under the mount (removed when
// the test ends) and returns its cgroup.procs file and its path as the
// cgroup decoder prints it.
func (v2 cgroupMount) mkCgroup(t *testing.T, name string) (procs, path string) {
	t.Helper()
	dir := filepath.Join(v2.dir, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatalf("create cgroup: %v", err)
	}
	t.Cleanup(func() { rmdirRetry(t, dir) })
	return filepath.Join(dir, "cgroup.procs"), strings.TrimSuffix(v2.root, "/") + "/" + name
}

// TestMatrixRunqlatCgroup checks runqlat_cgroup and its cgroup_id_map.
// The bundled object runs with the bundled YAML whose regexps are replaced
// by one matching this test's cgroups "<name>-allow" and "<name>-late"
// (cgroup2 directories made under the mount), not "<name>-deny".
//
// On CPU 0, a spinner and a sleeper making n nanosleep(1 ms) calls run in
// each of allow and deny, so that each wakeup waits behind the spinners.
// allow's histogram count must move by at least n (one switch-in per
// wakeup) with a positive mean below 1 s; deny has no series, nor any
// other cgroup. Then late is made while the exporter runs, and a sleeper in
// it must show up in the histogram within 15 s (refresh interval 10 s).
// Before 5.11 (no task local storage) the config must be down with the
// requirement named. It runs on this kernel and in the kernel matrix.
func TestMatrixRunqlatCgroup(t *testing.T) {
	const (
		metric = "kernel_cgroup_run_queue_latency_seconds"
		n      = 1000
	)
	r := matrixReport(t, "runqlat_cgroup", "default")
	v2 := cgroup2Dir(t)
	base := randomName(t, "kx-rqcg-")
	mkCgroup := func(suffix string) (procs, path string) { return v2.mkCgroup(t, base+"-"+suffix) }
	allowProcs, allowPath := mkCgroup("allow")
	denyProcs, denyPath := mkCgroup("deny")

	cfg := t.TempDir()
	// From the embedded copies: the matrix VM has no source tree.
	obj, err := fs.ReadFile(programs.FS, "runqlat_cgroup.bpf.o")
	if err != nil {
		t.Fatal(err)
	}
	y, err := fs.ReadFile(programs.FS, "runqlat_cgroup.yaml")
	if err != nil {
		t.Fatal(err)
	}
	head, tail, ok := strings.Cut(string(y), "  regexps:\n")
	_, rest, ok2 := strings.Cut(tail, "metrics:\n")
	if !ok || !ok2 {
		t.Fatal("programs/runqlat_cgroup.yaml: no cgroup_id_map regexps before metrics:")
	}
	y = []byte(head + "  regexps:\n    - ^/" + base + "-(allow|late)$\nmetrics:\n" + rest)
	for f, data := range map[string][]byte{"runqlat_cgroup.bpf.o": obj, "runqlat_cgroup.yaml": y} {
		if err := os.WriteFile(filepath.Join(cfg, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e := Start(t, "--programs=none", "--config.dir="+cfg, "--config.names=runqlat_cgroup")
	ms := e.Scrape()
	if v := ms.Value("kernel_exporter_config_up", L("config", "runqlat_cgroup")); v != 1 {
		reason := errorReason(ms, "runqlat_cgroup")
		if _, ver, err := loader.KernelRelease(); err == nil && ver.Less(config.KernelVersion{5, 11, 0}) && strings.Contains(reason, "requires kernel >= 5.11") {
			r.result = "unsupported: no task local storage (5.11)"
			t.Skipf("runqlat_cgroup is down before 5.11, as it must be: %s", reason)
		}
		t.Fatalf("config_up{config=runqlat_cgroup} = %v, want 1: %s\n%s", v, reason, e.Logs())
	}
	r.attach = "tp_btf (3 programs)"

	pinned := func(mode, arg, procs string) *exec.Cmd {
		cmd := childCmd(t, mode, arg, []string{procs})
		cmd.Stderr = os.Stderr
		return cmd
	}
	spin := func(procs string) {
		cmd := pinned("spin", "120", procs)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	}

	a := e.Scrape()
	spin(allowProcs)
	spin(denyProcs)
	sleepers := []*exec.Cmd{pinned("nanosleeps", strconv.Itoa(n), allowProcs), pinned("nanosleeps", strconv.Itoa(n), denyProcs)}
	start := time.Now()
	for _, c := range sleepers {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range sleepers {
		if err := c.Wait(); err != nil {
			t.Fatalf("sleeper: %v", err)
		}
	}
	fmt.Fprintf(os.Stderr, "runqlat_cgroup: %d nanosleeps per cgroup took %v\n", n, time.Since(start).Round(time.Millisecond))
	b := e.Scrape()

	ca, sa, _ := a.Hist(metric, L("cgroup", allowPath), 1)
	cb, sb, atMs := b.Hist(metric, L("cgroup", allowPath), 0.001048576)
	mean := (sb - sa) / float64(max(cb-ca, 1))
	t.Logf("%s{cgroup=%s}: +%d observations, mean %.1f µs, %d at or below ~1 ms", metric, allowPath, cb-ca, mean*1e6, atMs)
	if cb-ca < n {
		t.Errorf("%s{cgroup=%s} count moved by %d, want >= %d (one per wakeup)\n%s", metric, allowPath, cb-ca, n, b.seriesDump(metric))
	}
	if sb <= sa || mean >= 1 {
		t.Errorf("%s{cgroup=%s} sum moved from %g to %g s over %d observations: want a positive mean below 1 s", metric, allowPath, sa, sb, cb-ca)
	}
	if s := b.Series(metric, L("cgroup", denyPath)); s != 0 {
		t.Errorf("%s has %d series for the cgroup %s that no regexp allows", metric, s, denyPath)
	}
	for _, v := range b.LabelValues(metric, "cgroup") {
		if v != allowPath {
			t.Errorf("%s has a series for cgroup %q, want only %s", metric, v, allowPath)
		}
	}

	// A matching cgroup made after start is in the map within an interval.
	lateProcs, latePath := mkCgroup("late")
	made := time.Now()
	late := pinned("nanosleeps", "60000", lateProcs)
	if err := late.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = late.Process.Kill(); _ = late.Wait() })
	// Until the cgroup decoder's next walk (at most one per 10 s) names
	// the new id, the label holds unknown_cgroup_id:<id>.
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(v2.dir, base+"-late"), &st); err != nil {
		t.Fatal(err)
	}
	lateID := "unknown_cgroup_id:" + strconv.FormatUint(st.Ino, 10)
	Eventually(t, 15*time.Second, func() bool {
		ms := e.Scrape()
		c, _, _ := ms.Hist(metric, L("cgroup", latePath), 1)
		d, _, _ := ms.Hist(metric, L("cgroup", lateID), 1)
		return c+d > 0
	}, "%s{cgroup=%s or %s} did not appear within 15 s of the cgroup's creation (refresh interval 10 s)\n%s", metric, latePath, lateID, e.Logs)
	lateAfter := time.Since(made).Round(100 * time.Millisecond)
	t.Logf("cgroup %s made after start: first observations %v later", latePath, lateAfter)
	r.result = fmt.Sprintf("moved: allowed +%d waits (>= %d), mean %.0f us; denied 0 series; new cgroup seen after %v", cb-ca, n, mean*1e6, lateAfter)
}

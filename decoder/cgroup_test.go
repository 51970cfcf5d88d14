// SPDX-License-Identifier: Apache-2.0

package decoder

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/kernel-exporter/kernel_exporter/config"

	"github.com/kernel-exporter/kernel_exporter/internal/testenv"
)

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

func mkdirs(t *testing.T, root string, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// cgroupEnv makes a fake cgroup2 mount: a directory tree, and a mountinfo
// that names it with the given root.
func cgroupEnv(t *testing.T, root string) (*Env, string) {
	t.Helper()
	proc, mount := t.TempDir(), t.TempDir()
	mkdirs(t, proc, "self")
	writeFile(t, filepath.Join(proc, "self", "mountinfo"),
		"31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"+
			"32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"+
			"41 31 0:38 "+root+" "+mount+" rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate\n")
	e := NewEnv(16)
	e.ProcRoot = proc
	return e, mount
}

func TestCgroup(t *testing.T) {
	e, mount := cgroupEnv(t, "/")
	mkdirs(t, mount, "system.slice/cron.service", "system.slice/ssh.service", "user.slice/user-1000.slice/session-1.scope")
	writeFile(t, filepath.Join(mount, "cgroup.procs"), "") // files are not cgroups
	// Symlinks are not followed into.
	if err := os.Symlink(filepath.Join(mount, "user.slice"), filepath.Join(mount, "system.slice", "link")); err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	d, _ := resolverWithClock(t, e, &now)

	cron := inode(t, filepath.Join(mount, "system.slice/cron.service"))
	runCases(t, d, []decodeCase{
		{name: "root", in: u64(inode(t, mount)), out: "/"},
		{name: "service", in: u64(cron), out: "/system.slice/cron.service"},
		{name: "slice", in: u64(inode(t, filepath.Join(mount, "system.slice"))), out: "/system.slice"},
		{name: "deep", in: u64(inode(t, filepath.Join(mount, "user.slice/user-1000.slice/session-1.scope"))), out: "/user.slice/user-1000.slice/session-1.scope"},
		{name: "file", in: u64(inode(t, filepath.Join(mount, "cgroup.procs"))), out: "unknown_cgroup_id:" + strconv.FormatUint(inode(t, filepath.Join(mount, "cgroup.procs")), 10)},
		{name: "unknown", in: u64(1 << 50), out: "unknown_cgroup_id:1125899906842624"},
		{name: "short", in: u32(1), err: "cgroup: got 4 bytes, want 8"},
	})

	// A new cgroup is found by the next walk, at most one per
	// cgroupWalkInterval.
	mkdirs(t, mount, "system.slice/new.service")
	fresh := inode(t, filepath.Join(mount, "system.slice/new.service"))
	runCases(t, d, []decodeCase{{name: "rate limited", in: u64(fresh), out: "unknown_cgroup_id:" + strconv.FormatUint(fresh, 10)}})
	now = now.Add(cgroupWalkInterval - time.Millisecond)
	runCases(t, d, []decodeCase{{name: "still limited", in: u64(fresh), out: "unknown_cgroup_id:" + strconv.FormatUint(fresh, 10)}})
	now = now.Add(time.Millisecond)
	runCases(t, d, []decodeCase{{name: "walked", in: u64(fresh), out: "/system.slice/new.service"}})

	// A removed cgroup keeps its path while cached.
	if err := os.Remove(filepath.Join(mount, "system.slice/cron.service")); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Hour)
	runCases(t, d, []decodeCase{
		{name: "new miss walks", in: u64(1 << 51), out: "unknown_cgroup_id:2251799813685248"},
		{name: "removed but cached", in: u64(cron), out: "/system.slice/cron.service"},
	})

	// After uint: decimal text.
	d = mustNew(t, e, config.Decoder{Name: "cgroup"}, 0)
	runCases(t, d, []decodeCase{
		{name: "text", in: []byte(strconv.FormatUint(fresh, 10)), out: "/system.slice/new.service"},
		{name: "bad", in: []byte("0x10"), err: `cgroup: bad number 0x30783130`},
	})
	newErr(t, e, config.Decoder{Name: "cgroup"}, 4, "cgroup: size 4 not supported (want 8)")
}

func TestCgroupSubtreeMount(t *testing.T) {
	// A cgroup namespace or bind mount of a subtree: paths include its root,
	// like /proc/<pid>/cgroup.
	e, mount := cgroupEnv(t, `/kube\040pods`)
	mkdirs(t, mount, "pod1")
	d := mustNew(t, e, config.Decoder{Name: "cgroup"}, 8)
	runCases(t, d, []decodeCase{
		{name: "root", in: u64(inode(t, mount)), out: "/kube pods"},
		{name: "child", in: u64(inode(t, filepath.Join(mount, "pod1"))), out: "/kube pods/pod1"},
	})
}

// TestCgroupNamespaceRoot checks the mount of a hierarchy whose root is
// outside our cgroup namespace (a container with a private cgroup
// namespace and the host's /sys/fs/cgroup mounted): mountinfo shows its
// root as "/../..", which must not start the paths.
func TestCgroupNamespaceRoot(t *testing.T) {
	for _, root := range []string{"/../..", "/..", "/../../kubepods/besteffort"} {
		e, mount := cgroupEnv(t, root)
		mkdirs(t, mount, "kubepods/besteffort/pod1")
		d := mustNew(t, e, config.Decoder{Name: "cgroup"}, 8)
		runCases(t, d, []decodeCase{
			{name: root + " root", in: u64(inode(t, mount)), out: "/"},
			{name: root + " pod", in: u64(inode(t, filepath.Join(mount, "kubepods/besteffort/pod1"))), out: "/kubepods/besteffort/pod1"},
		})
		m, prefix, err := Cgroup2Mount(e.ProcRoot)
		if m != mount || prefix != "" || err != nil {
			t.Errorf("%s: Cgroup2Mount = %q, %q, %v; want %q, \"\", nil", root, m, prefix, err, mount)
		}
	}
	for root, want := range map[string]string{"/": "", "/a/b/": "/a/b", "/a": "/a", "/..": "", "/../x": "", "/..x": "/..x", "x": ""} {
		if got := cgroupRoot(root); got != want {
			t.Errorf("cgroupRoot(%q) = %q, want %q", root, got, want)
		}
	}
}

// TestCgroupCompat checks the paths printed with --compat.ebpf-exporter:
// the full path of the cgroup's directory, as ebpf_exporter prints them,
// whatever the mount's root.
func TestCgroupCompat(t *testing.T) {
	for _, root := range []string{"/", "/sub", "/../.."} {
		e, mount := cgroupEnv(t, root)
		e.Compat = true
		mkdirs(t, mount, "system.slice/x.service")
		d := mustNew(t, e, config.Decoder{Name: "cgroup"}, 8)
		runCases(t, d, []decodeCase{
			{name: root + " root", in: u64(inode(t, mount)), out: mount},
			{name: root + " service", in: u64(inode(t, filepath.Join(mount, "system.slice/x.service"))), out: mount + "/system.slice/x.service"},
			{name: root + " unknown", in: u64(1 << 50), out: "unknown_cgroup_id:1125899906842624"},
		})
	}
}

// TestCgroupUnknownUnsettled checks that an unknown id is decoded again at
// the next read (it is not settled), and that a kube_* decoder after the
// cgroup decoder reads the id back from "unknown_cgroup_id:<id>".
func TestCgroupUnknownUnsettled(t *testing.T) {
	e, mount := cgroupEnv(t, "/")
	now := time.Unix(1000, 0)
	resolverWithClock(t, e, &now)
	chain, err := e.NewChain([]config.Decoder{{Name: "cgroup"}}, 8, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, settled, err := chain.DecodeSettled(u64(1 << 50))
	if string(out) != "unknown_cgroup_id:1125899906842624" || settled || err != nil {
		t.Errorf("unknown: %q, settled %v, %v", out, settled, err)
	}
	out, settled, err = chain.DecodeSettled(u64(inode(t, mount)))
	if string(out) != "/" || !settled || err != nil {
		t.Errorf("root: %q, settled %v, %v", out, settled, err)
	}
	e.Kube = nil
	pod, err := e.NewChain([]config.Decoder{{Name: "cgroup"}, {Name: "kube_pod"}}, 8, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out, settled, err := pod.DecodeSettled(u64(1 << 50)); string(out) != "" || settled || err != nil {
		t.Errorf("kube_pod of an unknown id: %q, settled %v, %v", out, settled, err)
	}
}

func TestCgroupNoMount(t *testing.T) {
	proc := t.TempDir()
	mkdirs(t, proc, "self")
	writeFile(t, filepath.Join(proc, "self", "mountinfo"), "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n")
	e := NewEnv(16)
	e.ProcRoot = proc
	newErr(t, e, config.Decoder{Name: "cgroup"}, 8, "cgroup: no cgroup2 file system in "+proc+"/self/mountinfo")

	e = NewEnv(16)
	e.ProcRoot = t.TempDir()
	newErr(t, e, config.Decoder{Name: "cgroup"}, 8, "cgroup: mount table "+e.ProcRoot+"/self/mountinfo: no such file or directory")
}

func TestFindCgroup2(t *testing.T) {
	cases := []struct {
		name, mountinfo, mount, root string
		ok                           bool
	}{
		{
			name: "hybrid",
			mountinfo: "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n" +
				"40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd\n" +
				"41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n",
			mount: "/sys/fs/cgroup/unified", root: "/", ok: true,
		},
		{
			name:      "unified, optional fields",
			mountinfo: "35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 master:2 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n",
			mount:     "/sys/fs/cgroup", root: "/", ok: true,
		},
		{
			name: "prefer whole hierarchy",
			mountinfo: "50 24 0:30 /sub /mnt/sub rw - cgroup2 cgroup2 rw\n" +
				"51 24 0:30 / /mnt/all rw - cgroup2 cgroup2 rw\n" +
				"52 24 0:30 / /mnt/second rw - cgroup2 cgroup2 rw\n",
			mount: "/mnt/all", root: "/", ok: true,
		},
		{
			name:      "escaped",
			mountinfo: `60 24 0:30 / /mnt/with\040space\134x rw - cgroup2 none rw` + "\n",
			mount:     `/mnt/with space\x`, root: "/", ok: true,
		},
		{name: "none", mountinfo: "22 1 0:21 / /proc rw - proc proc rw\nshort line\n", ok: false},
	}
	for _, c := range cases {
		mount, root, ok := findCgroup2([]byte(c.mountinfo))
		if mount != c.mount || root != c.root || ok != c.ok {
			t.Errorf("%s: findCgroup2 = %q, %q, %v; want %q, %q, %v", c.name, mount, root, ok, c.mount, c.root, c.ok)
		}
	}
	if got := unescapeMount(`a\\b\04`); got != `a\\b\04` {
		t.Errorf("unescapeMount kept bad escapes as %q", got)
	}
}

// TestCgroupReal creates a cgroup in this machine's cgroup2 hierarchy,
// wherever it is mounted, and decodes its id.
func TestCgroupReal(t *testing.T) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		testenv.SkipOrFail(t, "cannot find the cgroup2 mount: %v", err)
	}
	mount, root, ok := findCgroup2(data)
	if !ok {
		testenv.SkipOrFail(t, "no cgroup2 mount in /proc/self/mountinfo")
	}
	name := "kernel_exporter_test_" + strconv.Itoa(os.Getpid())
	dir := filepath.Join(mount, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		testenv.SkipOrFail(t, "cannot create a cgroup (not root?): %v", err)
	}
	defer os.Remove(dir)
	id := inode(t, dir)

	want := "/" + name
	if root != "/" {
		want = root + want
	}
	d := mustNew(t, NewEnv(16), config.Decoder{Name: "cgroup"}, 8)
	runCases(t, d, []decodeCase{{name: name, in: u64(id), out: want}})

	// --compat.ebpf-exporter: the directory's full path
	// (/sys/fs/cgroup/unified/<name> on a hybrid host).
	c := NewEnv(16)
	c.Compat = true
	t.Logf("compat path %s", dir)
	d = mustNew(t, c, config.Decoder{Name: "cgroup"}, 8)
	runCases(t, d, []decodeCase{{name: name + " compat", in: u64(id), out: dir}})
}

func BenchmarkCgroupWalk(b *testing.B) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		b.Skip(err)
	}
	mount, _, ok := findCgroup2(data)
	if !ok {
		b.Skip("no cgroup2 mount")
	}
	dirs := 0
	for b.Loop() {
		dirs = 0
		_, _, err := walkCgroups(mount, "", maxCgroupDepth, maxCgroupWalkDirs, nil, func(uint64, []byte) bool {
			dirs++
			return true
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(dirs), "dirs/op")
}

// resolverWithClock builds a cgroup decoder on e and returns it with its
// resolver, whose clock reads *now.
func resolverWithClock(t *testing.T, e *Env, now *time.Time) (Decoder, *cgroupResolver) {
	t.Helper()
	d := mustNew(t, e, config.Decoder{Name: "cgroup"}, 8)
	r, err := e.cgroupResolver()
	if err != nil {
		t.Fatal(err)
	}
	r.now = func() time.Time { return *now }
	return d, r
}

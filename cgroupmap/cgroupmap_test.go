// SPDX-License-Identifier: Apache-2.0

package cgroupmap

import (
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/config"
	"github.com/kernel-exporter/kernel_exporter/programs"
)

// fakeMap is a Map in memory, with max entries and optional failures.
type fakeMap struct {
	mu      sync.Mutex
	max     uint32
	keys    map[uint64]bool
	failPut error
}

func newFakeMap(max uint32) *fakeMap { return &fakeMap{max: max, keys: map[uint64]bool{}} }

func (m *fakeMap) Put(key, value any) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failPut != nil {
		return m.failPut
	}
	if v := value.([]byte); len(v) != 1 || v[0] != 1 {
		return errors.New("value size")
	}
	k := key.(uint64)
	if !m.keys[k] && len(m.keys) >= int(m.max) {
		return errors.New("map full")
	}
	m.keys[k] = true
	return nil
}

func (m *fakeMap) Delete(key any) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := key.(uint64)
	if !m.keys[k] {
		return ebpf.ErrKeyNotExist
	}
	delete(m.keys, k)
	return nil
}

func (m *fakeMap) MaxEntries() uint32 { return m.max }
func (m *fakeMap) ValueSize() uint32  { return 1 }

func (m *fakeMap) sorted() []uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []uint64
	for k := range m.keys {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// tree makes directories under a temporary "mount" and returns their
// inode numbers (the ids a walk reports) by path.
func tree(t *testing.T, mount string, dirs ...string) map[string]uint64 {
	t.Helper()
	ids := map[string]uint64{}
	for _, d := range dirs {
		p := filepath.Join(mount, d)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		ids[d] = st.Ino
	}
	return ids
}

func spec(t *testing.T, regexps ...string) *config.CgroupIDMap {
	t.Helper()
	y := "cgroup_id_map:\n  name: allow\n  type: hash\n  regexps:\n"
	for _, r := range regexps {
		y += "    - '" + r + "'\n"
	}
	y += "metrics:\n  counters:\n    - name: x_total\n      help: x\n      labels:\n        - name: a\n          size: 8\n          decoders:\n            - name: uint\n"
	c, err := config.Parse("t.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.CgroupIDMap()
	if err != nil || s == nil {
		t.Fatalf("CgroupIDMap: %v, %v", s, err)
	}
	return s
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func want(ids map[string]uint64, paths ...string) []uint64 {
	var out []uint64
	for _, p := range paths {
		out = append(out, ids[p])
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// TestFillAndPrune: the map holds exactly the matching cgroups after each
// refresh; a stale key (from before start) and a removed cgroup are pruned,
// a new matching one is added.
func TestFillAndPrune(t *testing.T) {
	mount := t.TempDir()
	ids := tree(t, mount, "system.slice/a.service", "system.slice/b.service", "user.slice/u", "system.slice/a.service/sub")
	m := newFakeMap(16)
	m.keys[999999999] = true // stale
	f, err := start(spec(t, `^/system\.slice/[^/]+$`), m, []uint64{999999999}, Options{Mount: mount, Interval: time.Hour, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	if got, w := m.sorted(), want(ids, "system.slice/a.service", "system.slice/b.service"); !slices.Equal(got, w) {
		t.Fatalf("after start: keys %v, want %v", got, w)
	}
	if err := os.Remove(filepath.Join(mount, "system.slice/b.service")); err != nil {
		t.Fatal(err)
	}
	ids2 := tree(t, mount, "system.slice/c.service")
	if err := f.Refresh(); err != nil {
		t.Fatal(err)
	}
	if got, w := m.sorted(), want(map[string]uint64{"a": ids["system.slice/a.service"], "c": ids2["system.slice/c.service"]}, "a", "c"); !slices.Equal(got, w) {
		t.Fatalf("after refresh: keys %v, want %v", got, w)
	}
	if st := f.Stats(); st.Entries != 2 || st.Walks != 2 || st.Dropped != 0 {
		t.Errorf("stats %+v, want 2 entries, 2 walks, 0 dropped", st)
	}
}

// TestBounds: a full map keeps its max_entries ids and counts the rest; a
// walk cut short by MaxDirs prunes nothing.
func TestBounds(t *testing.T) {
	mount := t.TempDir()
	tree(t, mount, "k/p1", "k/p2", "k/p3", "k/p4", "k/p5")
	m := newFakeMap(3)
	f, err := start(spec(t, `^/k/p`), m, nil, Options{Mount: mount, Interval: time.Hour, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	if n := len(m.sorted()); n != 3 {
		t.Fatalf("%d keys in a map of 3 entries", n)
	}
	if st := f.Stats(); st.Dropped != 2 {
		t.Errorf("dropped %d, want 2", st.Dropped)
	}
	before := m.sorted()
	f.opts.MaxDirs = 2 // the mount and k: no p* seen, and incomplete
	if err := f.Refresh(); err != nil {
		t.Fatal(err)
	}
	if got := m.sorted(); !slices.Equal(got, before) {
		t.Errorf("a cut-short walk changed the keys: %v, want %v", got, before)
	}
}

// TestErrors: a mount that cannot be read fails Start; failed inserts are
// returned (and logged by the loop), and retried at the next refresh.
func TestErrors(t *testing.T) {
	if _, err := start(spec(t, `.`), newFakeMap(4), nil, Options{Mount: filepath.Join(t.TempDir(), "none"), Logger: quiet()}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing mount: err %v, want ErrNotExist", err)
	}
	mount := t.TempDir()
	tree(t, mount, "a")
	m := newFakeMap(4)
	m.failPut = errors.New("boom")
	if _, err := start(spec(t, `^/a$`), m, nil, Options{Mount: mount, Logger: quiet()}); err == nil {
		t.Fatal("Start with failing inserts: no error")
	}
	m.failPut = nil
	f, err := start(spec(t, `^/a$`), m, nil, Options{Mount: mount, Interval: 20 * time.Millisecond, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	// The loop finds a cgroup made after start within a few intervals.
	ids := tree(t, mount, "b")
	f.spec = spec(t, `^/(a|b)$`)
	deadline := time.Now().Add(5 * time.Second)
	for !m.keys[ids["b"]] {
		if time.Now().After(deadline) {
			t.Fatal("the refresh loop did not add a new cgroup within 5 s (interval 20 ms)")
		}
		time.Sleep(10 * time.Millisecond)
	}
	f.Stop()
	f.Stop() // twice is fine
}

// TestBundledRegexps: the runqlat_cgroup program's default allow list
// takes systemd services and Kubernetes pods, not slices or containers.
func TestBundledRegexps(t *testing.T) {
	y, err := fs.ReadFile(programs.FS, "runqlat_cgroup.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := config.Parse("runqlat_cgroup.yaml", y)
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.CgroupIDMap()
	if err != nil || s == nil || s.Name != "runqlat_cgroup_allow" {
		t.Fatalf("CgroupIDMap: %+v, %v", s, err)
	}
	f := &Filler{spec: s}
	for path, w := range map[string]bool{
		"/system.slice/nginx.service":         true,
		"/system.slice/docker-0123abcd.scope": true,
		"/system.slice":                       false,
		"/system.slice/nginx.service/worker":  false,
		"/user.slice/user-1000.slice":         false,
		"/":                                   false,
		"/kubepods/burstable/pod1234-5678":    true,
		"/kubepods.slice/kubepods-besteffort.slice/kubepods-pod1.slice": true,
		"/kubepods/burstable":                               false,
		"/kubepods/burstable/pod1234-5678/0123456789abcdef": false,
		"/kubepods/pod1234":                                 true,
		"/kubepods.slice/kubepods-pod1.slice":               true,
		"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1.slice": true,
		"/kubepods.slice/kubepods-pod1.slice/cri-containerd-0123.scope":            false,
	} {
		if got := f.match([]byte(path)); got != w {
			t.Errorf("bundled regexps on %s: %v, want %v", path, got, w)
		}
	}
}

// BenchmarkRefresh measures one refresh over a tree of 1000 directories
// (10 slices of 100 services, on the test's temporary file system, not
// cgroupfs) with the bundled regexps, half of them matching.
func BenchmarkRefresh(b *testing.B) {
	mount := b.TempDir()
	for i := range 10 {
		for j := range 100 {
			slice := "user.slice"
			if j%2 == 0 {
				slice = "system.slice"
			}
			if err := os.MkdirAll(filepath.Join(mount, slice, "s"+string(rune('a'+i))+string(rune('a'+j%26))+string(rune('a'+j/26))+".service"), 0o755); err != nil {
				b.Fatal(err)
			}
		}
	}
	y, err := fs.ReadFile(programs.FS, "runqlat_cgroup.yaml")
	if err != nil {
		b.Fatal(err)
	}
	c, err := config.Parse("runqlat_cgroup.yaml", y)
	if err != nil {
		b.Fatal(err)
	}
	s, _ := c.CgroupIDMap()
	f, err := start(s, newFakeMap(256), nil, Options{Mount: mount, Interval: time.Hour, Logger: quiet()})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Stop()
	b.ResetTimer()
	for range b.N {
		if err := f.Refresh(); err != nil {
			b.Fatal(err)
		}
	}
}

// fakeStorage is a cgrp_storage Map in memory: keys are directory fds,
// recorded as the directory's inode number (the cgroup id), values u64.
type fakeStorage struct {
	vals    map[uint64]uint64
	deletes int
}

func (m *fakeStorage) ino(key any) uint64 {
	var st unix.Stat_t
	if err := unix.Fstat(int(key.(uint32)), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		panic("key is not a directory fd")
	}
	return st.Ino
}

func (m *fakeStorage) Put(key, value any) error {
	m.vals[m.ino(key)] = value.(uint64)
	return nil
}

func (m *fakeStorage) Delete(key any) error {
	m.deletes++
	delete(m.vals, m.ino(key))
	return nil
}

func (m *fakeStorage) MaxEntries() uint32 { return 0 }
func (m *fakeStorage) ValueSize() uint32  { return 8 }

// TestCgrpStorage: with type cgrp_storage the matching cgroups get the
// value 1 through an fd of their directory; a removed cgroup is forgotten
// without a delete (the kernel frees its entry), a renamed one that no
// longer matches is deleted through its fd, a new one is added.
func TestCgrpStorage(t *testing.T) {
	mount := t.TempDir()
	ids := tree(t, mount, "system.slice/a.service", "system.slice/b.service", "system.slice/c.service", "user.slice/u")
	sp := spec(t, `^/system\.slice/[^/]+\.service$`)
	sp.Type = config.CgroupIDMapCgrpStorage
	m := &fakeStorage{vals: map[uint64]uint64{}}
	f, err := start(sp, m, nil, Options{Mount: mount, Interval: time.Hour, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	keys := func() []uint64 {
		var out []uint64
		for k, v := range m.vals {
			if v != 1 {
				t.Errorf("cgroup %d has value %d, want 1", k, v)
			}
			out = append(out, k)
		}
		slices.Sort(out)
		return out
	}
	if got, w := keys(), want(ids, "system.slice/a.service", "system.slice/b.service", "system.slice/c.service"); !slices.Equal(got, w) {
		t.Fatalf("after start: %v, want %v", got, w)
	}
	// d first: a temporary file system reuses inode numbers, cgroupfs
	// never reuses ids.
	ids2 := tree(t, mount, "system.slice/d.service")
	if err := os.Remove(filepath.Join(mount, "system.slice/b.service")); err != nil {
		t.Fatal(err)
	}
	delete(m.vals, ids["system.slice/b.service"]) // as the kernel does
	if err := os.Rename(filepath.Join(mount, "system.slice/c.service"), filepath.Join(mount, "system.slice/c.old")); err != nil {
		t.Fatal(err)
	}
	if err := f.Refresh(); err != nil {
		t.Fatal(err)
	}
	w := want(map[string]uint64{"a": ids["system.slice/a.service"], "d": ids2["system.slice/d.service"]}, "a", "d")
	if got := keys(); !slices.Equal(got, w) || m.deletes != 1 {
		t.Fatalf("after refresh: %v and %d deletes, want %v and 1 (the renamed cgroup)", got, m.deletes, w)
	}
	if st := f.Stats(); st.Entries != 2 || st.Walks != 2 {
		t.Errorf("stats %+v, want 2 entries, 2 walks", st)
	}
}

// TestHashValue: a hash map's keys get the value 1 in host byte order, as
// ebpf_exporter writes it (u64), or zeros for other widths.
func TestHashValue(t *testing.T) {
	for size, want := range map[uint32]uint64{1: 1, 2: 1, 4: 1, 8: 1, 3: 0, 16: 0} {
		v := hashValue(size)
		var got uint64
		for _, b := range v {
			got += uint64(b)
		}
		if len(v) != int(size) || got != want {
			t.Errorf("hashValue(%d) = % x, want %d bytes summing to %d", size, v, size, want)
		}
	}
}

// TestFullPaths: a regexp written for ebpf_exporter's full paths (the
// mount point, then the path below it) selects the same cgroups as one
// for the relative paths; the root is the mount point itself.
func TestFullPaths(t *testing.T) {
	mount := t.TempDir()
	ids := tree(t, mount, "system.slice/a.service", "user.slice/u")
	var root unix.Stat_t
	if err := unix.Stat(mount, &root); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		re   string
		want []uint64
	}{
		{`^` + regexp.QuoteMeta(mount) + `/system\.slice/[^/]+$`, want(ids, "system.slice/a.service")},
		{`^/system\.slice/[^/]+$`, want(ids, "system.slice/a.service")},
		{`^` + regexp.QuoteMeta(mount) + `$`, []uint64{root.Ino}},
		{`^/$`, []uint64{root.Ino}},
		{`^/sys/fs/cgroup/user\.slice/u$`, nil},
	} {
		m := newFakeMap(16)
		f, err := start(spec(t, tc.re), m, nil, Options{Mount: mount, Interval: time.Hour, Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		f.Stop()
		if got := m.sorted(); !slices.Equal(got, tc.want) {
			t.Errorf("regexp %s: keys %v, want %v", tc.re, got, tc.want)
		}
	}
}

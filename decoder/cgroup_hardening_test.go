// SPDX-License-Identifier: Apache-2.0

package decoder

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// cgroupChains makes chains*depth directories under mount: chain i is
// c<i>/l1/l2/.../l<depth-1>. It returns the path (below mount) of the
// deepest directory of each chain.
func cgroupChains(t *testing.T, mount string, chains, depth int) []string {
	t.Helper()
	deepest := make([]string, chains)
	for i := range deepest {
		dir := fmt.Sprintf("c%05d", i)
		for l := range depth {
			if l > 0 {
				dir += "/l" + strconv.Itoa(l)
			}
			if err := os.Mkdir(filepath.Join(mount, dir), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		deepest[i] = dir
	}
	return deepest
}

// cgroupMemEnv is cgroupEnv with the fake mount in memory (/dev/shm) when
// it can be, since the tests below make tens of thousands of directories.
func cgroupMemEnv(t *testing.T) (*Env, string) {
	t.Helper()
	e, mount := cgroupEnv(t, "/")
	shm, err := os.MkdirTemp("/dev/shm", "cgroup_test_")
	if err != nil {
		return e, mount
	}
	t.Cleanup(func() { os.RemoveAll(shm) })
	proc := t.TempDir()
	mkdirs(t, proc, "self")
	writeFile(t, filepath.Join(proc, "self", "mountinfo"), "41 31 0:38 / "+shm+" rw,relatime shared:9 - cgroup2 cgroup2 rw\n")
	e.ProcRoot = proc
	return e, shm
}

// decodeID decodes a raw id and checks the result, without a subtest (the
// tests below decode thousands).
func decodeID(t *testing.T, d Decoder, id uint64, want string) {
	t.Helper()
	out, err := d.Decode(u64(id))
	if err != nil || string(out) != want {
		t.Fatalf("Decode(%d) = %q, %v; want %q", id, out, err, want)
	}
}

// TestHardening09CgroupWalkBounded (finding 9, memory exhaustion): anyone
// who may create cgroups can grow the hierarchy and make ids unknown at will
// (run a task in a fresh cgroup, remove it). The cgroup decoder used to keep
// the path of every cgroup of its last walk, whatever --decoder.cache-size
// said, and to walk the whole tree again for each unknown id, once a second.
// It must keep at most its cache bound of paths (and as many ids), walk at
// most once per cgroupWalkInterval, and not look again for an id a walk did
// not find for cgroupUnknownTTL; resolvable ids still resolve.
func TestHardening09CgroupWalkBounded(t *testing.T) {
	const cacheSize = 10
	e, mount := cgroupMemEnv(t)
	e.CacheSize = cacheSize
	deepest := cgroupChains(t, mount, 950, 20) // 19,000 cgroups: all within maxCgroupWalkDirs
	now := time.Unix(1000, 0)
	d, r := resolverWithClock(t, e, &now)

	decodeID(t, d, inode(t, filepath.Join(mount, deepest[500])), "/"+deepest[500])
	if r.walks != 1 {
		t.Fatalf("walks after the first lookup = %d, want 1", r.walks)
	}

	// A fresh unknown id every 100 ms for 100 s: one walk per 10 s (the
	// bounds are spelled out, not taken from the constants: the code before
	// the fix walked once a second).
	const attack = 100 * time.Second
	maxHeld := 0
	for i := range 1000 {
		now = now.Add(attack / 1000)
		id := uint64(1)<<40 + uint64(i)
		decodeID(t, d, id, "unknown_cgroup_id:"+strconv.FormatUint(id, 10))
		maxHeld = max(maxHeld, r.held())
	}
	if maxHeld > 3*cacheSize {
		t.Errorf("with 1000 unknown ids the resolver held up to %d entries, want at most %d (3 x cache size %d)", maxHeld, 3*cacheSize, cacheSize)
	}
	if limit := 1 + int(attack/(10*time.Second)); r.walks > limit {
		t.Errorf("%d walks for 1000 unknown ids in %v, want at most %d (one per 10s)", r.walks, attack, limit)
	}

	// The same unknown id once a second for 5 minutes: looked for again
	// only once a minute.
	walks := r.walks
	const stale = 5 * time.Minute
	id := uint64(1)<<40 + 999
	for range int(stale / time.Second) {
		now = now.Add(time.Second)
		decodeID(t, d, id, "unknown_cgroup_id:"+strconv.FormatUint(id, 10))
	}
	if limit := 1 + int(stale/time.Minute); r.walks-walks > limit {
		t.Errorf("%d walks for one unknown id asked once a second for %v, want at most %d (one per minute)", r.walks-walks, stale, limit)
	}
	if held := r.held(); held > 3*cacheSize {
		t.Errorf("the resolver holds %d entries, want at most %d", held, 3*cacheSize)
	}

	// Resolvable ids still resolve, at the next walk: one of the tree (not
	// cached: the cache holds 10 of 19,000) and a new one.
	mkdirs(t, mount, "new.slice/new.service")
	now = now.Add(cgroupWalkInterval)
	decodeID(t, d, inode(t, filepath.Join(mount, deepest[949])), "/"+deepest[949])
	decodeID(t, d, inode(t, filepath.Join(mount, deepest[949])), "/"+deepest[949])
	now = now.Add(cgroupWalkInterval)
	decodeID(t, d, inode(t, filepath.Join(mount, "new.slice/new.service")), "/new.slice/new.service")
	t.Logf("%d walks in all, %d entries held", r.walks, r.held())
	if held := r.held(); held > 3*cacheSize {
		t.Errorf("the resolver holds %d entries, want at most %d", held, 3*cacheSize)
	}
}

// TestCgroupWalkBounds checks the walk's bounds: depth, directories, and
// the visitor ending it; and that the resolver applies them.
func TestCgroupWalkBounds(t *testing.T) {
	e, mount := cgroupMemEnv(t)
	chain := cgroupChains(t, mount, 1, 40)[0] // c00000/l1/.../l39
	for i := range 100 {
		mkdirs(t, mount, "wide/w"+strconv.Itoa(i))
	}
	writeFile(t, filepath.Join(mount, "wide", "cgroup.procs"), "")
	if err := os.Symlink(filepath.Join(mount, "c00000"), filepath.Join(mount, "wide", "link")); err != nil {
		t.Fatal(err)
	}

	walk := func(maxDepth, maxDirs, stopAt int) (n, deepest int) {
		t.Helper()
		_, _, err := walkCgroups(mount, "/pre", maxDepth, maxDirs, nil, func(_ uint64, path []byte) bool {
			n++
			if !strings.HasPrefix(string(path), "/pre") {
				t.Fatalf("path %q lacks the prefix", path)
			}
			deepest = max(deepest, strings.Count(string(path), "/")-1)
			return n != stopAt
		})
		if err != nil {
			t.Fatal(err)
		}
		return n, deepest
	}
	// mount, 40 levels of the chain, wide and its 100 children.
	if n, deepest := walk(64, 1000, -1); n != 1+40+1+100 || deepest != 40 {
		t.Errorf("unbounded walk: %d directories, %d deep; want %d, 40", n, deepest, 1+40+1+100)
	}
	if n, deepest := walk(5, 1000, -1); n != 1+5+1+100 || deepest != 5 {
		t.Errorf("walk 5 deep: %d directories, %d deep; want %d, 5", n, deepest, 1+5+1+100)
	}
	if n, _ := walk(64, 50, -1); n != 50 {
		t.Errorf("walk of at most 50: %d directories", n)
	}
	if n, _ := walk(64, 1000, 3); n != 3 {
		t.Errorf("walk stopped at 3: %d directories", n)
	}
	if _, _, err := walkCgroups(filepath.Join(mount, "nope"), "", 32, 100, nil, func(uint64, []byte) bool { return true }); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("walk of a missing mount: %v", err)
	}

	// The resolver: an id deeper than maxDepth is unknown.
	now := time.Unix(1000, 0)
	d, r := resolverWithClock(t, e, &now)
	r.maxDepth = 5
	level5 := strings.Join(strings.Split(chain, "/")[:5], "/")
	level6 := strings.Join(strings.Split(chain, "/")[:6], "/")
	decodeID(t, d, inode(t, filepath.Join(mount, level5)), "/"+level5)
	now = now.Add(cgroupWalkInterval)
	id6 := inode(t, filepath.Join(mount, level6))
	decodeID(t, d, id6, "unknown_cgroup_id:"+strconv.FormatUint(id6, 10))
	// Unknown for cgroupUnknownTTL, looked for again after it.
	r.maxDepth = 64
	now = now.Add(cgroupUnknownTTL - time.Second)
	decodeID(t, d, id6, "unknown_cgroup_id:"+strconv.FormatUint(id6, 10))
	now = now.Add(time.Second)
	decodeID(t, d, id6, "/"+level6)
	if r.walks != 3 {
		t.Errorf("walks = %d, want 3", r.walks)
	}
}

// TestCgroupWalkResume: a hierarchy larger than the walk bound is covered
// by successive walks, each resuming where the last stopped, so a subtree
// of more cgroups than the bound cannot hide the others; an id is unknown
// only once a whole cycle of walks has not found it.
func TestCgroupWalkResume(t *testing.T) {
	e, mount := cgroupMemEnv(t)
	cgroupChains(t, mount, 20, 6)
	mkdirs(t, mount, "zz.slice/last.service")
	all := map[uint64]string{}
	_, complete, err := walkCgroups(mount, "", 32, 1000, nil, func(ino uint64, path []byte) bool {
		all[ino] = string(path)
		return true
	})
	if err != nil || !complete || len(all) != 1+20*6+2 {
		t.Fatalf("whole walk: %d directories, complete %v, %v", len(all), complete, err)
	}

	// Walks of at most 7 directories: each sees the next 7, and the
	// cycle visits every directory exactly once.
	seen := map[uint64]string{}
	var cursor []cgroupPos
	walks := 0
	for complete = false; !complete; walks++ {
		if walks > 100 {
			t.Fatal("no end after 100 walks")
		}
		n := 0
		cursor, complete, err = walkCgroups(mount, "", 32, 7, cursor, func(ino uint64, path []byte) bool {
			n++
			if old, ok := seen[ino]; ok {
				t.Errorf("%s visited twice (as %s)", path, old)
			}
			seen[ino] = string(path)
			return true
		})
		if err != nil {
			t.Fatal(err)
		}
		if !complete && (n != 7 || len(cursor) == 0) {
			t.Fatalf("walk %d: %d directories, cursor %v", walks, n, cursor)
		}
		if len(cursor) > 32 {
			t.Fatalf("cursor of %d levels", len(cursor))
		}
	}
	if len(seen) != len(all) || walks != (len(all)+6)/7 {
		t.Errorf("cycle: %d of %d directories in %d walks", len(seen), len(all), walks)
	}
	for ino, path := range all {
		if seen[ino] != path {
			t.Errorf("%d: %q in the cycle, %q in the whole walk", ino, seen[ino], path)
		}
	}

	// The resolver, 7 directories a walk: every cgroup is found, within a
	// cycle of walks; an unknown id is reported unknown after one.
	now := time.Unix(1000, 0)
	d, r := resolverWithClock(t, e, &now)
	r.maxDirs = 7
	decodeID(t, d, inode(t, mount), "/")
	last := inode(t, filepath.Join(mount, "zz.slice/last.service"))
	const gone = 1 << 50
	cycle := (len(all) + 6) / 7
	for i := range cycle + 2 {
		now = now.Add(cgroupWalkInterval)
		out, err := d.Decode(u64(last))
		if err != nil {
			t.Fatal(err)
		}
		if string(out) == "/zz.slice/last.service" {
			break
		}
		if i == cycle+1 {
			t.Fatalf("%d not found after %d walks: %s", last, r.walks, out)
		}
	}
	for range 2*cycle + 2 {
		decodeID(t, d, gone, "unknown_cgroup_id:"+strconv.FormatUint(gone, 10))
		if _, ok := r.unknown.Peek(gone); ok {
			break
		}
		now = now.Add(cgroupWalkInterval)
	}
	if _, ok := r.unknown.Peek(gone); !ok {
		t.Fatalf("%d not unknown after %d walks", uint64(gone), r.walks)
	}
	if len(r.pending) != 0 {
		t.Errorf("pending %v", r.pending)
	}
	t.Logf("%d directories, %d walks a cycle; %d walks in all", len(all), cycle, r.walks)
}

package decoder

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/kernel-exporter/kernel_exporter/config"
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
	deepest := cgroupChains(t, mount, 1000, 20) // 20,000 cgroups
	d := mustNew(t, e, config.Decoder{Name: "cgroup"}, 8)
	r, err := e.cgroupResolver()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	r.now = func() time.Time { return now }

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
		decodeID(t, d, id, strconv.FormatUint(id, 10))
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
		decodeID(t, d, id, strconv.FormatUint(id, 10))
	}
	if limit := 1 + int(stale/time.Minute); r.walks-walks > limit {
		t.Errorf("%d walks for one unknown id asked once a second for %v, want at most %d (one per minute)", r.walks-walks, stale, limit)
	}
	if held := r.held(); held > 3*cacheSize {
		t.Errorf("the resolver holds %d entries, want at most %d", held, 3*cacheSize)
	}

	// Resolvable ids still resolve, at the next walk: one of the tree (not
	// cached: the cache holds 10 of 20,000) and a new one.
	mkdirs(t, mount, "new.slice/new.service")
	now = now.Add(cgroupWalkInterval)
	decodeID(t, d, inode(t, filepath.Join(mount, deepest[999])), "/"+deepest[999])
	decodeID(t, d, inode(t, filepath.Join(mount, deepest[999])), "/"+deepest[999])
	now = now.Add(cgroupWalkInterval)
	decodeID(t, d, inode(t, filepath.Join(mount, "new.slice/new.service")), "/new.slice/new.service")
	t.Logf("%d walks in all, %d entries held", r.walks, r.held())
	if held := r.held(); held > 3*cacheSize {
		t.Errorf("the resolver holds %d entries, want at most %d", held, 3*cacheSize)
	}
}

// SPDX-License-Identifier: Apache-2.0

package decoder

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/kernel-exporter/kernel_exporter/bounded"
	"github.com/kernel-exporter/kernel_exporter/config"
	"golang.org/x/sys/unix"
)

func init() { register("cgroup", newCgroup) }

// cgroupDecoder turns a cgroup v2 id, as bpf_get_current_cgroup_id() returns
// it (the inode number of the cgroup's directory), into the cgroup's path in
// the hierarchy: "/system.slice/cron.service", "/" for the root. The id is a
// raw u64 (8 bytes) or the decimal text of an earlier uint decoder. An id
// of no known cgroup prints as "unknown_cgroup_id:<id>", as ebpf_exporter
// prints it (the key is kept), and is looked up again at the next read.
//
// The hierarchy is found through the cgroup2 entry of
// <ProcRoot>/self/mountinfo, and paths are relative to its root (so they
// match /proc/<pid>/cgroup). A root outside our cgroup namespace (shown as
// "/../.." in a container with a private cgroup namespace and the host's
// hierarchy mounted) cannot be named, so paths are then relative to the
// mount ("/kubepods/...", never "/../../kubepods/..."). When Env.Compat is
// set, paths are instead the cgroup directory's full path, as
// ebpf_exporter prints them: the mount point, then the path below it
// ("/sys/fs/cgroup/unified/system.slice/cron.service"; the root is the
// mount point itself).
//
// Ids are resolved by walking the mounted
// directory tree and reading inode numbers. An id not cached triggers a
// walk, at most one per cgroupWalkInterval (10 s); a walk visits at most
// maxCgroupWalkDirs directories (20,000), maxCgroupDepth levels deep (32),
// and the next one resumes where it stopped. An id a whole cycle of walks
// did not find is unknown for cgroupUnknownTTL (1 minute) before it is
// looked for again. Paths once resolved are kept in an LRU cache of
// the Env's cache size, so a removed cgroup's counters keep their path; the
// resolver keeps nothing else but as many pending and unknown ids.
type cgroupDecoder struct {
	r    *cgroupResolver
	size int
}

func newCgroup(e *Env, _ config.Decoder, size int, _ StackMaps) (Decoder, error) {
	if size != textInput {
		if err := checkSize("cgroup", size, 8); err != nil {
			return nil, err
		}
	}
	r, err := e.cgroupResolver()
	if err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	return &cgroupDecoder{r: r, size: size}, nil
}

// Decode fails on a raw field of the wrong width or on text that is not a
// decimal number.
func (d *cgroupDecoder) Decode(in []byte) ([]byte, error) {
	out, _, err := d.decodeSettled(in)
	return out, err
}

// decodeSettled is Decode, and says whether the path is settled (see
// Chain.DecodeSettled): not for an unknown id, which a later walk may find.
func (d *cgroupDecoder) decodeSettled(in []byte) ([]byte, bool, error) {
	id, err := readInput("cgroup", in, d.size)
	if err != nil {
		return nil, true, err
	}
	if path, ok := d.r.lookup(id); ok {
		return path, true, nil
	}
	return appendDecimal(append(make([]byte, 0, len(unknownCgroupPrefix)+20), unknownCgroupPrefix...), id), false, nil
}

// unknownCgroupPrefix starts what the cgroup decoder prints for an id of
// no known cgroup; the kube_* decoders read the id back from it.
const unknownCgroupPrefix = "unknown_cgroup_id:"

// cgroupRoot turns the root of a cgroup2 mount, as mountinfo gives it,
// into the prefix of the paths below it: "" for "/" and for a root outside
// the cgroup namespace ("/../..", "/../../kubepods/x": the kernel's
// cgroup_show_path prints such roots relative to the namespace's root, and
// they name nothing usable), the root without a trailing "/" otherwise.
func cgroupRoot(root string) string {
	if root == "/" || root == "/.." || strings.HasPrefix(root, "/../") || !strings.HasPrefix(root, "/") {
		return ""
	}
	return strings.TrimSuffix(root, "/")
}

// maxMountinfo bounds <ProcRoot>/self/mountinfo (a host with ten thousand
// mounts has about 1.5 MiB).
const maxMountinfo = 16 << 20

// Bounds of cgroup resolution. Anyone who may create cgroups (a delegated
// subtree, a container) controls the size of the hierarchy and can make ids
// unknown at will (by running a task in a cgroup and removing it), so
// neither the walk nor what it keeps may grow with the hierarchy.
const (
	// cgroupWalkInterval is the least time between two walks of the
	// hierarchy, however many unknown ids arrive. A cgroup created since the
	// last walk is thus named within this time (plus a scrape interval).
	cgroupWalkInterval = 10 * time.Second

	// cgroupUnknownTTL is how long an id that a walk did not find is
	// reported as unknown without being looked for again.
	cgroupUnknownTTL = time.Minute

	// maxCgroupDepth is how many levels below the mount a walk descends.
	// Real hierarchies are under 10 deep (a systemd unit in a container in
	// a Kubernetes pod: about 8).
	maxCgroupDepth = 32

	// maxCgroupWalkDirs is how many directories one walk visits at most
	// (the mount included): ten times the cgroups of a large container host
	// (a few hundred to a few thousand), and about 0.5 s of walking on
	// Linux 6.18 (kernfs: 10 to 25 us a directory, more with long names).
	// So walks take at most 5% of a CPU. Cgroups beyond it, in the walk's
	// order (depth first, in getdents order), print as their ids.
	maxCgroupWalkDirs = 20000

	// cgroupDirBuf is the getdents buffer of each level of a walk (a record
	// is at most 280 bytes).
	cgroupDirBuf = 8 << 10

	// maxCgroupFill bounds the two sets whose entries no scrape asked for:
	// the cgroups a walk caches in passing (so that the first scrapes of a
	// small host have every name), and the ids found missing (which only
	// spare walks, already at most one per interval). Under churn, with
	// thousands of short-lived cgroups a minute, bigger sets only grew.
	maxCgroupFill = 4096
)

// cgroupResolver maps cgroup ids to paths for one Env.
//
// It holds at most size paths (the Env's cache size), size pending ids and
// maxCgroupFill unknown ids: an id is looked for by walking the hierarchy,
// which keeps the paths of the ids asked for since the last walk (pending)
// and, while the cache holds fewer than maxCgroupFill paths, those of the
// other cgroups it passes (so that a small host has them all named after
// one walk, as before).
type cgroupResolver struct {
	mount  string // where the hierarchy is mounted
	prefix string // printed before paths below mount: its root within the hierarchy ("" for "/"), or mount (Env.Compat)
	size   int    // bound of cache, unknown and pending
	cache  *lru.Cache[uint64, []byte]
	now    func() time.Time

	// Walk bounds: cgroupWalkInterval, cgroupUnknownTTL, maxCgroupDepth and
	// maxCgroupWalkDirs unless a test changes them.
	interval, unknownTTL time.Duration
	maxDepth, maxDirs    int

	mu       sync.Mutex                    // guards the fields below, and serializes walks
	unknown  *lru.Cache[uint64, time.Time] // ids a walk did not find, and when
	pending  map[uint64]uint64             // ids asked for, and the walk cycle that decides them
	cursor   []cgroupPos                   // where the last walk stopped; nil: at the top
	cycle    uint64                        // walk cycles begun (from the top)
	lastWalk time.Time
	walks    int // walks done, for tests
}

func (e *Env) cgroupResolver() (*cgroupResolver, error) {
	e.cgroupsOnce.Do(func() {
		file := e.procPath("self", "mountinfo")
		data, err := bounded.ReadFile(file, "mount table", maxMountinfo)
		if err != nil {
			e.cgroupsErr = err
			return
		}
		mount, root, ok := findCgroup2(data)
		if !ok {
			e.cgroupsErr = fmt.Errorf("no cgroup2 file system in %s", file)
			return
		}
		prefix := cgroupRoot(root)
		if e.Compat {
			prefix = strings.TrimSuffix(mount, "/")
		}
		e.cgroups = newCgroupResolver(e, mount, prefix)
	})
	return e.cgroups, e.cgroupsErr
}

// newCgroupResolver resolves ids in the hierarchy mounted at mount, and
// prints paths as prefix then the path below mount ("/" for mount itself
// when prefix is "").
func newCgroupResolver(e *Env, mount, prefix string) *cgroupResolver {
	unknown, err := lru.New[uint64, time.Time](min(e.cacheSize(), maxCgroupFill))
	if err != nil {
		panic(err) // cacheSize is positive
	}
	return &cgroupResolver{
		mount:      mount,
		prefix:     prefix,
		size:       e.cacheSize(),
		cache:      newCache[uint64](e),
		now:        time.Now,
		interval:   cgroupWalkInterval,
		unknownTTL: cgroupUnknownTTL,
		maxDepth:   maxCgroupDepth,
		maxDirs:    maxCgroupWalkDirs,
		unknown:    unknown,
		pending:    map[uint64]uint64{},
	}
}

// lookup returns the path of cgroup id. An id not cached is looked for by a
// walk of the hierarchy, unless a walk in the last r.interval did not find
// it (it is then unknown for r.unknownTTL); walks are r.interval apart, and
// an id asked for in between waits for the next one.
func (r *cgroupResolver) lookup(id uint64) ([]byte, bool) {
	if path, ok := r.cache.Get(id); ok {
		return path, true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if path, ok := r.cache.Get(id); ok { // found by a walk we waited for
		return path, true
	}
	now := r.now()
	if since, ok := r.unknown.Get(id); ok {
		if now.Sub(since) < r.unknownTTL {
			return nil, false
		}
		r.unknown.Remove(id)
	}
	if _, ok := r.pending[id]; !ok && len(r.pending) < r.size {
		r.pending[id] = r.cycle + 1 // the next cycle from the top
	}
	if !r.lastWalk.IsZero() && now.Sub(r.lastWalk) < r.interval {
		return nil, false
	}
	r.walk(now)
	return r.cache.Get(id)
}

// walk looks for the pending ids in the hierarchy, from where the last walk
// stopped. Those found are cached. While the cache has room, the paths of
// the other cgroups passed fill it, without evicting anything. The walk
// ends early when nothing is pending and the cache is full. When a walk
// reaches the end of the hierarchy, the ids pending since before its cycle
// began (the walks from the top to the end) become unknown: gone, or
// beyond maxCgroupDepth. r.mu is held.
func (r *cgroupResolver) walk(now time.Time) {
	r.lastWalk = now
	r.walks++
	if r.cursor == nil {
		r.cycle++
	}
	cursor, complete, err := walkCgroups(r.mount, r.prefix, r.maxDepth, r.maxDirs, r.cursor, func(ino uint64, path []byte) bool {
		if _, ok := r.pending[ino]; ok {
			delete(r.pending, ino)
			r.cache.Add(ino, bytes.Clone(path))
		} else if r.cache.Len() < min(r.size, maxCgroupFill) && !r.cache.Contains(ino) {
			r.cache.Add(ino, bytes.Clone(path))
		}
		return len(r.pending) > 0 || r.cache.Len() < min(r.size, maxCgroupFill)
	})
	if err != nil {
		return // the mount is unreadable: try again after r.interval
	}
	r.cursor = cursor
	if complete {
		for id, cycle := range r.pending {
			if cycle <= r.cycle {
				delete(r.pending, id)
				r.unknown.Add(id, now)
			}
		}
	}
}

// held is the number of entries the resolver keeps: paths, unknown and
// pending ids. It is at most 3 times the Env's cache size.
func (r *cgroupResolver) held() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cache.Len() + r.unknown.Len() + len(r.pending)
}

// cgroupPos is where a walk stands in one directory: in the listing at
// offset off (a getdents d_off), and walking subdirectory name ("" when it
// is not walking one: off is then that of the next entry to read).
type cgroupPos struct {
	name string
	off  int64
}

// walkCgroups visits mount and the directories under it, depth first, at
// most maxDepth levels down and maxDirs directories in all (mount
// included), starting where an earlier walk stopped (from: nil for the
// top, which visits mount itself).
//
// visit gets each directory's inode number and path (prefix, then the
// path below mount; "/" for mount itself when prefix is ""); the path is
// valid only during the call. visit returns false to end the walk.
// Directories are opened relative to their parent, without following
// symlinks; those that vanish during the walk are skipped. The walk holds
// one file descriptor and one cgroupDirBuf buffer per level.
//
// When maxDirs ends the walk, next is where to resume (at most maxDepth
// positions); it is nil otherwise. complete says the walk reached the end
// of the hierarchy. The error is that of opening or reading mount itself.
func walkCgroups(mount, prefix string, maxDepth, maxDirs int, from []cgroupPos, visit func(ino uint64, path []byte) bool) (next []cgroupPos, complete bool, err error) {
	fd, err := unix.Open(mount, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, false, &os.PathError{Op: "open", Path: mount, Err: err}
	}
	defer unix.Close(fd)
	w := &cgroupWalk{visit: visit, maxDepth: maxDepth, left: maxDirs, path: []byte(prefix), resume: from}
	if from == nil {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return nil, false, &os.PathError{Op: "stat", Path: mount, Err: err}
		}
		if prefix == "" {
			w.path = append(w.path, '/')
		}
		if w.left--; w.left < 0 {
			return nil, false, nil
		}
		if !visit(st.Ino, w.path) {
			return nil, false, nil
		}
		w.path = []byte(prefix)
	}
	err = w.dir(fd, 0, mount)
	switch {
	case errors.Is(err, errWalkDone):
		return w.stopped, false, nil
	case err != nil:
		return nil, false, err
	}
	return nil, true, nil
}

// errWalkDone ends a walk: the visitor is done or the bound is reached.
var errWalkDone = errors.New("walk done")

// cgroupWalk is the state of one walkCgroups.
type cgroupWalk struct {
	visit    func(ino uint64, path []byte) bool
	maxDepth int
	left     int         // directories the walk may still visit
	path     []byte      // path of the directory being read (prefix first)
	bufs     [][]byte    // getdents buffers, one per level
	resume   []cgroupPos // where to start, one position per level
	stack    []cgroupPos // where the walk is, one position per level
	stopped  []cgroupPos // where to resume, when the bound ended the walk
}

// dir visits the subdirectories of fd, at depth+1 below the mount, and
// descends into each. name is mount, for errors: only those of mount
// itself (depth 0) are returned, besides errWalkDone.
func (w *cgroupWalk) dir(fd, depth int, name string) error {
	if len(w.bufs) <= depth {
		w.bufs = append(w.bufs, make([]byte, cgroupDirBuf))
	}
	var start int64
	if depth < len(w.resume) {
		pos := w.resume[depth]
		if pos.name != "" {
			n := len(w.path)
			w.path = append(append(w.path, '/'), pos.name...)
			err := w.descend(fd, depth, pos.name, pos.off)
			w.path = w.path[:n]
			if err != nil {
				return err
			}
		}
		w.resume = w.resume[:depth]
		start = pos.off
		if _, err := unix.Seek(fd, start, io.SeekStart); err != nil {
			return &os.PathError{Op: "seek", Path: name, Err: err}
		}
	}
	return readSubdirs(fd, name, w.bufs[depth], start, func(ino uint64, child []byte, at, next int64) error {
		if w.left--; w.left < 0 {
			w.stopped = append(slices.Clone(w.stack[:depth]), cgroupPos{off: at})
			return errWalkDone
		}
		n := len(w.path)
		w.path = append(append(w.path, '/'), child...)
		defer func() { w.path = w.path[:n] }()
		if !w.visit(ino, w.path) {
			return errWalkDone
		}
		return w.descend(fd, depth, string(child), next)
	})
}

// descend walks subdirectory child of fd (w.path is its path), whose
// listing entry ends at offset next. A subdirectory that cannot be opened
// or read is skipped: only errWalkDone is returned.
func (w *cgroupWalk) descend(fd, depth int, child string, next int64) error {
	if depth+1 >= w.maxDepth {
		return nil
	}
	cfd, err := unix.Openat(fd, child, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil // removed, or not a directory after all
	}
	defer unix.Close(cfd)
	w.stack = append(w.stack[:depth], cgroupPos{name: child, off: next})
	if err := w.dir(cfd, depth+1, ""); errors.Is(err, errWalkDone) {
		return err
	}
	return nil
}

// readSubdirs calls fn for each subdirectory of the directory open as fd
// (its path is dir, for errors; its offset is start), with its inode
// number, straight from getdents64 (no stat per entry), and the offsets
// where its entry starts and ends. An error from fn ends the reading and is
// returned.
func readSubdirs(fd int, dir string, buf []byte, start int64, fn func(ino uint64, name []byte, at, next int64) error) error {
	at := start
	for {
		n, err := unix.Getdents(fd, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return &os.PathError{Op: "getdents", Path: dir, Err: err}
		}
		if n <= 0 {
			return nil
		}
		// struct linux_dirent64 { u64 d_ino; s64 d_off; u16 d_reclen;
		// u8 d_type; char d_name[]; }
		for off := 0; off+19 <= n; {
			reclen := int(binary.NativeEndian.Uint16(buf[off+16:]))
			if reclen < 19 || off+reclen > n {
				return fmt.Errorf("getdents %s: bad record length %d", dir, reclen)
			}
			ino := binary.NativeEndian.Uint64(buf[off:])
			next := int64(binary.NativeEndian.Uint64(buf[off+8:]))
			typ := buf[off+18]
			name := buf[off+19 : off+reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			off += reclen
			entry := at
			at = next
			if string(name) == "." || string(name) == ".." {
				continue
			}
			if typ == unix.DT_UNKNOWN {
				var st unix.Stat_t
				if unix.Fstatat(fd, string(name), &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
					continue
				}
			} else if typ != unix.DT_DIR {
				continue
			}
			if err := fn(ino, name, entry, next); err != nil {
				return err
			}
		}
	}
}

// findCgroup2 returns the mount point and root of the first cgroup2 mount
// in a mountinfo file, preferring one of the whole hierarchy (root "/"):
//
//	41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
func findCgroup2(mountinfo []byte) (mount, root string, ok bool) {
	for line := range bytes.Lines(mountinfo) {
		fields := strings.Fields(string(line))
		sep := -1
		for i := 6; i < len(fields); i++ {
			if fields[i] == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+1 >= len(fields) || fields[sep+1] != "cgroup2" {
			continue
		}
		r, m := unescapeMount(fields[3]), unescapeMount(fields[4])
		if !ok || (root != "/" && r == "/") {
			mount, root, ok = m, r, true
		}
	}
	return mount, root, ok
}

// unescapeMount undoes the octal escapes (\040 for space, ...) of paths in
// mountinfo.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

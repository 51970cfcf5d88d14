package decoder

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
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
// raw u64 (8 bytes) or the decimal text of an earlier uint decoder. Ids of
// no known cgroup print in decimal.
//
// The hierarchy is found through the cgroup2 entry of
// <ProcRoot>/self/mountinfo, and paths are relative to its root (so they
// match /proc/<pid>/cgroup). Ids are resolved by walking the mounted
// directory tree and reading inode numbers; an id not seen in the last walk
// triggers a new one, at most once per second. Paths once resolved are kept
// in an LRU cache, so a removed cgroup's counters keep their path.
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
	id, err := readInput("cgroup", in, d.size)
	if err != nil {
		return nil, err
	}
	if path, ok := d.r.lookup(id); ok {
		return path, nil
	}
	return appendDecimal(nil, id), nil
}

// maxMountinfo bounds <ProcRoot>/self/mountinfo (a host with ten thousand
// mounts has about 1.5 MiB).
const maxMountinfo = 16 << 20

// cgroupWalkInterval is the least time between two walks of the hierarchy.
const cgroupWalkInterval = time.Second

// cgroupResolver maps cgroup ids to paths for one Env.
type cgroupResolver struct {
	mount  string // where the hierarchy is mounted
	prefix string // its root within the hierarchy; "" for "/"
	cache  *lru.Cache[uint64, []byte]
	now    func() time.Time

	mu       sync.Mutex // guards the fields below, and serializes walks
	walked   map[uint64][]byte
	lastWalk time.Time
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
		e.cgroups = newCgroupResolver(e, mount, root)
	})
	return e.cgroups, e.cgroupsErr
}

func newCgroupResolver(e *Env, mount, root string) *cgroupResolver {
	if root == "/" {
		root = ""
	}
	return &cgroupResolver{
		mount:  mount,
		prefix: strings.TrimSuffix(root, "/"),
		cache:  newCache[uint64](e),
		now:    time.Now,
	}
}

// lookup returns the path of cgroup id, walking the hierarchy again if the
// id is new and the last walk is more than cgroupWalkInterval old.
func (r *cgroupResolver) lookup(id uint64) ([]byte, bool) {
	if path, ok := r.cache.Get(id); ok {
		return path, true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	path, ok := r.walked[id]
	if !ok {
		now := r.now()
		if !r.lastWalk.IsZero() && now.Sub(r.lastWalk) < cgroupWalkInterval {
			return nil, false
		}
		r.lastWalk = now
		walked, err := walkCgroups(r.mount, r.prefix)
		if err != nil {
			return nil, false
		}
		r.walked = walked
		if path, ok = walked[id]; !ok {
			return nil, false
		}
	}
	r.cache.Add(id, path)
	return path, true
}

// walkCgroups returns the paths of all directories under mount, keyed by
// inode number, with prefix prepended. Directories that vanish during the
// walk are skipped.
func walkCgroups(mount, prefix string) (map[uint64][]byte, error) {
	var st unix.Stat_t
	if err := unix.Stat(mount, &st); err != nil {
		return nil, &os.PathError{Op: "stat", Path: mount, Err: err}
	}
	rootPath := prefix
	if rootPath == "" {
		rootPath = "/"
	}
	paths := map[uint64][]byte{st.Ino: []byte(rootPath)}
	buf := make([]byte, 64<<10)
	// pending holds paths relative to mount: "" is mount itself, otherwise
	// they start with "/".
	pending := []string{""}
	for len(pending) > 0 {
		rel := pending[len(pending)-1]
		pending = pending[:len(pending)-1]
		err := readSubdirs(mount+rel, buf, func(ino uint64, name []byte) {
			child := rel + "/" + string(name)
			paths[ino] = []byte(prefix + child)
			pending = append(pending, child)
		})
		if err != nil && rel == "" {
			return nil, err
		}
	}
	return paths, nil
}

// readSubdirs calls fn for each subdirectory of dir, with its inode number,
// straight from getdents64: no stat per entry.
func readSubdirs(dir string, buf []byte, fn func(ino uint64, name []byte)) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(fd)
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
			typ := buf[off+18]
			name := buf[off+19 : off+reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			off += reclen
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
			fn(ino, name)
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

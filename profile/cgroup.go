// SPDX-License-Identifier: Apache-2.0

package profile

import (
	"cmp"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// CgroupRoot is where the cgroup v2 hierarchy is mounted.
const CgroupRoot = "/sys/fs/cgroup"

// CgroupID returns the id of a cgroup v2 given as a number (the id
// itself, as profiles record it) or as a path in the hierarchy
// ("/system.slice/ssh.service", relative to CgroupRoot): the inode of its
// directory, which bpf_get_current_cgroup_id returns. The error names the
// value.
func CgroupID(s string) (uint64, error) {
	if id, err := strconv.ParseUint(s, 10, 64); err == nil {
		return id, nil
	}
	if !strings.HasPrefix(s, "/") || path.Clean(s) != s || strings.Contains(s, "/../") {
		return 0, fmt.Errorf("cgroup %q: give an id or a clean absolute path in the cgroup v2 hierarchy", s)
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(CgroupRoot, &fs); err != nil || fs.Type != unix.CGROUP2_SUPER_MAGIC {
		return 0, fmt.Errorf("cgroup %q: no cgroup v2 hierarchy at %s", s, CgroupRoot)
	}
	var st unix.Stat_t
	if err := unix.Stat(CgroupRoot+s, &st); err != nil {
		return 0, fmt.Errorf("cgroup %q: %w", s, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return 0, fmt.Errorf("cgroup %q: not a cgroup directory", s)
	}
	return st.Ino, nil
}

// Bounds of CgroupPaths' walk of the hierarchy.
const (
	maxCgroupDepth = 32
	maxCgroupDirs  = 100_000
)

// CgroupPaths returns the paths (relative to CgroupRoot, "/" for the
// root) of the cgroup v2 ids given, by walking the hierarchy until each is
// found, at most maxCgroupDirs directories maxCgroupDepth deep. Ids not
// found (a cgroup removed since) are left out.
func CgroupPaths(ids []uint64) map[uint64]string {
	want := map[uint64]bool{}
	for _, id := range ids {
		want[id] = true
	}
	out := map[uint64]string{}
	dirs := 0
	var walk func(dir, rel string, depth int)
	walk = func(dir, rel string, depth int) {
		if len(out) == len(want) || dirs >= maxCgroupDirs {
			return
		}
		dirs++
		var st unix.Stat_t
		if unix.Lstat(dir, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return
		}
		if want[st.Ino] {
			out[st.Ino] = cmp.Or(rel, "/")
		}
		if depth >= maxCgroupDepth {
			return
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			return
		}
		for _, e := range entries {
			if e.IsDir() {
				walk(dir+"/"+e.Name(), rel+"/"+e.Name(), depth+1)
			}
		}
	}
	var fs unix.Statfs_t
	if unix.Statfs(CgroupRoot, &fs) == nil && fs.Type == unix.CGROUP2_SUPER_MAGIC && len(want) > 0 {
		walk(CgroupRoot, "", 0)
	}
	return out
}

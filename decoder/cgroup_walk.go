// SPDX-License-Identifier: Apache-2.0

package decoder

import (
	"fmt"

	"github.com/kernel-exporter/kernel_exporter/bounded"
)

// Cgroup2Mount returns where the cgroup v2 hierarchy is mounted and the
// path of the mount's root within the hierarchy ("" for "/", and for a root
// outside the cgroup namespace, "/../..", see the cgroup decoder), read from
// <procRoot>/self/mountinfo (at most 16 MiB, through package bounded), as
// the cgroup decoder finds them. Errors: the file's, or one saying that no
// cgroup2 file system is mounted.
func Cgroup2Mount(procRoot string) (mount, prefix string, err error) {
	e := &Env{ProcRoot: procRoot}
	file := e.procPath("self", "mountinfo")
	data, err := bounded.ReadFile(file, "mount table", maxMountinfo)
	if err != nil {
		return "", "", err
	}
	mount, root, ok := findCgroup2(data)
	if !ok {
		return "", "", fmt.Errorf("no cgroup2 file system in %s", file)
	}
	return mount, cgroupRoot(root), nil
}

// WalkCgroups visits the cgroup v2 directory at mount and those under it,
// depth first, at most maxDepth levels down and maxDirs directories in all,
// with the cgroup decoder's walk (getdents, no stat per entry, no symlinks
// followed, vanished directories skipped). visit gets each cgroup's id (its
// directory's inode number, the kernel's cgroup_id() since Linux 5.5) and
// its path as the cgroup decoder prints it (prefix, then the path below
// mount; "/" for the root), valid only during the call; it returns false to
// stop. complete says the whole hierarchy was visited (not cut short by
// maxDirs or visit). The error is that of opening or reading mount itself.
func WalkCgroups(mount, prefix string, maxDepth, maxDirs int, visit func(id uint64, path []byte) bool) (complete bool, err error) {
	_, complete, err = walkCgroups(mount, prefix, maxDepth, maxDirs, nil, visit)
	return complete, err
}

// SPDX-License-Identifier: Apache-2.0

// Package proctest reads, for tests, what procfs says about a process:
// its children and what its file descriptors point to.
package proctest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Children returns the pids of pid's children (of every thread), from
// /proc/<pid>/task/*/children; none when pid is gone.
func Children(pid int) []int {
	var out []int
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread ended
		}
		for _, s := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(s); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// FDs returns what each open descriptor of pid points to (the target of
// /proc/<pid>/fd/<n>: a path, "socket:[inode]", "anon_inode:[eventpoll]"),
// by number. A descriptor closed while it is read is left out.
func FDs(pid int) (map[int]string, error) {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[int]string{}
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if target, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil {
			out[n] = target
		}
	}
	return out, nil
}

// SPDX-License-Identifier: Apache-2.0

// Package procmaps parses /proc/<pid>/maps: the mappings of a process's
// address space, one a line.
package procmaps

import (
	"bufio"
	"bytes"
	"strconv"
)

// Mapping is one line of /proc/<pid>/maps:
//
//	start-end perms offset dev inode path
//
// Start and End are the mapping's addresses, Perms its four permission
// letters ("r-xp"), Offset its offset in the file, Path the file (or
// "[stack]", or "" for an anonymous mapping; it runs to the end of the
// line and may hold spaces).
type Mapping struct {
	Start, End, Offset uint64
	Perms              string
	Path               string
}

// Exec says the mapping is executable, Writable that it is writable.
func (m Mapping) Exec() bool     { return len(m.Perms) > 2 && m.Perms[2] == 'x' }
func (m Mapping) Writable() bool { return len(m.Perms) > 1 && m.Perms[1] == 'w' }

// Parse returns the well-formed lines of a maps file; others are skipped.
func Parse(data []byte) []Mapping {
	var out []Mapping
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) < 5 {
			continue
		}
		lo, hi, ok := bytes.Cut(f[0], []byte("-"))
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(string(lo), 16, 64)
		end, err2 := strconv.ParseUint(string(hi), 16, 64)
		off, err3 := strconv.ParseUint(string(f[2]), 16, 64)
		if err1 != nil || err2 != nil || err3 != nil || end < start {
			continue
		}
		m := Mapping{Start: start, End: end, Offset: off, Perms: string(f[1])}
		if len(f) > 5 {
			m.Path = string(bytes.Join(f[5:], []byte(" ")))
		}
		out = append(out, m)
	}
	return out
}

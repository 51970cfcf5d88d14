// SPDX-License-Identifier: Apache-2.0

package symbolize

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"

	"golang.org/x/sys/unix"
)

// Mapping is one executable mapping of /proc/<pid>/maps:
//
//	55ab298f0000-55ab298f6000 r-xp 00002000 fe:00 247278   /usr/bin/head
//
// Start and End are the mapping's addresses in the process, Offset the
// file offset of Start, Dev (unix.Mkdev(major, minor)) and Inode the
// file's, Path the file's path as the process sees it (in its mount
// namespace), or a pseudo-path ("[vdso]", "[anon:name]", "" for an
// anonymous mapping). Deleted is set for a path the kernel marked
// " (deleted)" (removed, or replaced since it was mapped); Path is then
// without that mark.
type Mapping struct {
	Start, End, Offset uint64
	Dev, Inode         uint64
	Path               string
	Deleted            bool
}

// Bounds of ParseMaps.
const (
	// MaxMaps bounds the executable mappings kept from one maps file (a
	// process has tens to a few thousands).
	MaxMaps = 1 << 16
	// maxPath bounds a mapping's path (PATH_MAX).
	maxPath = 4096
)

var errTooManyMaps = errors.New("too many executable mappings")

// ParseMaps parses the content of /proc/<pid>/maps and returns its
// executable mappings (permissions with x), in file order (ascending
// addresses). Malformed lines are skipped; more than MaxMaps executable
// mappings is an error.
func ParseMaps(data []byte) ([]Mapping, error) {
	var out []Mapping
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		m, ok := parseMapsLine(line)
		if !ok {
			continue
		}
		if len(out) == MaxMaps {
			return nil, errTooManyMaps
		}
		out = append(out, m)
	}
	return out, nil
}

// parseMapsLine parses one line; false for a malformed or non-executable
// one.
func parseMapsLine(line []byte) (Mapping, bool) {
	var m Mapping
	field := func() []byte {
		line = bytes.TrimLeft(line, " ")
		i := bytes.IndexByte(line, ' ')
		if i < 0 {
			f := line
			line = nil
			return f
		}
		f := line[:i]
		line = line[i+1:]
		return f
	}
	addrs, perms, off, dev, inode := field(), field(), field(), field(), field()
	lo, hi, ok := bytes.Cut(addrs, []byte{'-'})
	if !ok || len(perms) != 4 || perms[2] != 'x' {
		return m, false
	}
	var err error
	if m.Start, err = strconv.ParseUint(string(lo), 16, 64); err != nil {
		return m, false
	}
	if m.End, err = strconv.ParseUint(string(hi), 16, 64); err != nil || m.End <= m.Start {
		return m, false
	}
	if m.Offset, err = strconv.ParseUint(string(off), 16, 64); err != nil {
		return m, false
	}
	maj, min, ok := bytes.Cut(dev, []byte{':'})
	if !ok {
		return m, false
	}
	ma, err1 := strconv.ParseUint(string(maj), 16, 32)
	mi, err2 := strconv.ParseUint(string(min), 16, 32)
	if err1 != nil || err2 != nil {
		return m, false
	}
	m.Dev = unix.Mkdev(uint32(ma), uint32(mi))
	if m.Inode, err = strconv.ParseUint(string(inode), 10, 64); err != nil {
		return m, false
	}
	path := bytes.TrimLeft(line, " ")
	if p, ok := bytes.CutSuffix(path, []byte(" (deleted)")); ok {
		path, m.Deleted = p, true
	}
	if len(path) > maxPath {
		return m, false
	}
	m.Path = string(path)
	return m, true
}

// find returns the index of the mapping of maps (sorted by Start, not
// overlapping) that holds addr.
func find(maps []Mapping, addr uint64) (int, bool) {
	lo, hi := 0, len(maps)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if maps[mid].End <= addr {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo < len(maps) && maps[lo].Start <= addr && addr < maps[lo].End {
		return lo, true
	}
	return -1, false
}

// File reports whether the mapping is of a file (not anonymous memory or a
// pseudo-path such as [vdso]).
func (m *Mapping) File() bool {
	return m.Inode != 0 && len(m.Path) > 0 && m.Path[0] == '/'
}

func (m *Mapping) String() string {
	return fmt.Sprintf("%x-%x %x %s", m.Start, m.End, m.Offset, m.Path)
}

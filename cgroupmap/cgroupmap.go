// SPDX-License-Identifier: Apache-2.0

// Package cgroupmap fills a config's cgroup_id_map: a BPF hash map whose
// keys are the ids of the cgroups (v2) whose path matches the config's
// regexps, so that a BPF program can count only those cgroups (an allow
// list: runqlat_cgroup looks the woken task's cgroup up in it); or, with
// type cgrp_storage, a BPF_MAP_TYPE_CGRP_STORAGE (Linux 6.2) in which those
// cgroups have the u64 value 1 (a program reads it with
// bpf_cgrp_storage_get on the task's cgroup; cgroups it creates storage for
// with BPF_LOCAL_STORAGE_GET_F_CREATE read 0).
//
// A cgrp_storage map is written through an fd of the cgroup's directory
// (opened O_RDONLY|O_DIRECTORY, checked by fstat to be the cgroup the walk
// saw, and closed at once); the kernel frees a cgroup's entry when the
// cgroup is removed. Such a map cannot be listed from userspace, so the
// Filler remembers the cgroups it set.
//
// The model: the map's keys (the cgroups with value 1) should equal the set
// of matching cgroups that exist. A Filler walks the cgroup2 hierarchy once at Start (synchronously,
// so the map is filled before the config is served) and then every
// Interval (10 s by default) in its own goroutine, one per config. Each walk
// inserts the ids of matching cgroups that are missing and deletes the keys
// of cgroups that are gone or no longer match (a renamed cgroup; for
// cgrp_storage those of removed cgroups are gone already); a cgroup created after start
// is thus in the map within one interval. A cgroup id is never reused while
// the kernel runs (64-bit kernfs ids), so a stale key never names another
// cgroup.
//
// Bounds: a walk visits at most MaxDirs directories (20,000), MaxDepth
// levels deep (32), with the cgroup decoder's walk; a hash map holds at most
// its max_entries ids (a cgrp_storage map has no such bound: at most MaxDirs) (the first found in walk order win; the rest are
// counted as Dropped and logged). A walk cut short by MaxDirs inserts what it
// found but deletes nothing. Errors (an unreadable hierarchy, a failed map
// update) are logged and retried at the next interval, never fatal.
package cgroupmap

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/config"
	"github.com/kernel-exporter/kernel_exporter/decoder"
)

// Defaults of Options.
const (
	DefaultInterval = 10 * time.Second
	DefaultMaxDirs  = 20000
	DefaultMaxDepth = 32
)

// Options configure a Filler. Zero values take the defaults.
type Options struct {
	// Interval is the time between two walks (DefaultInterval).
	Interval time.Duration
	// MaxDirs and MaxDepth bound one walk (DefaultMaxDirs, DefaultMaxDepth).
	MaxDirs, MaxDepth int
	// ProcRoot is where /proc is ("/proc"), for the cgroup2 mount; Mount,
	// when set, is the cgroup2 mount to walk instead (Prefix: the mount
	// root's path in the hierarchy, "" for "/"), for tests.
	ProcRoot      string
	Mount, Prefix string
	// Config names the config in log lines.
	Config string
	Logger *slog.Logger
}

// Map is the part of *ebpf.Map a Filler uses.
type Map interface {
	Put(key, value any) error
	Delete(key any) error
	MaxEntries() uint32
	ValueSize() uint32
}

// Filler keeps one cgroup_id_map current.
type Filler struct {
	spec  *config.CgroupIDMap
	m     Map
	opts  Options
	log   *slog.Logger
	value []byte // hash: the map's value, see hashValue
	full  []byte // match's buffer

	mu       sync.Mutex
	keys     map[uint64]struct{} // ids in the map
	dropped  uint64              // matching cgroups not inserted: map full
	lastOver uint64              // those of the last refresh, for the log
	walks    uint64
	stop     context.CancelFunc
	done     chan struct{}
}

// Stats are a Filler's counts: ids in the map, matching cgroups left out
// because the map was full (cumulative), and walks done.
type Stats struct {
	Entries int
	Dropped uint64
	Walks   uint64
}

// Start checks m against spec (see Check), fills it from one walk, and
// starts the goroutine that refreshes it every Interval until Stop. Errors:
// the map's shape, the cgroup2 mount not found, or the first walk failing;
// Start then leaves nothing running.
func Start(spec *config.CgroupIDMap, m *ebpf.Map, opts Options) (*Filler, error) {
	if err := Check(spec, m); err != nil {
		return nil, err
	}
	if spec.Type == config.CgroupIDMapCgrpStorage {
		// Not iterable from userspace, and empty in a fresh object.
		return start(spec, m, nil, opts)
	}
	// Keys already in the map (none in a fresh object) are ours to prune.
	var existing []uint64
	var k uint64
	var v []byte
	it := m.Iterate()
	for len(existing) < int(m.MaxEntries()) && it.Next(&k, &v) {
		existing = append(existing, k)
	}
	return start(spec, m, existing, opts)
}

// Check returns an error naming the map when m is not what the
// cgroup_id_map's type needs: for hash a BPF_MAP_TYPE_HASH or LRU_HASH (as
// ebpf_exporter's example has; the Filler inserts at most max_entries keys,
// so the kernel never evicts one of them for another of them) with an
// 8-byte key, for cgrp_storage a BPF_MAP_TYPE_CGRP_STORAGE with a 4-byte key (a
// cgroup fd) and an 8-byte value (u64).
func Check(spec *config.CgroupIDMap, m *ebpf.Map) error {
	if m == nil {
		return fmt.Errorf("cgroup_id_map: map %s not found in the object", spec.Name)
	}
	if spec.Type == config.CgroupIDMapCgrpStorage {
		switch {
		case m.Type() != ebpf.CgroupStorage:
			return fmt.Errorf("cgroup_id_map: map %s is a %v, want a BPF_MAP_TYPE_CGRP_STORAGE (type: cgrp_storage)", spec.Name, m.Type())
		case m.KeySize() != 4:
			return fmt.Errorf("cgroup_id_map: map %s has a %d-byte key, want 4 (a cgroup fd)", spec.Name, m.KeySize())
		case m.ValueSize() != 8:
			return fmt.Errorf("cgroup_id_map: map %s has a %d-byte value, want 8 (a u64)", spec.Name, m.ValueSize())
		}
		return nil
	}
	if m.Type() != ebpf.Hash && m.Type() != ebpf.LRUHash {
		return fmt.Errorf("cgroup_id_map: map %s is a %v, want a hash or LRU hash (type: hash)", spec.Name, m.Type())
	}
	if m.KeySize() != 8 {
		return fmt.Errorf("cgroup_id_map: map %s has a %d-byte key, want 8 (a u64 cgroup id)", spec.Name, m.KeySize())
	}
	return nil
}

// start is Start for any Map, whose keys are existing.
func start(spec *config.CgroupIDMap, m Map, existing []uint64, opts Options) (*Filler, error) {
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.MaxDirs <= 0 {
		opts.MaxDirs = DefaultMaxDirs
	}
	if opts.MaxDepth <= 0 {
		opts.MaxDepth = DefaultMaxDepth
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Mount == "" {
		mount, prefix, err := decoder.Cgroup2Mount(opts.ProcRoot)
		if err != nil {
			return nil, fmt.Errorf("cgroup_id_map %s: %w", spec.Name, err)
		}
		opts.Mount, opts.Prefix = mount, prefix
	}
	f := &Filler{
		spec:  spec,
		m:     m,
		opts:  opts,
		log:   opts.Logger.With("config", opts.Config, "map", spec.Name),
		value: hashValue(m.ValueSize()),
		keys:  map[uint64]struct{}{},
		done:  make(chan struct{}),
	}
	for _, k := range existing {
		f.keys[k] = struct{}{}
	}
	if err := f.Refresh(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.stop = cancel
	go f.loop(ctx)
	return f, nil
}

// hashValue is the value written for each key of a hash map: 1 in host
// byte order when the value is 1, 2, 4 or 8 bytes wide (ebpf_exporter
// writes a u64 1), zeros otherwise.
func hashValue(size uint32) []byte {
	v := make([]byte, size)
	switch size {
	case 1:
		v[0] = 1
	case 2:
		binary.NativeEndian.PutUint16(v, 1)
	case 4:
		binary.NativeEndian.PutUint32(v, 1)
	case 8:
		binary.NativeEndian.PutUint64(v, 1)
	}
	return v
}

// Stop ends the refresh goroutine and waits for it. The map keeps its
// keys. Safe to call more than once.
func (f *Filler) Stop() {
	f.stop()
	<-f.done
}

// Stats returns the Filler's counts.
func (f *Filler) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return Stats{Entries: len(f.keys), Dropped: f.dropped, Walks: f.walks}
}

func (f *Filler) loop(ctx context.Context) {
	defer close(f.done)
	t := time.NewTicker(f.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := f.Refresh(); err != nil {
				f.log.Warn("cgroup_id_map refresh failed; retrying at the next interval", "err", err, "interval", f.opts.Interval)
			}
		}
	}
}

// Refresh walks the hierarchy once and brings the map in line with it (see
// the package doc). Errors: the walk's (nothing changed then), or the
// first failed map update (the others are still tried).
func (f *Filler) Refresh() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.walks++
	storage := f.spec.Type == config.CgroupIDMapCgrpStorage
	want := map[uint64]struct{}{}
	// For cgrp_storage, paths of the cgroups to write: matching ones not
	// set yet, and set ones that no longer match.
	paths := map[uint64]string{}
	limit := int(f.m.MaxEntries())
	if storage {
		limit = f.opts.MaxDirs
	}
	var over uint64
	complete, err := decoder.WalkCgroups(f.opts.Mount, f.opts.Prefix, f.opts.MaxDepth, f.opts.MaxDirs, func(id uint64, path []byte) bool {
		_, set := f.keys[id]
		if !f.match(path) {
			if storage && set {
				paths[id] = string(path)
			}
			return true
		}
		if _, ok := want[id]; !ok {
			if len(want) >= limit {
				over++
				return true
			}
			want[id] = struct{}{}
			if storage && !set {
				paths[id] = string(path)
			}
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("cgroup_id_map %s: walk: %w", f.spec.Name, err)
	}
	var errs []error
	if complete {
		for id := range f.keys {
			if _, ok := want[id]; ok {
				continue
			}
			if err := f.remove(id, paths); err != nil {
				errs = append(errs, fmt.Errorf("delete cgroup %d: %w", id, err))
				continue
			}
			delete(f.keys, id)
		}
	} else {
		f.log.Warn("cgroup_id_map walk cut short: more cgroups than the bound; nothing pruned", "max_dirs", f.opts.MaxDirs)
	}
	for id := range want {
		if _, ok := f.keys[id]; ok {
			continue
		}
		if len(f.keys) >= limit {
			over++
			continue
		}
		if err := f.insert(id, paths); err != nil {
			if errors.Is(err, errGone) {
				continue // removed or replaced since the walk: the next walk sees it
			}
			errs = append(errs, fmt.Errorf("insert cgroup %d: %w", id, err))
			continue
		}
		f.keys[id] = struct{}{}
	}
	if over > 0 {
		f.dropped += over
		if over != f.lastOver { // once per change, not every interval
			f.log.Warn("cgroup_id_map full: matching cgroups left out", "left_out", over, "max_entries", limit)
		}
	}
	f.lastOver = over
	f.log.Debug("cgroup_id_map refreshed", "entries", len(f.keys), "matching", len(want), "complete", complete)
	if len(errs) > 0 {
		return fmt.Errorf("cgroup_id_map %s: %d update(s) failed, first: %w", f.spec.Name, len(errs), errs[0])
	}
	return nil
}

// errGone is insert's error for a cgroup removed (or replaced by another
// of the same path) between the walk and the update.
var errGone = errors.New("cgroup gone")

// insert puts cgroup id in the map: for hash, the key id; for cgrp_storage,
// the value 1 through an fd of its directory (paths[id], as the walk
// printed it).
func (f *Filler) insert(id uint64, paths map[uint64]string) error {
	if f.spec.Type != config.CgroupIDMapCgrpStorage {
		return f.m.Put(id, f.value)
	}
	return f.withCgroupFD(id, paths[id], func(fd uint32) error {
		return f.m.Put(fd, uint64(1))
	})
}

// remove deletes cgroup id from the map. For cgrp_storage, a cgroup the
// walk did not see (not in paths) is gone, and the kernel freed its
// entry with it; one it saw no longer matches (renamed), and its entry is
// deleted through an fd of its directory.
func (f *Filler) remove(id uint64, paths map[uint64]string) error {
	var err error
	if f.spec.Type != config.CgroupIDMapCgrpStorage {
		err = f.m.Delete(id)
	} else if path, ok := paths[id]; ok {
		err = f.withCgroupFD(id, path, func(fd uint32) error { return f.m.Delete(fd) })
	}
	if errors.Is(err, ebpf.ErrKeyNotExist) || errors.Is(err, errGone) {
		return nil
	}
	return err
}

// withCgroupFD calls fn with an fd of the directory of the cgroup at path
// (a walk's path: prefix, then the path below the mount), after checking
// that it is still cgroup id (its inode number); errGone otherwise.
func (f *Filler) withCgroupFD(id uint64, path string, fn func(fd uint32) error) error {
	rel, ok := strings.CutPrefix(path, f.opts.Prefix)
	if !ok {
		return fmt.Errorf("path outside the mount's root")
	}
	dir := strings.TrimSuffix(f.opts.Mount, "/") + "/" + strings.TrimPrefix(rel, "/")
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if errors.Is(err, unix.ENOENT) {
		return errGone
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("stat %s: %w", dir, err)
	}
	if st.Ino != id {
		return errGone
	}
	return fn(uint32(fd))
}

// match reports whether a regexp matches the cgroup's path as the cgroup
// decoder prints it (relative to the hierarchy's root) or its full path
// under the mount point, which ebpf_exporter's regexps match
// ("/sys/fs/cgroup/system.slice/cron.service"; the mount point itself for
// the root), so that a pattern written for either selects the cgroup.
func (f *Filler) match(path []byte) bool {
	below := bytes.TrimPrefix(path, []byte(f.opts.Prefix))
	if len(below) == 1 && below[0] == '/' {
		below = nil
	}
	f.full = append(append(f.full[:0], strings.TrimSuffix(f.opts.Mount, "/")...), below...)
	for _, re := range f.spec.Regexps {
		if re.Match(path) || re.Match(f.full) {
			return true
		}
	}
	return false
}

// Package cgroupmap fills a config's cgroup_id_map: a BPF hash map whose
// keys are the ids of the cgroups (v2) whose path matches the config's
// regexps, so that a BPF program can count only those cgroups (an allow
// list: runqlat_cgroup looks the woken task's cgroup up in it).
//
// The map may be a HASH or an LRU_HASH; each key's value is 1.
//
// The model: the map's keys should equal the set of matching cgroups that
// exist. A Filler walks the cgroup2 hierarchy once at Start (synchronously,
// so the map is filled before the config is served) and then every
// Interval (10 s by default) in its own goroutine, one per config. Each walk
// inserts the ids of matching cgroups that are missing and deletes the keys
// of cgroups that are gone or no longer match; a cgroup created after start
// is thus in the map within one interval. A cgroup id is never reused while
// the kernel runs (64-bit kernfs ids), so a stale key never names another
// cgroup.
//
// Bounds: a walk visits at most MaxDirs directories (20,000), MaxDepth
// levels deep (32), with the cgroup decoder's walk; the map holds at most
// its max_entries ids (the first found in walk order win; the rest are
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
	value []byte // the map's value size: 1 (see oneValue)
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

// Start checks m against spec (a HASH with 8-byte keys, see Check), fills
// it from one walk, and starts the goroutine that refreshes it every
// Interval until Stop. Errors: the map's shape, the cgroup2 mount not
// found, or the first walk failing; Start then leaves nothing running.
func Start(spec *config.CgroupIDMap, m *ebpf.Map, opts Options) (*Filler, error) {
	if err := Check(spec, m); err != nil {
		return nil, err
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

// Check returns an error naming the map when m is not what a cgroup_id_map
// of type hash needs: a BPF_MAP_TYPE_HASH or BPF_MAP_TYPE_LRU_HASH (as
// ebpf_exporter's cgroup_id_map example declares it) with an 8-byte key.
func Check(spec *config.CgroupIDMap, m *ebpf.Map) error {
	if m == nil {
		return fmt.Errorf("cgroup_id_map: map %s not found in the object", spec.Name)
	}
	if t := m.Type(); t != ebpf.Hash && t != ebpf.LRUHash {
		return fmt.Errorf("cgroup_id_map: map %s is a %v, want a hash or an LRU hash (type: hash)", spec.Name, t)
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
		value: oneValue(m.ValueSize()),
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
	want := map[uint64]struct{}{}
	limit := int(f.m.MaxEntries())
	var over uint64
	complete, err := decoder.WalkCgroups(f.opts.Mount, f.opts.Prefix, f.opts.MaxDepth, f.opts.MaxDirs, func(id uint64, path []byte) bool {
		if !f.match(path) {
			return true
		}
		if _, ok := want[id]; !ok {
			if len(want) >= limit {
				over++
				return true
			}
			want[id] = struct{}{}
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
			if err := f.m.Delete(id); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
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
		if err := f.m.Put(id, f.value); err != nil {
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

// oneValue is the value written for each cgroup: the integer 1 in native
// byte order when the value is 1, 2, 4 or 8 bytes wide (ebpf_exporter
// writes a u64 1, and a program may read the value), else zeros.
func oneValue(size uint32) []byte {
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

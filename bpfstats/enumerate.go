// SPDX-License-Identifier: Apache-2.0

package bpfstats

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// Limits bound what an Enumerator lists; zero fields take the package
// bounds (MaxPrograms...), larger ones are lowered to them.
type Limits struct {
	Programs, Maps, Links, Holders int
}

func (l Limits) or() Limits {
	pick := func(v, max int) int {
		if v <= 0 || v > max {
			return max
		}
		return v
	}
	return Limits{pick(l.Programs, MaxPrograms), pick(l.Maps, MaxMaps), pick(l.Links, MaxLinks), pick(l.Holders, MaxHolders)}
}

// Enumerator lists the host's BPF objects in the calling process, which
// needs CAP_SYS_ADMIN (BPF_*_GET_FD_BY_ID; kernel/bpf/syscall.c) and, for
// the holders, CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN) to load the
// holders iterator. For each object it takes a file descriptor by id,
// reads its info (one BPF_OBJ_GET_INFO_BY_FD; a map's memlock from its
// fdinfo; a link's target with one or two more) and closes it: three to six
// system calls per object. Programs are read at every listing (their
// statistics move); a preallocated map once, and a link once a minute
// (their info does not change): later listings step over their ids. It is safe for concurrent use (calls are
// serialized). Close it to unload the iterator.
type Enumerator struct {
	limits Limits

	mu        sync.Mutex
	iter      *holdersIter
	iterErr   error
	iterTried bool
	// counter counts hash maps' entries (nil when it did not load: a
	// kernel before 6.6).
	counter      *holdersIter
	counterTried bool
	fdinfo       []byte
	// knownMaps holds the maps of the last listing whose memory is fixed
	// at creation (preallocated), by id: a map's info never changes and
	// ids are never reused, so each is opened once. Maps that allocate as
	// they go are opened at every listing for their memlock.
	knownMaps map[uint32]Map
	// knownLinks holds the links of the last listing, by id, read again
	// every linkRefresh (a link's program can be replaced).
	knownLinks  map[uint32]Link
	linksReadAt time.Time
}

// linkRefresh is how often every link's info is read again.
const linkRefresh = time.Minute

// NewEnumerator returns an Enumerator within limits.
func NewEnumerator(limits Limits) *Enumerator {
	return &Enumerator{limits: limits.or(), fdinfo: make([]byte, 4096)}
}

// Close unloads the holders iterator, if it was loaded.
func (e *Enumerator) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, it := range []**holdersIter{&e.iter, &e.counter} {
		if *it != nil {
			(*it).close()
			*it = nil
		}
	}
	return nil
}

// List lists every program, map and link, and their holders. An error is
// returned when the first program cannot be opened (EPERM without
// CAP_SYS_ADMIN) or ctx ends; one object that goes away meanwhile is
// skipped.
func (e *Enumerator) List(ctx context.Context) (*Listing, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	l := &Listing{}
	var err error
	if l.Programs, l.More[0], err = e.programs(ctx); err != nil {
		return nil, err
	}
	if l.Maps, l.More[1], err = e.maps(ctx); err != nil {
		return nil, err
	}
	if l.Links, l.More[2], err = e.links(ctx); err != nil {
		return nil, err
	}
	e.countEntries(l.Maps)
	if !e.iterTried {
		e.iterTried = true
		e.iter, e.iterErr = loadHoldersIter()
	}
	if e.iterErr != nil {
		l.HoldersErr = cut("holders iterator: "+e.iterErr.Error(), MaxNote)
	} else if l.Holders, l.More[3], err = e.iter.read(e.limits.Holders); err != nil {
		l.HoldersErr = cut("holders iterator: "+err.Error(), MaxNote)
	}
	return l, nil
}

// Commands of bpf(2) (include/uapi/linux/bpf.h).
const (
	cmdProgGetNextID = unix.BPF_PROG_GET_NEXT_ID
	cmdMapGetNextID  = unix.BPF_MAP_GET_NEXT_ID
	cmdProgGetFD     = unix.BPF_PROG_GET_FD_BY_ID
	cmdMapGetFD      = unix.BPF_MAP_GET_FD_BY_ID
	cmdObjInfo       = unix.BPF_OBJ_GET_INFO_BY_FD
	cmdLinkGetNextID = unix.BPF_LINK_GET_NEXT_ID
)

// idAttr is the attribute of BPF_*_GET_NEXT_ID and BPF_*_GET_FD_BY_ID.
type idAttr struct {
	ID, Next, OpenFlags uint32
}

// infoAttr is the attribute of BPF_OBJ_GET_INFO_BY_FD.
type infoAttr struct {
	FD, Len uint32
	Info    uint64
}

func bpf(cmd int, attr unsafe.Pointer, size uintptr) (uintptr, error) {
	r, _, errno := unix.Syscall(unix.SYS_BPF, uintptr(cmd), uintptr(attr), size)
	if errno != 0 {
		return 0, errno
	}
	return r, nil
}

// nextID returns the id after id of the objects of cmd; ok is false at the
// end.
func nextID(cmd int, id uint32) (uint32, bool, error) {
	a := idAttr{ID: id}
	if _, err := bpf(cmd, unsafe.Pointer(&a), unsafe.Sizeof(a)); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return 0, false, nil
		}
		return 0, false, err
	}
	return a.Next, true, nil
}

// fdByID opens object id of cmd, read-only for maps.
func fdByID(cmd int, id uint32) (int, error) {
	a := idAttr{ID: id}
	if cmd == cmdMapGetFD {
		a.OpenFlags = unix.BPF_F_RDONLY
	}
	fd, err := bpf(cmd, unsafe.Pointer(&a), unsafe.Sizeof(a))
	return int(fd), err
}

func objInfo(fd int, info unsafe.Pointer, size uintptr) error {
	a := infoAttr{FD: uint32(fd), Len: uint32(size), Info: uint64(uintptr(info))}
	_, err := bpf(cmdObjInfo, unsafe.Pointer(&a), unsafe.Sizeof(a))
	return err
}

// progInfo is struct bpf_prog_info up to attach_btf_id (5.16+; older
// kernels fill a prefix and leave the rest zero).
type progInfo struct {
	Type, ID                     uint32
	Tag                          [8]byte
	JitedProgLen, XlatedProgLen  uint32
	JitedProgInsns, XlatedInsns  uint64
	LoadTime                     uint64
	CreatedByUID, NrMapIDs       uint32
	MapIDs                       uint64
	Name                         [16]byte
	Ifindex                      uint32
	GPLCompatible                uint32
	NetnsDev, NetnsIno           uint64
	NrJitedKsyms, NrJitedFuncLen uint32
	JitedKsyms, JitedFuncLens    uint64
	BTFID, FuncInfoRecSize       uint32
	FuncInfo                     uint64
	NrFuncInfo, NrLineInfo       uint32
	LineInfo, JitedLineInfo      uint64
	NrJitedLineInfo              uint32
	LineInfoRecSize              uint32
	JitedLineInfoRecSize         uint32
	NrProgTags                   uint32
	ProgTags                     uint64
	RunTimeNs, RunCnt            uint64
	RecursionMisses              uint64
	VerifiedInsns                uint32
	AttachBTFObjID, AttachBTFID  uint32
}

// mapInfo is struct bpf_map_info up to its name.
type mapInfo struct {
	Type, ID, KeySize, ValueSize, MaxEntries, MapFlags uint32
	Name                                               [16]byte
}

// eachID calls visit with every id of the objects of cmd
// (BPF_*_GET_NEXT_ID, what names it in errors) until limit of them are
// listed (visit says whether it listed one); the ids past limit are
// counted in more.
func eachID(ctx context.Context, cmd int, what string, limit int, visit func(id uint32) (bool, error)) (more uint32, err error) {
	n := 0
	for id := uint32(0); ; {
		next, ok, err := nextID(cmd, id)
		if errors.Is(err, unix.EPERM) {
			return 0, fmt.Errorf("%s: %w: listing the host's BPF objects by id needs CAP_SYS_ADMIN", what, err)
		}
		if err != nil {
			return 0, fmt.Errorf("%s: %w", what, err)
		}
		if !ok {
			return more, nil
		}
		id = next
		if n >= limit {
			more++
			continue
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		listed, err := visit(id)
		if err != nil {
			return 0, err
		}
		if listed {
			n++
		}
	}
}

// open takes object id of cmd by id; ok is false when it went away
// meanwhile.
func open(cmd int, what string, id uint32) (fd int, ok bool, err error) {
	fd, err = fdByID(cmd, id)
	if errors.Is(err, unix.ENOENT) {
		return -1, false, nil
	}
	if err != nil {
		return -1, false, fmt.Errorf("%s %d: %w", what, id, err)
	}
	return fd, true, nil
}

func (e *Enumerator) programs(ctx context.Context) ([]Program, uint32, error) {
	var out []Program
	var ids [MaxMapIDs]uint32
	more, err := eachID(ctx, cmdProgGetNextID, "BPF_PROG_GET_NEXT_ID", e.limits.Programs, func(id uint32) (bool, error) {
		fd, ok, err := open(cmdProgGetFD, "BPF_PROG_GET_FD_BY_ID", id)
		if !ok {
			return false, err
		}
		info := progInfo{NrMapIDs: MaxMapIDs, MapIDs: uint64(uintptr(unsafe.Pointer(&ids[0])))}
		err = objInfo(fd, unsafe.Pointer(&info), unsafe.Sizeof(info))
		runtime.KeepAlive(&ids)
		unix.Close(fd)
		if err != nil {
			return false, nil
		}
		p := Program{
			ID: info.ID, Type: info.Type, Tag: info.Tag, Name: cString(info.Name[:]),
			RunTimeNs: info.RunTimeNs, RunCount: info.RunCnt,
			VerifiedInsns: info.VerifiedInsns, JitedBytes: info.JitedProgLen,
			LoadTime: info.LoadTime, UID: info.CreatedByUID,
			AttachBTFObjID: info.AttachBTFObjID, AttachBTFID: info.AttachBTFID,
		}
		if n := min(int(info.NrMapIDs), MaxMapIDs); n > 0 {
			p.MapIDs = slices.Clone(ids[:n])
			slices.Sort(p.MapIDs)
		}
		if p.ID != id || !objName(p.Name) {
			return false, nil
		}
		out = append(out, p)
		return true, nil
	})
	return out, more, err
}

func (e *Enumerator) maps(ctx context.Context) ([]Map, uint32, error) {
	var out []Map
	known := make(map[uint32]Map, len(e.knownMaps))
	more, err := eachID(ctx, cmdMapGetNextID, "BPF_MAP_GET_NEXT_ID", e.limits.Maps, func(id uint32) (bool, error) {
		if m, ok := e.knownMaps[id]; ok {
			known[id] = m
			out = append(out, m)
			return true, nil
		}
		fd, ok, err := open(cmdMapGetFD, "BPF_MAP_GET_FD_BY_ID", id)
		if !ok {
			return false, err
		}
		var info mapInfo
		err = objInfo(fd, unsafe.Pointer(&info), unsafe.Sizeof(info))
		var memlock uint64
		if err == nil {
			memlock = e.memlock(fd)
		}
		unix.Close(fd)
		if err != nil {
			return false, nil
		}
		m := Map{ID: info.ID, Type: info.Type, KeySize: info.KeySize, ValueSize: info.ValueSize,
			MaxEntries: info.MaxEntries, Flags: info.MapFlags, Name: cString(info.Name[:]), Memlock: memlock}
		if m.ID != id || !objName(m.Name) {
			return false, nil
		}
		if !dynamicMemory(m) {
			known[id] = m
		}
		out = append(out, m)
		return true, nil
	})
	if err != nil {
		return nil, 0, err
	}
	e.knownMaps = known
	return out, more, nil
}

// countEntries sets the entries of the hash maps of maps from the kernel's
// counts (the map_entries iterator), -1 for the others and when the kernel
// does not count.
func (e *Enumerator) countEntries(maps []Map) {
	if !e.counterTried {
		e.counterTried = true
		e.counter, _ = loadEntriesIter()
	}
	var counts map[uint32]int64
	if e.counter != nil {
		counts, _ = e.counter.entries()
	}
	for i := range maps {
		maps[i].Entries = -1
		if n, ok := counts[maps[i].ID]; ok && countsEntries(maps[i].Type) && n >= 0 {
			maps[i].Entries = n
		}
	}
}

// countsEntries reports whether the kernel counts the entries of maps of
// type t (kernel/bpf/hashtab.c: every hash kind).
func countsEntries(t uint32) bool {
	switch MapType(t) {
	case "hash", "percpu_hash", "lru_hash", "lru_percpu_hash", "hash_of_maps":
		return true
	}
	return false
}

// dynamicMemory reports whether m allocates its entries as they come
// (BPF_F_NO_PREALLOC, an LPM trie), so that its memlock changes; the
// others' is fixed when they are created.
func dynamicMemory(m Map) bool {
	return m.Flags&unix.BPF_F_NO_PREALLOC != 0 || MapType(m.Type) == "lpm_trie"
}

// memlock returns the "memlock:" line of fd's fdinfo, 0 when it has none
// (or it cannot be read).
func (e *Enumerator) memlock(fd int) uint64 {
	f, err := unix.Open("/proc/self/fdinfo/"+strconv.Itoa(fd), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0
	}
	defer unix.Close(f)
	n, err := unix.Read(f, e.fdinfo)
	if err != nil || n <= 0 {
		return 0
	}
	return fdinfoField(e.fdinfo[:n], "memlock:")
}

// fdinfoField returns the decimal value of the line of b starting with
// key, 0 when there is none.
func fdinfoField(b []byte, key string) uint64 {
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		if v, ok := bytes.CutPrefix(line, []byte(key)); ok {
			n, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
			if err != nil {
				return 0
			}
			return n
		}
	}
	return 0
}

func (e *Enumerator) links(ctx context.Context) ([]Link, uint32, error) {
	var out []Link
	now := time.Now()
	reuse := now.Sub(e.linksReadAt) < linkRefresh
	if !reuse {
		e.linksReadAt = now
	}
	known := make(map[uint32]Link, len(e.knownLinks))
	more, err := eachID(ctx, cmdLinkGetNextID, "BPF_LINK_GET_NEXT_ID", e.limits.Links, func(id uint32) (bool, error) {
		k, ok := e.knownLinks[id]
		if !ok || !reuse {
			l, err := link.NewFromID(link.ID(id))
			if errors.Is(err, os.ErrNotExist) {
				return false, nil
			}
			if err != nil {
				return false, fmt.Errorf("BPF_LINK_GET_FD_BY_ID %d: %w", id, err)
			}
			// Some kinds answer no info (a legacy raw tracepoint): the
			// id alone.
			k = Link{ID: id}
			if info, err := l.Info(); err == nil {
				k = linkOf(id, info)
			}
			l.Close()
		}
		known[id] = k
		out = append(out, k)
		return true, nil
	})
	if err != nil {
		return nil, 0, err
	}
	e.knownLinks = known
	return out, more, nil
}

// linkOf turns cilium/ebpf's link info into a Link: its attach type where
// the kind says it, and its target.
func linkOf(id uint32, info *link.Info) Link {
	k := Link{ID: id, Type: uint32(info.Type), ProgID: uint32(info.Program)}
	attach := func(t uint32) { k.AttachType, k.HasAttach = t, true }
	switch {
	case info.Tracing() != nil:
		t := info.Tracing()
		attach(uint32(t.AttachType))
		k.Target = fmt.Sprintf("btf %d:%d", t.TargetObjectId, t.TargetBtfId)
	case info.Cgroup() != nil:
		attach(uint32(info.Cgroup().AttachType))
		k.Target = "cgroup " + strconv.FormatUint(info.Cgroup().CgroupId, 10)
	case info.NetNs() != nil:
		attach(uint32(info.NetNs().AttachType))
		k.Target = "netns " + strconv.FormatUint(uint64(info.NetNs().NetnsInode), 10)
	case info.XDP() != nil:
		attach(37) // BPF_XDP
		k.Target = "ifindex " + strconv.FormatUint(uint64(info.XDP().Ifindex), 10)
	case info.TCX() != nil:
		attach(uint32(info.TCX().AttachType))
		k.Target = "ifindex " + strconv.FormatUint(uint64(info.TCX().Ifindex), 10)
	case info.Netkit() != nil:
		attach(uint32(info.Netkit().AttachType))
		k.Target = "ifindex " + strconv.FormatUint(uint64(info.Netkit().Ifindex), 10)
	case info.Netfilter() != nil:
		nf := info.Netfilter()
		attach(45) // BPF_NETFILTER
		k.Target = fmt.Sprintf("pf %d hook %d priority %d", nf.ProtocolFamily, nf.Hook, nf.Priority)
	case info.RawTracepoint() != nil:
		attach(23) // BPF_TRACE_RAW_TP
		k.Target = info.RawTracepoint().Name
	case info.KprobeMulti() != nil:
		attach(42) // BPF_TRACE_KPROBE_MULTI
		k.Target = strconv.FormatUint(uint64(info.KprobeMulti().Count), 10) + " functions"
	case info.UprobeMulti() != nil:
		attach(48) // BPF_TRACE_UPROBE_MULTI
		k.Target = info.UprobeMulti().File
	case info.PerfEvent() != nil:
		attach(41) // BPF_PERF_EVENT
		pe := info.PerfEvent()
		switch {
		case pe.Tracepoint() != nil:
			k.Target = pe.Tracepoint().Tracepoint
		case pe.Kprobe() != nil:
			k.Target = pe.Kprobe().Function
			if off := pe.Kprobe().Offset; off != 0 {
				k.Target += "+" + strconv.FormatUint(uint64(off), 10)
			}
		case pe.Uprobe() != nil:
			k.Target = pe.Uprobe().File + ":" + strconv.FormatUint(uint64(pe.Uprobe().Offset), 10)
		case pe.Event() != nil:
			k.Target = fmt.Sprintf("perf event %d:%d", pe.Event().Type, pe.Event().Config)
		}
	}
	k.Target = cut(bytesNoNUL(k.Target), MaxTarget)
	return k
}

// cString is b up to its first NUL.
func cString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// bytesNoNUL is s with NUL bytes replaced by '?'.
func bytesNoNUL(s string) string {
	if !bytes.Contains([]byte(s), []byte{0}) {
		return s
	}
	b := []byte(s)
	for i, c := range b {
		if c == 0 {
			b[i] = '?'
		}
	}
	return string(b)
}

// cut is s cut to at most n bytes (not within a UTF-8 sequence).
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && i > n-4 && s[i]&0xc0 == 0x80 {
		i--
	}
	return s[:i]
}

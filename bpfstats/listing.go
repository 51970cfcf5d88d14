// SPDX-License-Identifier: Apache-2.0

package bpfstats

import (
	"cmp"
	"context"
	"slices"
)

// Bounds of one listing: what an Enumerator lists at most and what Decode
// accepts. Objects past them are counted in Listing.More, not listed. A
// host with Cilium on a few hundred pods runs about a thousand programs;
// the bounds leave room for ten times that.
const (
	MaxPrograms = 16384
	MaxMaps     = 16384
	MaxLinks    = 16384
	// MaxHolders bounds the (process, object) pairs: every open file
	// descriptor of a BPF object on the host.
	MaxHolders = 65536
	// MaxMapIDs bounds the map ids kept per program (the kernel allows
	// 64 maps per program, MAX_USED_MAPS).
	MaxMapIDs = 64
	// MaxName bounds a program's or map's name (BPF_OBJ_NAME_LEN, 16 with
	// its NUL) and a command name (TASK_COMM_LEN).
	MaxName = 15
	// MaxTarget bounds a link's target (a tracepoint, a function, a file
	// path); longer ones are cut.
	MaxTarget = 128
	// MaxNote bounds Listing.HoldersErr.
	MaxNote = 200
	// MaxEncoded bounds an encoded listing: every bound above at once
	// takes about 12 MiB.
	MaxEncoded = 16 << 20
)

// Listing is what one pass over the host's BPF objects found: every
// program, map and link (up to the bounds above, sorted by id) and which
// processes hold a file descriptor of them.
type Listing struct {
	Programs []Program
	Maps     []Map
	Links    []Link
	Holders  []Holder
	// More counts the objects past the bounds, not listed: programs,
	// maps, links, holders.
	More [4]uint32
	// HoldersErr says why Holders is empty when it could not be read (the
	// iterator did not load: a kernel before 5.8, or without BTF), at
	// most MaxNote bytes; "" otherwise.
	HoldersErr string
}

// Program is one BPF program (struct bpf_prog_info).
type Program struct {
	ID   uint32
	Type uint32 // enum bpf_prog_type: ProgType names it
	Tag  [8]byte
	// Name is the name given at load, at most MaxName bytes.
	Name string
	// RunTimeNs and RunCount are the kernel's run-time statistics: the
	// time spent in the program and its runs, counted only while
	// statistics are on (kernel.bpf_stats_enabled or a BPF_ENABLE_STATS
	// descriptor), since the program was loaded.
	RunTimeNs, RunCount uint64
	// VerifiedInsns is the instructions the verifier processed (5.16+,
	// else 0); JitedBytes the size of the JIT-compiled code (0 when not
	// JIT-compiled).
	VerifiedInsns, JitedBytes uint32
	// LoadTime is when it was loaded, in ns since boot; UID the user that
	// loaded it.
	LoadTime uint64
	UID      uint32
	// AttachBTFObjID and AttachBTFID name the BTF type a tracing, LSM or
	// extension program was verified against (its target), 0 for others.
	AttachBTFObjID, AttachBTFID uint32
	// MapIDs are the maps the program uses, at most MaxMapIDs.
	MapIDs []uint32
}

// Map is one BPF map (struct bpf_map_info, and memlock from its fdinfo).
type Map struct {
	ID         uint32
	Type       uint32 // enum bpf_map_type: MapType names it
	KeySize    uint32
	ValueSize  uint32
	MaxEntries uint32
	Flags      uint32
	Name       string
	// Memlock is the kernel memory the map holds, in bytes, as its
	// fdinfo says (0 when the kernel does not say).
	Memlock uint64
	// Entries is the entries of a hash map as the kernel counts them
	// (bpf_map_sum_elem_count, 6.6+); -1 for other types and when the
	// kernel does not count.
	Entries int64
}

// Link is one BPF link: a program attached to a hook.
type Link struct {
	ID         uint32
	Type       uint32 // enum bpf_link_type: LinkType names it
	ProgID     uint32
	AttachType uint32 // enum bpf_attach_type; valid when HasAttach
	HasAttach  bool
	// Target is where the program is attached, as the kernel's link
	// info says, at most MaxTarget bytes: "sched:sched_switch", a
	// function, "cgroup 1234", "ifindex 2", a file path...; "" when the
	// kernel does not say.
	Target string
}

// Holder kinds, as holders.bpf.c writes them.
const (
	HoldsProgram = 1
	HoldsMap     = 2
	HoldsLink    = 3
)

// Holder is a process that holds a file descriptor of a program, map or
// link.
type Holder struct {
	PID  uint32
	Kind uint32 // HoldsProgram, HoldsMap or HoldsLink
	ID   uint32
	Comm string // its command name, at most MaxName bytes
}

// Lister lists the host's BPF objects. Listing other processes' objects
// needs CAP_SYS_ADMIN: an *Enumerator does it in the calling process, the
// privileged helper's client (package privsep) asks the helper.
type Lister interface {
	List(ctx context.Context) (*Listing, error)
}

// ListerFunc is a function as a Lister.
type ListerFunc func(ctx context.Context) (*Listing, error)

// List calls f.
func (f ListerFunc) List(ctx context.Context) (*Listing, error) { return f(ctx) }

// Program returns the program id, or nil.
func (l *Listing) Program(id uint32) *Program {
	i, ok := slices.BinarySearchFunc(l.Programs, id, func(p Program, id uint32) int { return cmpU32(p.ID, id) })
	if !ok {
		return nil
	}
	return &l.Programs[i]
}

// Map returns the map id, or nil.
func (l *Listing) Map(id uint32) *Map {
	i, ok := slices.BinarySearchFunc(l.Maps, id, func(m Map, id uint32) int { return cmpU32(m.ID, id) })
	if !ok {
		return nil
	}
	return &l.Maps[i]
}

func cmpU32(a, b uint32) int { return cmp.Compare(a, b) }

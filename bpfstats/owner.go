// SPDX-License-Identifier: Apache-2.0

package bpfstats

import (
	"bytes"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/kernel-exporter/kernel_exporter/bounded"
)

// Owner is the process an object is attributed to: the one with the
// lowest pid among those holding a file descriptor of it (for a program:
// of it, else of one of its links; for a map: of it, else the owner of
// the first program using it). Fork copies descriptors to children, whose
// pids are higher: the lowest is normally the agent that loaded the
// object. The zero Owner is "no process holds it" (a program kept by a
// pinned link, an XDP program attached through netlink, or one whose
// loader exited).
type Owner struct {
	PID  uint32
	Comm string
	// Cgroup is the process' cgroup v2 path, as /proc/<pid>/cgroup says;
	// Pod is "<namespace>/<pod>" when the cgroup is a Kubernetes pod's
	// and the kube decoders are on. Both "" when unknown.
	Cgroup, Pod string
}

// owners resolves pids to their cgroup and pod, with a bounded cache.
type owners struct {
	procRoot string
	pod      func(cgroupPath string) string
	ttl      time.Duration

	mu    sync.Mutex
	cache map[uint32]ownerEntry
}

type ownerEntry struct {
	comm, cgroup, pod string
	at                time.Time
}

// maxOwnerCache bounds the pids whose cgroup is remembered; past it the
// cache starts again empty.
const maxOwnerCache = 4096

// ownerTTL is how long a pid's cgroup and pod are remembered (a process
// can move to another cgroup; a pod's name is learnt after it starts).
const ownerTTL = time.Minute

func newOwners(procRoot string, pod func(string) string) *owners {
	if procRoot == "" {
		procRoot = "/proc"
	}
	return &owners{procRoot: procRoot, pod: pod, ttl: ownerTTL, cache: map[uint32]ownerEntry{}}
}

// resolve returns the Owner of holder pid with command comm at now.
func (o *owners) resolve(pid uint32, comm string, now time.Time) Owner {
	if pid == 0 {
		return Owner{}
	}
	o.mu.Lock()
	e, ok := o.cache[pid]
	o.mu.Unlock()
	if !ok || e.comm != comm || now.Sub(e.at) > o.ttl {
		e = ownerEntry{comm: comm, cgroup: o.cgroupOf(pid), at: now}
		if e.cgroup != "" && o.pod != nil {
			e.pod = o.pod(e.cgroup)
		}
		o.mu.Lock()
		if len(o.cache) >= maxOwnerCache {
			o.cache = map[uint32]ownerEntry{}
		}
		o.cache[pid] = e
		o.mu.Unlock()
	}
	return Owner{PID: pid, Comm: comm, Cgroup: e.cgroup, Pod: e.pod}
}

// cgroupOf returns pid's cgroup v2 path (the "0::" line of
// /proc/<pid>/cgroup, readable by anyone), "" when it has none or is gone.
func (o *owners) cgroupOf(pid uint32) string {
	b, err := bounded.ReadFile(o.procRoot+"/"+strconv.FormatUint(uint64(pid), 10)+"/cgroup", "cgroup list", bounded.MaxSmall)
	if err != nil {
		return ""
	}
	for _, line := range bytes.Split(b, []byte{'\n'}) {
		if p, ok := bytes.CutPrefix(line, []byte("0::")); ok {
			return string(p)
		}
	}
	return ""
}

// holderIndex finds the lowest-pid holder of each object of a listing.
type holderIndex struct {
	progs, maps, links map[uint32]Holder
}

func indexHolders(hs []Holder) holderIndex {
	x := holderIndex{progs: map[uint32]Holder{}, maps: map[uint32]Holder{}, links: map[uint32]Holder{}}
	for _, h := range hs {
		var m map[uint32]Holder
		switch h.Kind {
		case HoldsProgram:
			m = x.progs
		case HoldsMap:
			m = x.maps
		default:
			m = x.links
		}
		if cur, ok := m[h.ID]; !ok || h.PID < cur.PID {
			m[h.ID] = h
		}
	}
	return x
}

// programHolders returns, by program id, its lowest-pid holder: of the
// program's own descriptor, else of one of its links'.
func programHolders(l *Listing) map[uint32]Holder {
	x := indexHolders(l.Holders)
	out := x.progs
	viaLinks := map[uint32]Holder{}
	for _, k := range l.Links {
		h, ok := x.links[k.ID]
		if !ok || k.ProgID == 0 {
			continue
		}
		if cur, seen := viaLinks[k.ProgID]; !seen || h.PID < cur.PID {
			viaLinks[k.ProgID] = h
		}
	}
	for id, h := range viaLinks {
		if _, own := out[id]; !own {
			out[id] = h
		}
	}
	return out
}

// mapHolders returns, by map id, its lowest-pid holder: of the map's own
// descriptor, else the holder of the first program (lowest id) using it.
func mapHolders(l *Listing, progs map[uint32]Holder) map[uint32]Holder {
	x := indexHolders(l.Holders)
	out := x.maps
	for _, p := range l.Programs { // in id order
		h, ok := progs[p.ID]
		if !ok {
			continue
		}
		for _, id := range p.MapIDs {
			if _, held := out[id]; !held {
				out[id] = h
			}
		}
	}
	return out
}

// mapUsers returns, by map id, the ids of the programs that use it,
// sorted.
func mapUsers(l *Listing) map[uint32][]uint32 {
	out := map[uint32][]uint32{}
	for _, p := range l.Programs {
		for _, id := range p.MapIDs {
			out[id] = append(out[id], p.ID)
		}
	}
	for _, ids := range out {
		slices.Sort(ids)
	}
	return out
}

// SPDX-License-Identifier: Apache-2.0

package bpfstats

import (
	"context"
	"os"
	"slices"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"github.com/kernel-exporter/kernel_exporter/internal/testenv"
)

// needRoot ends t unless it runs as root (CAP_SYS_ADMIN lists others'
// programs).
func needRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.SkipOrFail(t, "listing the host's BPF programs needs root")
	}
}

// testObjects loads a socket filter that uses a hash map and returns both
// (closed at cleanup).
func testObjects(t testing.TB, name string, maxEntries uint32) (*ebpf.Program, *ebpf.Map) {
	t.Helper()
	m, err := ebpf.NewMap(&ebpf.MapSpec{Name: name + "_m", Type: ebpf.Hash, KeySize: 4, ValueSize: 8, MaxEntries: maxEntries})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: name, Type: ebpf.SocketFilter, License: "GPL",
		Instructions: asm.Instructions{
			asm.LoadMapPtr(asm.R1, m.FD()),
			asm.Mov.Imm(asm.R0, 0),
			asm.Return(),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, m
}

func TestEnumerator(t *testing.T) {
	needRoot(t)
	p, m := testObjects(t, "ke_enum_test", 1000)
	pi, err := p.Info()
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := pi.ID()
	mi, err := m.Info()
	if err != nil {
		t.Fatal(err)
	}
	mid, _ := mi.ID()
	memlock, _ := mi.Memlock()

	e := NewEnumerator(Limits{})
	defer e.Close()
	l, err := e.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if l.HoldersErr != "" {
		t.Fatalf("holders: %s", l.HoldersErr)
	}
	got := l.Program(uint32(pid))
	if got == nil {
		t.Fatalf("program %d not listed among %d", pid, len(l.Programs))
	}
	if got.Name != "ke_enum_test" || ProgType(got.Type) != "socket_filter" || got.Tag == [8]byte{} {
		t.Errorf("program %+v: want name ke_enum_test, type socket_filter, a tag", got)
	}
	if !slices.Contains(got.MapIDs, uint32(mid)) {
		t.Errorf("program map ids %v: want %d", got.MapIDs, mid)
	}
	if want, _ := pi.VerifiedInstructions(); got.VerifiedInsns != want || want == 0 {
		t.Errorf("verified instructions %d, cilium/ebpf says %d", got.VerifiedInsns, want)
	}
	gm := l.Map(uint32(mid))
	if gm == nil {
		t.Fatalf("map %d not listed", mid)
	}
	if gm.Name != "ke_enum_test_m" || MapType(gm.Type) != "hash" || gm.MaxEntries != 1000 || gm.KeySize != 4 || gm.ValueSize != 8 {
		t.Errorf("map %+v", gm)
	}
	if gm.Memlock != memlock || memlock == 0 {
		t.Errorf("map memlock %d, fdinfo via cilium/ebpf %d", gm.Memlock, memlock)
	}
	self := uint32(os.Getpid())
	var heldProg, heldMap bool
	for _, h := range l.Holders {
		if h.PID != self {
			continue
		}
		heldProg = heldProg || h.Kind == HoldsProgram && h.ID == uint32(pid)
		heldMap = heldMap || h.Kind == HoldsMap && h.ID == uint32(mid)
		if h.Comm == "" {
			t.Errorf("holder %+v has no command name", h)
		}
	}
	if !heldProg || !heldMap {
		t.Errorf("holders: program held by us %v, map %v (%d holders)", heldProg, heldMap, len(l.Holders))
	}
	// The listing goes over the wire unchanged.
	b, err := Encode(l)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if b2, _ := Encode(back); string(b2) != string(b) {
		t.Error("decode(encode(l)) encodes differently")
	}
}

func TestEnumeratorLimits(t *testing.T) {
	needRoot(t)
	testObjects(t, "ke_enum_lim1", 10)
	testObjects(t, "ke_enum_lim2", 10)
	e := NewEnumerator(Limits{Programs: 1, Maps: 1, Holders: 1})
	defer e.Close()
	l, err := e.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Programs) != 1 || l.More[0] < 1 || len(l.Maps) != 1 || l.More[1] < 1 || len(l.Holders) != 1 || l.More[3] < 1 {
		t.Errorf("limits of 1: %d programs (%d more), %d maps (%d more), %d holders (%d more)",
			len(l.Programs), l.More[0], len(l.Maps), l.More[1], len(l.Holders), l.More[3])
	}
}

// TestEnumeratorEntries checks the entries the kernel counts for hash
// maps (6.6+): 37 of a hash map, 5 of an LRU hash, and none (-1) for an
// array.
func TestEnumeratorEntries(t *testing.T) {
	needRoot(t)
	mk := func(typ ebpf.MapType, n int) uint32 {
		m, err := ebpf.NewMap(&ebpf.MapSpec{Name: "ke_entries", Type: typ, KeySize: 4, ValueSize: 8, MaxEntries: 100})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		for k := uint32(0); k < uint32(n); k++ {
			if err := m.Put(k, uint64(k)); err != nil {
				t.Fatal(err)
			}
		}
		info, err := m.Info()
		if err != nil {
			t.Fatal(err)
		}
		id, _ := info.ID()
		return uint32(id)
	}
	hash, lru, array := mk(ebpf.Hash, 37), mk(ebpf.LRUHash, 5), mk(ebpf.Array, 3)
	e := NewEnumerator(Limits{})
	defer e.Close()
	l, err := e.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if e.counter == nil {
		testenv.SkipLacking(t, "bpf_map_sum_elem_count", "the kernel does not count hash maps' entries (6.6+)")
	}
	for id, want := range map[uint32]int64{hash: 37, lru: 5, array: -1} {
		if m := l.Map(id); m == nil || m.Entries != want {
			t.Errorf("map %d: %+v, want %d entries", id, m, want)
		}
	}
}

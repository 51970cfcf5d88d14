// SPDX-License-Identifier: Apache-2.0

package loader

import (
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/config"
	"github.com/kernel-exporter/kernel_exporter/internal/testenv"
)

// handoverSpec is a tracepoint program counting getpid() calls into slot
// 0 of the array map counts, and a raw tracepoint program counting every
// syscall entry into slot 1.
func handoverSpec() *ebpf.CollectionSpec {
	count := func(slot int32) asm.Instructions {
		return countInstructions(asm.LoadMapPtr(asm.R1, 0).WithReference("counts"), slot)
	}
	return &ebpf.CollectionSpec{
		Maps: map[string]*ebpf.MapSpec{"counts": {Name: "counts", Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 2}},
		Programs: map[string]*ebpf.ProgramSpec{
			"tp":  {Name: "tp", Type: ebpf.TracePoint, SectionName: "tracepoint/syscalls/sys_enter_getpid", License: "GPL", Instructions: count(0)},
			"rtp": {Name: "rtp", Type: ebpf.RawTracepoint, SectionName: "raw_tp/sys_enter", License: "GPL", Instructions: count(1)},
		},
	}
}

// dupHandover copies every descriptor of h, as SCM_RIGHTS would for
// another process.
func dupHandover(t *testing.T, h Handover) Handover {
	t.Helper()
	dup := func(fd int) int {
		n, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	out := Handover{Maps: map[string]int{}, Programs: map[string]int{}, Links: map[string][]int{}, Chosen: h.Chosen, Errors: h.Errors}
	for n, fd := range h.Maps {
		out.Maps[n] = dup(fd)
	}
	for n, fd := range h.Programs {
		out.Programs[n] = dup(fd)
	}
	for n, fds := range h.Links {
		for _, fd := range fds {
			out.Links[n] = append(out.Links[n], dup(fd))
		}
	}
	return out
}

func fdCount(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestHandoverAdopt loads an object, hands its descriptors over (copies,
// as another process receives them) and closes it, as the privileged
// helper does: the adopted object's programs still run and count into
// the adopted map, the tracepoint program given without its link is
// linked by Adopt; closing the adopted object detaches both. A handover
// naming a map the object lacks is refused with every descriptor closed.
func TestHandoverAdopt(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.SkipOrFail(t, "needs root to load programs")
	}
	cfg := &config.Config{}
	obj, err := Load(handoverSpec(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := obj.Handover()
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Maps) != 1 || len(h.Programs) != 2 || len(h.Links["tp"]) != 1 || len(h.Links["rtp"]) != 1 {
		t.Fatalf("handover %+v: want 1 map, 2 programs, a link each", h)
	}
	recv := dupHandover(t, h)
	// The tracepoint program comes without its link: Adopt links it.
	for _, fd := range recv.Links["tp"] {
		unix.Close(fd)
	}
	delete(recv.Links, "tp")
	obj.Close()
	adopted, err := Adopt(handoverSpec(), cfg, recv, nil)
	if err != nil {
		t.Fatal(err)
	}
	counts := adopted.Collection.Maps["counts"]
	read := func(slot uint32) uint64 {
		var v uint64
		if err := counts.Lookup(slot, &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, p := range adopted.Programs {
		if !p.Attached() {
			t.Errorf("adopted program %s not attached", p.Name)
		}
	}
	g0, s0 := read(0), read(1)
	for range 10 {
		syscall.Getpid()
	}
	g1, s1 := read(0), read(1)
	if g1-g0 < 10 || s1-s0 < 10 {
		t.Errorf("after 10 getpid(): tracepoint +%d, raw_tp +%d, want at least 10 each", g1-g0, s1-s0)
	}
	adopted.Detach()
	g2 := read(0)
	for range 10 {
		syscall.Getpid()
	}
	if g3 := read(0); g3 != g2 {
		t.Errorf("detached: tracepoint counted %d more", g3-g2)
	}
	adopted.Close()

	before := fdCount(t)
	obj, err = Load(handoverSpec(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	h, _ = obj.Handover()
	recv = dupHandover(t, h)
	obj.Close()
	recv.Maps["nosuch"] = recv.Maps["counts"]
	delete(recv.Maps, "counts")
	if _, err := Adopt(handoverSpec(), cfg, recv, nil); err == nil || !strings.Contains(err.Error(), "map nosuch is not in the object") {
		t.Errorf("Adopt with a foreign map name: %v", err)
	}
	if after := fdCount(t); after != before {
		t.Errorf("%d descriptors open before, %d after a refused Adopt", before, after)
	}
}

// SPDX-License-Identifier: Apache-2.0

package privsep

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/bpfstats"
)

// listOps are fakeOps that also answer "bpf_objects" with fd().
type listOps struct {
	fakeOps
	fd func() (int, error)
}

func (o *listOps) listBPF() (int, error) { return o.fd() }

// TestServeBPFObjects checks the client's side of "bpf_objects": a sealed
// memfd with a listing is decoded; a helper without the operation, an
// unsealed memfd, a pipe and a listing that does not decode are refused
// with an error, and the socket stays usable after each.
func TestServeBPFObjects(t *testing.T) {
	want := &bpfstats.Listing{Programs: []bpfstats.Program{{ID: 5, Type: 5, Name: "spin"}},
		Holders: []bpfstats.Holder{{PID: 1, Kind: bpfstats.HoldsProgram, ID: 5, Comm: "agent"}}}
	enc, err := bpfstats.Encode(want)
	if err != nil {
		t.Fatal(err)
	}
	o := &listOps{}
	c, _ := pair(t, o)
	o.fd = func() (int, error) { return sealedMemfd("test", enc) }
	l, err := c.ListBPF(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Programs) != 1 || l.Programs[0].Name != "spin" || l.Holders[0].Comm != "agent" {
		t.Errorf("listing %+v", l)
	}
	for name, fd := range map[string]func() (int, error){
		"unsealed memfd": func() (int, error) {
			fd, err := unix.MemfdCreate("x", unix.MFD_CLOEXEC)
			if err == nil {
				_, err = unix.Write(fd, enc)
			}
			return fd, err
		},
		"pipe":              func() (int, error) { return o.fakeOps.fd() },
		"listing not valid": func() (int, error) { return sealedMemfd("test", enc[:len(enc)-1]) },
	} {
		o.fd = fd
		if _, err := c.ListBPF(context.Background()); err == nil {
			t.Errorf("%s: accepted", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
	// A helper without the operation says so; the protocol holds.
	c2, _ := pair(t, &fakeOps{})
	if _, err := c2.ListBPF(context.Background()); err == nil || !strings.Contains(err.Error(), "not supported") {
		t.Errorf("helper without listing: %v", err)
	}
	if f, err := c2.EnableStats(); err != nil {
		t.Errorf("after a refused listing: %v", err)
	} else {
		f.Close()
	}
}

// TestListBPFHelper lists the host's BPF objects through the real
// helper: a program this process loaded is there, with its map, held by
// this process.
func TestListBPFHelper(t *testing.T) {
	c, logs := startHelper(t, Settings{})
	m, err := ebpf.NewMap(&ebpf.MapSpec{Name: "ke_privsep_m", Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "ke_privsep", Type: ebpf.SocketFilter, License: "GPL",
		Instructions: asm.Instructions{asm.LoadMapPtr(asm.R1, m.FD()), asm.Mov.Imm(asm.R0, 0), asm.Return()}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	info, err := p.Info()
	if err != nil {
		t.Fatal(err)
	}
	id, _ := info.ID()
	l, err := c.ListBPF(context.Background())
	if err != nil {
		t.Fatalf("ListBPF: %v\n%s", err, logs)
	}
	got := l.Program(uint32(id))
	if got == nil || got.Name != "ke_privsep" || len(got.MapIDs) != 1 || l.Map(got.MapIDs[0]) == nil {
		t.Fatalf("program %d: %+v", id, got)
	}
	if l.HoldersErr != "" {
		t.Fatalf("holders: %s", l.HoldersErr)
	}
	held := false
	for _, h := range l.Holders {
		held = held || h.Kind == bpfstats.HoldsProgram && h.ID == uint32(id) && h.PID == uint32(os.Getpid())
	}
	if !held {
		t.Errorf("program %d not held by this process among %d holders", id, len(l.Holders))
	}
}

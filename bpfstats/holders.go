// SPDX-License-Identifier: Apache-2.0

package bpfstats

import (
	"bytes"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
)

// holdersObject is holders.bpf.c compiled (make bpf).
//
//go:embed holders.bpf.o
var holdersObject []byte

// holderSize is the size of one struct holder of holders.bpf.c.
const holderSize = 28

// maxHolderScan bounds the records read from one pass of the iterator,
// kept or only counted in Listing.More: past it the rest is not read.
const maxHolderScan = 16 * MaxHolders

// holdersIter is the loaded holders iterator.
type holdersIter struct {
	prog *ebpf.Program
	it   *link.Iter
	buf  []byte
}

// loadHoldersIter loads and attaches holders.bpf.c's task_file iterator.
func loadHoldersIter() (*holdersIter, error) {
	return loadIter("holders")
}

// loadEntriesIter loads and attaches holders.bpf.c's bpf_map iterator,
// which counts the entries of hash maps (6.6+).
func loadEntriesIter() (*holdersIter, error) {
	return loadIter("map_entries")
}

// loadIter loads and attaches the iterator program name of holders.bpf.o,
// alone (a program that does not load on this kernel fails only itself).
func loadIter(name string) (*holdersIter, error) {
	spec, err := ebpf.LoadCollectionSpecFromReader(bytes.NewReader(holdersObject))
	if err != nil {
		return nil, fmt.Errorf("parse holders.bpf.o: %w", err)
	}
	ps := spec.Programs[name]
	if ps == nil {
		return nil, fmt.Errorf("holders.bpf.o has no program %s", name)
	}
	_ = rlimit.RemoveMemlock() // kernels before 5.11 charge RLIMIT_MEMLOCK
	prog, err := ebpf.NewProgram(ps)
	if err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	it, err := link.AttachIter(link.IterOptions{Program: prog})
	if err != nil {
		prog.Close()
		return nil, fmt.Errorf("attach: %w", err)
	}
	return &holdersIter{prog: prog, it: it, buf: make([]byte, 64<<10)}, nil
}

func (h *holdersIter) close() {
	h.it.Close()
	h.prog.Close()
}

// records runs the iterator once and hands each record of size bytes to
// each, at most max of them (the rest is not read).
func (h *holdersIter) records(size, max int, each func(rec []byte)) error {
	r, err := h.it.Open()
	if err != nil {
		return err
	}
	defer r.Close()
	var pending []byte
	seen := 0
	for seen < max {
		n, err := r.Read(h.buf)
		pending = append(pending, h.buf[:n]...)
		for len(pending) >= size && seen < max {
			each(pending[:size])
			pending = pending[size:]
			seen++
		}
		if errors.Is(err, io.EOF) || (err == nil && n == 0) {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// read runs the holders iterator once and returns at most limit holders,
// sorted by kind, id and pid, and the count of those past limit.
func (h *holdersIter) read(limit int) ([]Holder, uint32, error) {
	var out []Holder
	var more uint32
	err := h.records(holderSize, maxHolderScan, func(rec []byte) {
		if len(out) >= limit {
			more++
			return
		}
		if hd, ok := parseHolder(rec); ok {
			out = append(out, hd)
		}
	})
	if err != nil {
		return nil, 0, err
	}
	slices.SortFunc(out, func(a, b Holder) int {
		if c := cmpU32(a.Kind, b.Kind); c != 0 {
			return c
		}
		if c := cmpU32(a.ID, b.ID); c != 0 {
			return c
		}
		return cmpU32(a.PID, b.PID)
	})
	return slices.Compact(out), more, nil
}

// parseHolder reads one struct holder; ok is false for a record Decode
// would refuse.
func parseHolder(rec []byte) (Holder, bool) {
	hd := Holder{
		PID:  binary.NativeEndian.Uint32(rec[0:]),
		ID:   binary.NativeEndian.Uint32(rec[4:]),
		Kind: binary.NativeEndian.Uint32(rec[8:]),
		Comm: bytesNoNUL(cString(rec[12:28])),
	}
	if len(hd.Comm) > MaxName {
		hd.Comm = hd.Comm[:MaxName]
	}
	ok := hd.PID != 0 && hd.ID != 0 && hd.Kind >= HoldsProgram && hd.Kind <= HoldsLink
	return hd, ok
}

// entriesSize is the size of one struct map_count of holders.bpf.c.
const entriesSize = 16

// entries runs the map_entries iterator once and returns the entries the
// kernel counts of each map, by id (at most 16 × MaxMaps maps read).
func (h *holdersIter) entries() (map[uint32]int64, error) {
	out := map[uint32]int64{}
	err := h.records(entriesSize, 16*MaxMaps, func(rec []byte) {
		out[binary.NativeEndian.Uint32(rec[0:])] = int64(binary.NativeEndian.Uint64(rec[8:]))
	})
	return out, err
}

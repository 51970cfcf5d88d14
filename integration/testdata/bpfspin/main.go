// SPDX-License-Identifier: Apache-2.0

// Command bpfspin loads BPF programs as another agent on the host would,
// for the host BPF collector's integration tests (bpfstats_test.go): the
// exporter must find them by listing the host, not through its configs.
//
//	bpfspin spin <tgid> <spin_ns>     load spin.bpf.c for process tgid, put 100
//	                                  entries in its map, attach it,
//	                                  print "prog=<id> map=<id>", then answer
//	                                  "count" lines with "calls=<n> spun=<n>"
//	                                  until end of input
//	bpfspin churn <n> <batch> <hold>  load n socket filters (each with an
//	                                  array map) in batches of batch, keep
//	                                  each batch for hold, unload it; print
//	                                  "done"
package main

import (
	"bufio"
	"bytes"
	_ "embed"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
)

//go:embed spin.bpf.o
var spinObject []byte

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "bpfspin:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: bpfspin spin <tgid> <spin_ns> | churn <n> <batch> <hold>")
	}
	_ = rlimit.RemoveMemlock()
	num := func(i int) uint64 {
		n, err := strconv.ParseUint(args[i], 10, 64)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bpfspin: bad number", args[i])
			os.Exit(2)
		}
		return n
	}
	switch {
	case args[0] == "spin" && len(args) == 3:
		return spin(uint32(num(1)), num(2))
	case args[0] == "churn" && len(args) == 4:
		hold, err := time.ParseDuration(args[3])
		if err != nil {
			return err
		}
		return churn(int(num(1)), int(num(2)), hold)
	}
	return fmt.Errorf("bad arguments %q", args)
}

func spin(tgid uint32, ns uint64) error {
	spec, err := ebpf.LoadCollectionSpecFromReader(bytes.NewReader(spinObject))
	if err != nil {
		return err
	}
	if err := spec.Variables["target_tgid"].Set(tgid); err != nil {
		return err
	}
	if err := spec.Variables["spin_ns"].Set(ns); err != nil {
		return err
	}
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		return err
	}
	defer coll.Close()
	// 100 entries in the map, for the entries the kernel counts.
	var big [64]byte
	for k := uint64(0); k < 100; k++ {
		if err := coll.Maps["ke_spin_big"].Put(k, big); err != nil {
			return err
		}
	}
	prog := coll.Programs["bpfstats_spin"]
	l, err := link.Tracepoint("syscalls", "sys_enter_ioprio_get", prog, nil)
	if err != nil {
		return err
	}
	defer l.Close()
	pi, err := prog.Info()
	if err != nil {
		return err
	}
	mi, err := coll.Maps["ke_spin_big"].Info()
	if err != nil {
		return err
	}
	pid, _ := pi.ID()
	mid, _ := mi.ID()
	fmt.Printf("prog=%d map=%d\n", pid, mid)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var calls, spun uint64
		if err := coll.Variables["calls"].Get(&calls); err != nil {
			return err
		}
		if err := coll.Variables["spun"].Get(&spun); err != nil {
			return err
		}
		fmt.Printf("calls=%d spun=%d\n", calls, spun)
	}
	return nil
}

func churn(n, batch int, hold time.Duration) error {
	for done := 0; done < n; {
		var closers []interface{ Close() error }
		for i := 0; i < batch && done < n; i, done = i+1, done+1 {
			m, err := ebpf.NewMap(&ebpf.MapSpec{Name: "bpfstats_churn", Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 1})
			if err != nil {
				return err
			}
			p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "bpfstats_churn", Type: ebpf.SocketFilter, License: "GPL",
				Instructions: asm.Instructions{asm.LoadMapPtr(asm.R1, m.FD()), asm.Mov.Imm(asm.R0, 0), asm.Return()}})
			if err != nil {
				m.Close()
				return err
			}
			closers = append(closers, p, m)
		}
		time.Sleep(hold)
		for _, c := range closers {
			c.Close()
		}
	}
	fmt.Println("done")
	return nil
}

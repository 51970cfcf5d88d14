// SPDX-License-Identifier: Apache-2.0

// Package selfcount holds the smallest useful BPF program: one that counts
// its own runs. The statistics probe (bpfstats.StatsProbe) and the
// benchmarks' floor program (integration/bench_bcc_test.go) both use it.
package selfcount

import (
	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// Instructions returns a program body that adds 1 to the u64 at key 0 of
// counter (a per-CPU array, or an array, with 4-byte keys and 8-byte
// values) and returns 0. It reads no context, so it suits any program type
// whose return value 0 means "nothing to do" (perf_event, raw tracepoint,
// socket filter, ...). counter must stay open until the program is loaded.
func Instructions(counter *ebpf.Map) asm.Instructions {
	return asm.Instructions{
		asm.StoreImm(asm.R10, -4, 0, asm.Word),
		asm.LoadMapPtr(asm.R1, counter.FD()),
		asm.Mov.Reg(asm.R2, asm.R10),
		asm.Add.Imm(asm.R2, -4),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "out"),
		asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord),
		asm.Add.Imm(asm.R1, 1),
		asm.StoreMem(asm.R0, 0, asm.R1, asm.DWord),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("out"),
		asm.Return(),
	}
}

// SPDX-License-Identifier: Apache-2.0

package loader

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"github.com/kernel-exporter/kernel_exporter/internal/testenv"
)

// TestVerifierHints has this kernel's verifier reject small programs with
// the common mistakes of a program's author, as clang compiles them, and
// checks the first line of the load error: the program, its section, the
// verifier's complaint and the advice.
func TestVerifierHints(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.SkipOrFail(t, "needs root to have the verifier reject a program")
	}
	const sec = "tracepoint/syscalls/sys_enter_getppid"
	zeroStack := asm.Instructions{
		asm.Mov.Imm(asm.R5, 0),
		asm.StoreMem(asm.RFP, -8, asm.R5, asm.DWord),
		asm.StoreMem(asm.RFP, -16, asm.R5, asm.DWord),
	}
	for _, tc := range []struct {
		name    string
		license string
		insns   asm.Instructions
		want    string
	}{{
		// char buf[16]; bpf_probe_read_user_str(buf, 16, NULL) with no
		// license section.
		name: "nolicense",
		insns: asm.Instructions{
			asm.Mov.Reg(asm.R1, asm.RFP), asm.Add.Imm(asm.R1, -16),
			asm.Mov.Imm(asm.R2, 16), asm.Mov.Imm(asm.R3, 0),
			asm.FnProbeReadUserStr.Call(),
			asm.Mov.Imm(asm.R0, 0), asm.Return(),
		},
		want: `load: verifier rejected program nolicense (section ` + sec + `): invalid argument: cannot call GPL-restricted function from non-GPL compatible program; ` +
			`hint: bpf_probe_read_user_str is GPL-only and the object has no license section: add char LICENSE[] SEC("license") = "GPL"; (or "Dual BSD/GPL")`,
	}, {
		// for (i = 0; i < ctx->args[0]; i++) sum += buf[i & 0xff];
		name: "ctxloop", license: "GPL",
		insns: append(zeroStack,
			asm.LoadMem(asm.R1, asm.R1, 16, asm.DWord),
			asm.Mov.Imm(asm.R2, 0), asm.Mov.Imm(asm.R0, 0),
			asm.JSGE.Reg(asm.R2, asm.R1, "out").WithSymbol("loop"),
			asm.Mov.Reg(asm.R3, asm.R2), asm.And.Imm(asm.R3, 0xff),
			asm.Mov.Reg(asm.R4, asm.RFP), asm.Add.Imm(asm.R4, -16), asm.Add.Reg(asm.R4, asm.R3),
			asm.LoadMem(asm.R3, asm.R4, 0, asm.Byte),
			asm.Add.Reg(asm.R0, asm.R3), asm.Add.Imm(asm.R2, 1),
			asm.Ja.Label("loop"),
			asm.Return().WithSymbol("out"),
		),
		want: `load: verifier rejected program ctxloop (section ` + sec + `): permission denied: invalid read from stack R4 off=0 size=1; ` +
			`hint: an access runs past a stack variable, most often an array index in a loop bounded by a value from the context (the verifier follows every iteration): bound the index by the array's size as well (for (i = 0; i < n && i < sizeof(buf); i++))`,
	}, {
		// return buf[ctx->args[0] & 31]; with char buf[16]
		name: "varstack", license: "GPL",
		insns: append(zeroStack,
			asm.LoadMem(asm.R1, asm.R1, 16, asm.DWord), asm.And.Imm(asm.R1, 31),
			asm.Mov.Reg(asm.R2, asm.RFP), asm.Add.Imm(asm.R2, -16), asm.Add.Reg(asm.R2, asm.R1),
			asm.LoadMem(asm.R0, asm.R2, 0, asm.Byte), asm.Return(),
		),
		want: `load: verifier rejected program varstack (section ` + sec + `): invalid argument: invalid variable-offset read from stack R2 var_off=(0x0; 0x1f) off=-16 size=1; ` +
			`hint: an index into a stack array can reach past the array's end (var_off: the values the verifier allows it): compare it with the array's size before the access (if (i >= sizeof(buf)) return 0;)`,
	}, {
		// while (ctx->args[0] != 7) ;
		name: "spin", license: "GPL",
		insns: asm.Instructions{
			asm.LoadMem(asm.R1, asm.R1, 16, asm.DWord),
			asm.JNE.Imm(asm.R1, 7, "spin").WithSymbol("spin"),
			asm.Mov.Imm(asm.R0, 0), asm.Return(),
		},
		want: `load: verifier rejected program spin (section ` + sec + `): invalid argument: infinite loop detected at insn 1; ` +
			`hint: the verifier cannot see this loop end (it follows every iteration, up to 1 million instructions): bound it by a constant (for (i = 0; i < 64 && i < n; i++)), or use bpf_loop() (Linux 5.17) or bpf_for() (Linux 6.4)`,
	}, {
		// u64 *v = bpf_map_lookup_elem(&counts, &k); *v += 1;
		name: "nonull", license: "GPL",
		insns: asm.Instructions{
			asm.StoreImm(asm.RFP, -4, 0, asm.Word),
			asm.Mov.Reg(asm.R2, asm.RFP), asm.Add.Imm(asm.R2, -4),
			asm.LoadMapPtr(asm.R1, 0).WithReference("counts"),
			asm.FnMapLookupElem.Call(),
			asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord),
			asm.Mov.Imm(asm.R0, 0), asm.Return(),
		},
		want: `load: verifier rejected program nonull (section ` + sec + `): permission denied: R0 invalid mem access 'map_value_or_null'; ` +
			`hint: the value bpf_map_lookup_elem returned is used without a NULL check (it is NULL when the key is absent): check it first (if (!value) return 0;)`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			spec := &ebpf.CollectionSpec{
				Maps: map[string]*ebpf.MapSpec{"counts": {Name: "counts", Type: ebpf.Hash, KeySize: 4, ValueSize: 8, MaxEntries: 16}},
				Programs: map[string]*ebpf.ProgramSpec{tc.name: {
					Name: tc.name, Type: ebpf.TracePoint, SectionName: sec, License: tc.license, Instructions: tc.insns,
				}},
			}
			coll, err := ebpf.NewCollection(spec)
			if err == nil {
				coll.Close()
				t.Fatal("the verifier accepted the program")
			}
			lerr := loadError(spec, err)
			var ve *ebpf.VerifierError
			if !errors.As(lerr, &ve) {
				t.Errorf("loadError(%v) is not a *ebpf.VerifierError", err)
			}
			got, tail, _ := strings.Cut(lerr.Error(), "; verifier log tail:\n  ")
			if got != tc.want {
				t.Errorf("load error:\n got %s\nwant %s", got, tc.want)
			}
			if tail == "" {
				t.Errorf("load error %q has no verifier log tail", lerr)
			}
		})
	}
}

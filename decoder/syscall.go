// SPDX-License-Identifier: Apache-2.0

package decoder

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/kernel-exporter/kernel_exporter/config"
)

//go:generate go run gen_syscalls.go

func init() { register("syscall", newSyscall) }

// syscallDecoder turns a syscall number into its name for the architecture
// the exporter runs on (x86_64 or arm64): 0 → "read" on x86_64, "io_setup"
// on arm64. The number is a raw unsigned field of 4 or 8 bytes, or the
// decimal text of an earlier uint decoder. Numbers without a name print as
// "sys_<n>" (the tables come from the kernel headers the package was
// generated from; see gen_syscalls.go).
//
// With Env.Compat it prints what cloudflare/ebpf_exporter prints: its names
// where they differ (pread for pread64, exit for exit_group, ... see
// syscall_ref.go) and "unknown_syscall:<n>" for numbers without one.
type syscallDecoder struct {
	size   int
	names  [][]byte
	prefix string // of numbers without a name: "sys_", or the reference's
}

// syscallTables converts the generated tables to [][]byte once.
var syscallTables = sync.OnceValue(func() map[string][][]byte {
	conv := func(names []string) [][]byte {
		out := make([][]byte, len(names))
		for i, n := range names {
			if n != "" {
				out[i] = []byte(n)
			}
		}
		return out
	}
	return map[string][][]byte{
		"amd64": conv(syscallNamesAMD64[:]),
		"arm64": conv(syscallNamesARM64[:]),
	}
})

// refSyscallTables are syscallTables as cloudflare/ebpf_exporter names
// the numbers (Env.Compat).
var refSyscallTables = sync.OnceValue(func() map[string][][]byte {
	out := map[string][][]byte{}
	for arch, names := range syscallTables() {
		ref := append([][]byte(nil), names...)
		for nr, name := range refSyscallRenames[arch] {
			ref[nr] = []byte(name)
		}
		for _, nr := range refSyscallUnnamed[arch] {
			ref[nr] = nil
		}
		out[arch] = ref
	}
	return out
})

func newSyscall(env *Env, _ config.Decoder, size int, _ StackMaps) (Decoder, error) {
	if size != textInput {
		if err := checkSize("syscall", size, 4, 8); err != nil {
			return nil, err
		}
	}
	return newSyscallFor(runtime.GOARCH, size, env != nil && env.Compat)
}

func newSyscallFor(arch string, size int, compat bool) (*syscallDecoder, error) {
	tables, prefix := syscallTables(), "sys_"
	if compat {
		tables, prefix = refSyscallTables(), "unknown_syscall:"
	}
	names, ok := tables[arch]
	if !ok {
		return nil, fmt.Errorf("syscall: no syscall table for architecture %s (have amd64 and arm64)", arch)
	}
	return &syscallDecoder{size: size, names: names, prefix: prefix}, nil
}

// Decode fails on a raw field of the wrong width or on text that is not a
// decimal number.
func (d *syscallDecoder) Decode(in []byte) ([]byte, error) {
	nr, err := readInput("syscall", in, d.size)
	if err != nil {
		return nil, err
	}
	if nr < uint64(len(d.names)) && d.names[nr] != nil {
		return d.names[nr], nil
	}
	return appendDecimal(append(make([]byte, 0, 40), d.prefix...), nr), nil
}

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
type syscallDecoder struct {
	size  int
	names [][]byte
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

func newSyscall(_ *Env, _ config.Decoder, size int, _ StackMaps) (Decoder, error) {
	if size != textInput {
		if err := checkSize("syscall", size, 4, 8); err != nil {
			return nil, err
		}
	}
	return newSyscallFor(runtime.GOARCH, size)
}

func newSyscallFor(arch string, size int) (*syscallDecoder, error) {
	names, ok := syscallTables()[arch]
	if !ok {
		return nil, fmt.Errorf("syscall: no syscall table for architecture %s (have amd64 and arm64)", arch)
	}
	return &syscallDecoder{size: size, names: names}, nil
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
	return appendDecimal(append(make([]byte, 0, 24), "sys_"...), nr), nil
}

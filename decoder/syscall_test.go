// SPDX-License-Identifier: Apache-2.0

package decoder

import (
	"runtime"
	"testing"

	"github.com/kernel-exporter/kernel_exporter/config"
)

func TestSyscallTables(t *testing.T) {
	want := map[string]map[uint64]string{
		"amd64": {
			0: "read", 1: "write", 35: "nanosleep", 39: "getpid", 230: "clock_nanosleep",
			257: "openat", 293: "pipe2", 435: "clone3", 447: "memfd_secret",
		},
		"arm64": {
			0: "io_setup", 1: "io_destroy", 25: "fcntl", 38: "renameat", 56: "openat",
			62: "lseek", 63: "read", 64: "write", 79: "newfstatat", 80: "fstat",
			84: "sync_file_range", 101: "nanosleep", 115: "clock_nanosleep",
			163: "getrlimit", 172: "getpid", 222: "mmap", 223: "fadvise64",
			293: "rseq", 435: "clone3", 447: "memfd_secret",
		},
	}
	for arch, names := range want {
		d, err := newSyscallFor(arch, 8, false)
		if err != nil {
			t.Fatal(err)
		}
		for nr, name := range names {
			if out, err := d.Decode(u64(nr)); err != nil || string(out) != name {
				t.Errorf("%s: Decode(%d) = %q, %v; want %q", arch, nr, out, err, name)
			}
		}
		// Holes and numbers past the table.
		for _, nr := range []uint64{244, 100000, 1<<64 - 1} {
			want := "sys_" + itoa(int(nr))
			if nr == 1<<64-1 {
				want = "sys_18446744073709551615"
			}
			if arch == "amd64" && nr == 244 {
				want = "mq_notify"
			}
			if out, err := d.Decode(u64(nr)); err != nil || string(out) != want {
				t.Errorf("%s: Decode(%d) = %q, %v; want %q", arch, nr, out, err, want)
			}
		}
	}
	if _, err := newSyscallFor("riscv64", 4, false); err == nil || err.Error() != "syscall: no syscall table for architecture riscv64 (have amd64 and arm64)" {
		t.Errorf("riscv64: %v", err)
	}
}

func TestSyscall(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("expectations are for x86_64")
	}
	e := NewEnv(16)
	conf := config.Decoder{Name: "syscall"}
	runCases(t, mustNew(t, e, conf, 4), []decodeCase{
		{name: "read", in: u32(0), out: "read"},
		{name: "openat", in: u32(257), out: "openat"},
		{name: "unknown", in: u32(337), out: "sys_337"},
		{name: "-1", in: u32(1<<32 - 1), out: "sys_4294967295"},
		{name: "wide", in: u64(0), err: "syscall: got 8 bytes, want 4"},
	})
	runCases(t, mustNew(t, e, conf, 8), []decodeCase{
		{name: "getpid", in: u64(39), out: "getpid"},
		{name: "clock_nanosleep", in: u64(230), out: "clock_nanosleep"},
	})
	// After uint: decimal text.
	runCases(t, mustNew(t, e, conf, 0), []decodeCase{
		{name: "text", in: []byte("35"), out: "nanosleep"},
		{name: "text unknown", in: []byte("1000"), out: "sys_1000"},
		{name: "not a number", in: []byte("x1"), err: `syscall: bad number 0x7831`},
		{name: "empty", in: []byte(""), err: `syscall: bad number 0x (empty)`},
	})
	newErr(t, e, conf, 2, "syscall: size 2 not supported (want 4 or 8)")
}

func TestSyscallAllocs(t *testing.T) {
	d, _ := newSyscallFor("amd64", 4, false)
	in := u32(1)
	if n := testing.AllocsPerRun(100, func() { d.Decode(in) }); n != 0 {
		t.Errorf("Decode allocates %v times", n)
	}
}

// SPDX-License-Identifier: Apache-2.0

package decoder

import (
	"fmt"
	"testing"

	"github.com/kernel-exporter/kernel_exporter/config"
)

// newestSyscall is the number of the newest syscall of Linux 6.18, the same
// on x86_64 and arm64 (file_setattr, 6.17; 6.18 added none).
const newestSyscall = 469

// unassigned are the numbers up to newestSyscall that the kernel's tables
// leave free on each architecture: x86_64 skips 337-423 (the numbers the
// 32-bit ABIs' time64 calls took elsewhere); arm64 has no
// architecture-specific calls in 244-259, and none of the 32-bit-only
// calls in 295-423.
var unassigned = map[string][][2]uint64{
	"amd64": {{337, 423}},
	"arm64": {{244, 259}, {295, 423}},
}

// TestSyscallTablesComplete checks that every syscall number up to the
// newest of Linux 6.18 has its name on x86_64 and arm64, that the numbers
// the kernel leaves free have none, and the names added since the 6.1
// headers the tables are generated from.
func TestSyscallTablesComplete(t *testing.T) {
	for arch, free := range unassigned {
		d, err := newSyscallFor(arch, 8, false)
		if err != nil {
			t.Fatal(err)
		}
		isFree := func(nr uint64) bool {
			for _, r := range free {
				if nr >= r[0] && nr <= r[1] {
					return true
				}
			}
			return false
		}
		named := 0
		seen := map[string]uint64{}
		for nr := uint64(0); nr <= newestSyscall+1; nr++ {
			out, err := d.Decode(u64(nr))
			if err != nil {
				t.Fatalf("%s: Decode(%d): %v", arch, nr, err)
			}
			unnamed := string(out) == fmt.Sprintf("sys_%d", nr)
			switch {
			case nr > newestSyscall || isFree(nr):
				if !unnamed {
					t.Errorf("%s: %d is free in the kernel's table, named %q", arch, nr, out)
				}
			case unnamed:
				t.Errorf("%s: syscall %d has no name", arch, nr)
			default:
				named++
				if prev, ok := seen[string(out)]; ok {
					t.Errorf("%s: %q is both %d and %d", arch, out, prev, nr)
				}
				seen[string(out)] = nr
			}
		}
		t.Logf("%s: %d syscalls named up to %d", arch, named, newestSyscall)
	}
	for _, c := range []struct {
		arch string
		nr   uint64
		name string
	}{
		{"amd64", 335, "uretprobe"}, {"amd64", 336, "uprobe"},
		{"amd64", 451, "cachestat"}, {"arm64", 451, "cachestat"},
		{"amd64", 462, "mseal"}, {"arm64", 462, "mseal"},
		{"amd64", 467, "open_tree_attr"}, {"arm64", 467, "open_tree_attr"},
		{"amd64", 469, "file_setattr"}, {"arm64", 469, "file_setattr"},
		{"amd64", 231, "exit_group"}, {"arm64", 94, "exit_group"},
		{"amd64", 60, "exit"}, {"arm64", 93, "exit"},
		{"amd64", 17, "pread64"}, {"arm64", 67, "pread64"},
		{"amd64", 230, "clock_nanosleep"}, {"arm64", 115, "clock_nanosleep"},
	} {
		d, _ := newSyscallFor(c.arch, 8, false)
		if out, err := d.Decode(u64(c.nr)); err != nil || string(out) != c.name {
			t.Errorf("%s: Decode(%d) = %q, %v; want %q", c.arch, c.nr, out, err, c.name)
		}
	}
}

// TestSyscallCompat checks the syscall decoder under
// --compat.ebpf-exporter (Env.Compat): cloudflare/ebpf_exporter's names
// where they differ from the kernel's, the kernel's elsewhere, and
// unknown_syscall:<n> for numbers its table lacks.
func TestSyscallCompat(t *testing.T) {
	for _, c := range []struct {
		arch   string
		nr     uint64
		compat string
		kernel string
	}{
		{"amd64", 230, "clock_nanosleep_time64", "clock_nanosleep"},
		{"amd64", 17, "pread", "pread64"},
		{"amd64", 231, "exit", "exit_group"},
		{"amd64", 60, "exit", "exit"},
		{"amd64", 0, "read", "read"},
		{"amd64", 155, "pivotroot", "pivot_root"},
		{"amd64", 336, "unknown_syscall:336", "uprobe"},
		{"amd64", 469, "unknown_syscall:469", "file_setattr"},
		{"amd64", 400, "unknown_syscall:400", "sys_400"},
		{"amd64", 461, "lsm_list_modules", "lsm_list_modules"},
		{"arm64", 115, "clock_nanosleep_time64", "clock_nanosleep"},
		{"arm64", 94, "exit", "exit_group"},
		{"arm64", 67, "pread", "pread64"},
		{"arm64", 462, "unknown_syscall:462", "mseal"},
		{"arm64", 250, "unknown_syscall:250", "sys_250"},
	} {
		for _, compat := range []bool{true, false} {
			d, err := newSyscallFor(c.arch, 8, compat)
			if err != nil {
				t.Fatal(err)
			}
			want := c.kernel
			if compat {
				want = c.compat
			}
			if out, err := d.Decode(u64(c.nr)); err != nil || string(out) != want {
				t.Errorf("%s compat=%v: Decode(%d) = %q, %v; want %q", c.arch, compat, c.nr, out, err, want)
			}
		}
	}
	// Through an Env, after uint (the reference's configs chain them).
	e := NewEnv(16)
	e.Compat = true
	runCases(t, mustNew(t, e, config.Decoder{Name: "syscall"}, textInput), []decodeCase{
		{name: "ref name", in: []byte("230"), out: "clock_nanosleep_time64"},
		{name: "ref unknown", in: []byte("1000"), out: "unknown_syscall:1000"},
	})
}

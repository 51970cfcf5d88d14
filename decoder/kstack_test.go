// SPDX-License-Identifier: Apache-2.0

package decoder

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/kernel-exporter/kernel_exporter/config"
)

// fakeStacks is a stack-trace map.
type fakeStacks map[uint32][]uint64

func (f fakeStacks) Stack(id uint32) ([]uint64, error) {
	s, ok := f[id]
	if !ok {
		return nil, errors.New("key does not exist")
	}
	return s, nil
}

func TestKstackIDs(t *testing.T) {
	e := kallsymsEnv(t, testKallsyms)
	stacks := fakeStacks{
		// Innermost first, zero-terminated.
		1: {0xffffffff81000401, 0xffffffff81000310, 0xffffffff81000220, 0xffffffff81000120, 0xffffffff81000015, 0, 0, 0},
		2: {0xffffffff81000305},
		// Full (no terminator), with an unknown frame.
		3: {0xffffffffc0a01050, 0xffffffff80000000},
		4: {0, 0},
	}
	var calls atomic.Int32
	var asked string
	maps := func(name string) (StackReader, error) {
		calls.Add(1)
		asked = name
		return stacks, nil
	}
	d, err := e.New(config.Decoder{Name: "kstack", StackMap: "stacks"}, 4, maps)
	if err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 0 {
		t.Fatal("stack map resolved at build time")
	}
	runCases(t, d, []decodeCase{
		{name: "folded", in: u32(1), out: "entry_SYSCALL_64;do_syscall_64;__x64_sys_sendto;tcp_sendmsg;tcp_push_one"},
		{name: "one frame", in: u32(2), out: "tcp_sendmsg"},
		{name: "unknown frame", in: u32(3), out: "0xffffffff80000000;nf_hook_slow"},
		{name: "empty", in: u32(4), out: "[no stack]"},
		{name: "-EFAULT", in: u32(uint32(0xfffffff2)), out: "[no stack]"},
		{name: "-1", in: u32(1<<32 - 1), out: "[no stack]"},
		{name: "missing", in: u32(9), err: "kstack: stack 9: key does not exist"},
		{name: "short", in: u16(1), err: "kstack: got 2 bytes, want 4"},
	})
	if calls.Load() != 1 || asked != "stacks" {
		t.Errorf("stack map resolved %d times, name %q", calls.Load(), asked)
	}

	d, err = e.New(config.Decoder{Name: "kstack"}, 8, maps)
	if err != nil {
		t.Fatal(err)
	}
	runCases(t, d, []decodeCase{
		{name: "u64 id", in: u64(2), out: "tcp_sendmsg"},
		{name: "s64 -14", in: u64(uint64(1<<64 - 14)), out: "[no stack]"},
		{name: "zero-extended -14", in: u64(0xfffffff2), out: "[no stack]"},
		{name: "too big", in: u64(1 << 40), err: "kstack: bad stack id 1099511627776"},
	})
	if asked != "" {
		t.Errorf("default stack map asked as %q", asked)
	}
}

func TestKstackResolveErrors(t *testing.T) {
	e := kallsymsEnv(t, testKallsyms)
	// Without a StackMaps function the decoder builds, and Decode fails.
	d, err := e.New(config.Decoder{Name: "kstack"}, 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	runCases(t, d, []decodeCase{
		{name: "no maps", in: u32(1), err: "kstack: no stack-trace maps to read stack ids from"},
		{name: "no stack needs no map", in: u32(1<<32 - 1), out: "[no stack]"},
	})

	fail := true
	maps := func(name string) (StackReader, error) {
		if fail {
			return nil, errors.New("no such map")
		}
		return fakeStacks{1: {0xffffffff81000305}}, nil
	}
	d, err = e.New(config.Decoder{Name: "kstack", StackMap: "nope"}, 4, maps)
	if err != nil {
		t.Fatal(err)
	}
	runCases(t, d, []decodeCase{{name: "bad map", in: u32(1), err: `kstack: stack_map "nope": no such map`}})
	// Resolution is retried.
	fail = false
	runCases(t, d, []decodeCase{{name: "retry", in: u32(1), out: "tcp_sendmsg"}})

	d, err = e.New(config.Decoder{Name: "kstack"}, 4, func(string) (StackReader, error) { return nil, errors.New("2 stack-trace maps, set stack_map") })
	if err != nil {
		t.Fatal(err)
	}
	runCases(t, d, []decodeCase{{name: "ambiguous", in: u32(1), err: "kstack: 2 stack-trace maps, set stack_map"}})
}

func TestKstackInline(t *testing.T) {
	e := kallsymsEnv(t, testKallsyms)
	d := mustNew(t, e, config.Decoder{Name: "kstack"}, 32)
	frames := func(addrs ...uint64) []byte {
		var b []byte
		for _, a := range addrs {
			b = append(b, u64(a)...)
		}
		return b
	}
	runCases(t, d, []decodeCase{
		{name: "terminated", in: frames(0xffffffff81000401, 0xffffffff81000015, 0, 0xffffffff81000300), out: "entry_SYSCALL_64;tcp_push_one"},
		{name: "full", in: frames(0xffffffff81000401, 0xffffffff81000310, 0xffffffff81000120, 0xffffffff81000015), out: "entry_SYSCALL_64;do_syscall_64;tcp_sendmsg;tcp_push_one"},
		{name: "empty", in: frames(0, 0, 0, 0), out: "[no stack]"},
		{name: "short", in: frames(1), err: "kstack: got 8 bytes, want 32"},
	})

	for _, size := range []int{2, 12, 20} {
		newErr(t, e, config.Decoder{Name: "kstack"}, size, "kstack: size "+itoa(size)+" not supported (want 4 or 8 for a stack id, or a multiple of 8 for inline frames)")
	}
	newErr(t, e, config.Decoder{Name: "kstack"}, 0, "kstack: must be the first decoder of a chain: it reads the raw stack id or frames")

	bad := NewEnv(16)
	bad.ProcRoot = t.TempDir()
	d = mustNew(t, bad, config.Decoder{Name: "kstack"}, 16)
	runCases(t, d, []decodeCase{
		{name: "no kallsyms", in: frames(1, 0), err: "kstack: kernel symbol table " + bad.ProcRoot + "/kallsyms: no such file or directory"},
	})
}

func TestKstackRealKallsyms(t *testing.T) {
	schedule := realSymbol(t, "schedule")
	syscall := realSymbol(t, "do_syscall_64")
	d, err := NewEnv(16).New(config.Decoder{Name: "kstack"}, 4, func(string) (StackReader, error) {
		return fakeStacks{5: {schedule + 8, syscall + 0x40, 0}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	runCases(t, d, []decodeCase{{name: "real", in: u32(5), out: "do_syscall_64;schedule"}})
}

func BenchmarkKstack(b *testing.B) {
	e := kallsymsEnv(b, testKallsyms)
	d, _ := e.New(config.Decoder{Name: "kstack"}, 4, func(string) (StackReader, error) {
		return fakeStacks{1: {0xffffffff81000401, 0xffffffff81000310, 0xffffffff81000220, 0xffffffff81000120, 0xffffffff81000015, 0}}, nil
	})
	in := u32(1)
	b.ReportAllocs()
	for b.Loop() {
		d.Decode(in)
	}
}

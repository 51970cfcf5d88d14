// SPDX-License-Identifier: Apache-2.0

package decoder

import (
	"errors"
	"testing"

	"github.com/kernel-exporter/kernel_exporter/config"
)

func TestUint(t *testing.T) {
	e := NewEnv(16)
	conf := config.Decoder{Name: "uint"}
	runCases(t, mustNew(t, e, conf, 1), []decodeCase{
		{name: "zero", in: u8(0), out: "0"},
		{name: "max", in: u8(255), out: "255"},
		{name: "short", in: []byte{}, err: "uint: got 0 bytes, want 1"},
	})
	runCases(t, mustNew(t, e, conf, 2), []decodeCase{
		{name: "little-endian", in: []byte{0x01, 0x02}, out: "513"},
		{name: "max", in: u16(65535), out: "65535"},
	})
	runCases(t, mustNew(t, e, conf, 4), []decodeCase{
		{name: "42", in: []byte{0x2a, 0, 0, 0}, out: "42"},
		{name: "table end", in: u32(1023), out: "1023"},
		{name: "past table", in: u32(1024), out: "1024"},
		{name: "max", in: u32(1<<32 - 1), out: "4294967295"},
		{name: "wide", in: u64(1), err: "uint: got 8 bytes, want 4"},
	})
	runCases(t, mustNew(t, e, conf, 8), []decodeCase{
		{name: "one", in: u64(1), out: "1"},
		{name: "max", in: u64(1<<64 - 1), out: "18446744073709551615"},
	})
	for _, size := range []int{3, 5, 16} {
		newErr(t, e, conf, size, "uint: size "+itoa(size)+" not supported (want 1, 2, 4 or 8)")
	}
	newErr(t, e, conf, 0, "uint: must be the first decoder of a chain: it reads the raw 1, 2, 4 or 8-byte field")
}

func TestSmallDecimals(t *testing.T) {
	for v := uint64(0); v <= smallDecimalMax+2; v++ {
		got := appendDecimal(nil, v)
		if want := itoa(int(v)); string(got) != want {
			t.Fatalf("appendDecimal(%d) = %q", v, got)
		}
		if v <= smallDecimalMax && cap(got) != len(got) {
			t.Fatalf("shared slice for %d has spare capacity", v)
		}
	}
	if got := appendDecimal([]byte("sys_"), 7); string(got) != "sys_7" {
		t.Fatalf("appendDecimal with prefix = %q", got)
	}
}

func TestUintAllocs(t *testing.T) {
	d := mustNew(t, NewEnv(16), config.Decoder{Name: "uint"}, 4)
	in := u32(17)
	if n := testing.AllocsPerRun(100, func() { d.Decode(in) }); n != 0 {
		t.Errorf("Decode(17) allocates %v times", n)
	}
}

func BenchmarkUint(b *testing.B) {
	d := mustNew(b, NewEnv(16), config.Decoder{Name: "uint"}, 8)
	in := u64(123456789)
	b.ReportAllocs()
	for b.Loop() {
		d.Decode(in)
	}
}

// TestAppendSettled checks that a uint chain appends what DecodeSettled
// returns, after what dst holds, and fails as it does.
func TestAppendSettled(t *testing.T) {
	for _, size := range []int{1, 2, 4, 8} {
		c, err := NewEnv(0).NewChain([]config.Decoder{{Name: "uint"}}, size, nil)
		if err != nil {
			t.Fatal(err)
		}
		in := make([]byte, size)
		for i := range in {
			in[i] = byte(0x81 + i)
		}
		want, _, _ := c.DecodeSettled(in)
		got, settled, err := c.AppendSettled([]byte("x="), in)
		if err != nil || !settled || string(got) != "x="+string(want) {
			t.Errorf("size %d: AppendSettled = %q, %v, %v; want %q", size, got, settled, err, "x="+string(want))
		}
		_, _, werr := c.DecodeSettled(in[1:])
		got, _, err = c.AppendSettled([]byte("x="), in[1:])
		var de *DecodeError
		if err == nil || !errors.As(err, &de) || de.Decoder != "uint" || err.Error() != werr.Error() || string(got) != "x=" {
			t.Errorf("size %d, short input: %q, %v; want dst unchanged and %v", size, got, err, werr)
		}
	}
}

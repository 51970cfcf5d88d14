// SPDX-License-Identifier: Apache-2.0

package decoder

import (
	"testing"

	"github.com/kernel-exporter/kernel_exporter/config"
)

func TestHex(t *testing.T) {
	e := NewEnv(16)
	conf := config.Decoder{Name: "hex"}
	runCases(t, mustNew(t, e, conf, 1), []decodeCase{
		{name: "zero", in: u8(0), out: "0x0"},
		{name: "ff", in: u8(0xff), out: "0xff"},
	})
	runCases(t, mustNew(t, e, conf, 2), []decodeCase{
		{name: "value", in: []byte{0x34, 0x12}, out: "0x1234"},
	})
	runCases(t, mustNew(t, e, conf, 4), []decodeCase{
		{name: "1f", in: []byte{0x1f, 0, 0, 0}, out: "0x1f"},
		{name: "max", in: u32(0xdeadbeef), out: "0xdeadbeef"},
		{name: "short", in: []byte{1, 2}, err: "hex: got 2 bytes, want 4"},
	})
	runCases(t, mustNew(t, e, conf, 8), []decodeCase{
		{name: "kernel address", in: u64(0xffffffff81000000), out: "0xffffffff81000000"},
	})
	runCases(t, mustNew(t, e, conf, 6), []decodeCase{
		{name: "mac", in: []byte{0x00, 0x11, 0x22, 0xaa, 0xbb, 0xcc}, out: "001122aabbcc"},
	})
	runCases(t, mustNew(t, e, conf, 16), []decodeCase{
		{name: "raw", in: []byte("0123456789abcdef"), out: "30313233343536373839616263646566"},
	})
	newErr(t, e, conf, -1, "hex: field size out of range: -1 bytes (want 0 to 4096)")
	// After another decoder: the text's bytes.
	runCases(t, mustNew(t, e, conf, 0), []decodeCase{
		{name: "text", in: []byte("AZ"), out: "415a"},
		{name: "empty", in: nil, out: ""},
		{name: "four chars", in: []byte("abcd"), out: "61626364"},
	})
}

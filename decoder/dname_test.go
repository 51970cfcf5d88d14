// SPDX-License-Identifier: Apache-2.0

package decoder

import (
	"strings"
	"testing"

	"github.com/kernel-exporter/kernel_exporter/config"
)

func TestDname(t *testing.T) {
	d := mustNew(t, NewEnv(16), config.Decoder{Name: "dname"}, 32)
	label63 := strings.Repeat("a", 63)
	long := []byte{}
	for i := 0; i < 4; i++ {
		long = append(long, 63)
		long = append(long, label63...)
	}
	long = append(long, 0)
	ok254 := []byte{}
	for i := 0; i < 3; i++ {
		ok254 = append(ok254, 63)
		ok254 = append(ok254, label63...)
	}
	ok254 = append(ok254, 61)
	ok254 = append(ok254, strings.Repeat("b", 61)...)
	ok254 = append(ok254, 0)
	runCases(t, d, []decodeCase{
		{name: "example.com", in: []byte("\x07example\x03com\x00"), out: "example.com"},
		{name: "trailing bytes", in: []byte("\x03www\x07example\x03com\x00\xff\xff\x01"), out: "www.example.com"},
		{name: "root", in: []byte("\x00\x00\x00"), out: "."},
		{name: "one label", in: []byte("\x09localhost\x00"), out: "localhost"},
		{name: "escapes", in: []byte("\x04a.b\\\x03\x00 \xff\x00"), out: `a\.b\\.\000\032\255`},
		{name: "63", in: append(append([]byte{63}, label63...), 0), out: label63},
		{name: "255 bytes", in: ok254, out: strings.Repeat(label63+".", 3) + strings.Repeat("b", 61)},
		{name: "empty", in: nil, err: "dname: name not terminated by a zero-length label"},
		{name: "unterminated", in: []byte("\x03com"), err: "dname: name not terminated by a zero-length label"},
		{name: "past end", in: []byte("\x07exam"), err: "dname: label at offset 0 runs past the end (5 bytes)"},
		{name: "64", in: append(append([]byte{64}, strings.Repeat("a", 64)...), 0), err: "dname: label length 64 at offset 0 exceeds 63"},
		{name: "pointer", in: []byte("\x03www\xc0\x0c"), err: "dname: compression pointer at offset 4"},
		{name: "too long", in: long, err: "dname: name is 257 bytes long, longer than 255"},
	})
}

// SPDX-License-Identifier: Apache-2.0

package decoder

import (
	"testing"

	"github.com/kernel-exporter/kernel_exporter/config"
)

func TestString(t *testing.T) {
	d := mustNew(t, NewEnv(16), config.Decoder{Name: "string"}, 16)
	runCases(t, d, []decodeCase{
		{name: "comm", in: []byte("systemd\x00\x00\x00\x00\x00\x00\x00\x00\x00"), out: "systemd"},
		{name: "garbage after nul", in: []byte("sh\x00xyz\x00"), out: "sh"},
		{name: "no nul", in: []byte("kworker/u16:3-ev"), out: "kworker/u16:3-ev"},
		{name: "empty", in: []byte("\x00abc"), out: ""},
		{name: "utf-8", in: []byte("héllo\x00"), out: "héllo"},
		{name: "invalid utf-8", in: []byte("a\xffb\x00"), out: "a\uFFFDb"},
	})
}

func TestStringNoCopy(t *testing.T) {
	d := mustNew(t, NewEnv(16), config.Decoder{Name: "string"}, 8)
	in := []byte("abc\x00\x00\x00\x00\x00")
	if n := testing.AllocsPerRun(100, func() { d.Decode(in) }); n != 0 {
		t.Errorf("Decode allocates %v times", n)
	}
	out, _ := d.Decode(in)
	if cap(out) != 3 {
		t.Errorf("result has capacity %d: appending to it would overwrite the input", cap(out))
	}
}

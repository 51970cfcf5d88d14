// SPDX-License-Identifier: Apache-2.0

package decoder

import (
	"testing"

	"github.com/kernel-exporter/kernel_exporter/config"
)

func TestInetIP(t *testing.T) {
	e := NewEnv(16)
	conf := config.Decoder{Name: "inet_ip"}
	runCases(t, mustNew(t, e, conf, 4), []decodeCase{
		{name: "v4", in: []byte{192, 0, 2, 1}, out: "192.0.2.1"},
		{name: "any", in: []byte{0, 0, 0, 0}, out: "0.0.0.0"},
		{name: "loopback", in: []byte{127, 0, 0, 1}, out: "127.0.0.1"},
		{name: "short", in: []byte{1, 2, 3}, err: "inet_ip: got 3 bytes, want 4"},
	})
	v6 := func(b ...byte) []byte { return append(make([]byte, 0, 16), b...) }
	runCases(t, mustNew(t, e, conf, 16), []decodeCase{
		{name: "v6", in: v6(0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1), out: "2001:db8::1"},
		{name: "any", in: make([]byte, 16), out: "::"},
		{name: "loopback", in: v6(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1), out: "::1"},
		{name: "v4-mapped", in: v6(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 1, 2, 3), out: "10.1.2.3"},
		{name: "link-local", in: v6(0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55), out: "fe80::211:22ff:fe33:4455"},
		{name: "short", in: []byte{1, 2, 3, 4}, err: "inet_ip: got 4 bytes, want 16"},
	})
	newErr(t, e, conf, 8, "inet_ip: size 8 not supported (want 4 or 16)")
	newErr(t, e, conf, 0, "inet_ip: must be the first decoder of a chain: it reads the raw 4 or 16-byte field")
}

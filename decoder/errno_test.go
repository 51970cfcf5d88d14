// SPDX-License-Identifier: Apache-2.0

package decoder

import (
	"testing"

	"github.com/kernel-exporter/kernel_exporter/config"
)

func TestErrno(t *testing.T) {
	e := NewEnv(16)
	conf := config.Decoder{Name: "errno"}
	runCases(t, mustNew(t, e, conf, 4), []decodeCase{
		{name: "zero", in: u32(0), out: "0"},
		{name: "EPERM", in: u32(1), out: "EPERM"},
		{name: "ENOENT", in: u32(2), out: "ENOENT"},
		{name: "EAGAIN", in: u32(11), out: "EAGAIN"},
		{name: "negative", in: u32(uint32(0xfffffff5)), out: "EAGAIN"}, // -11
		{name: "EPIPE", in: u32(32), out: "EPIPE"},
		{name: "ECONNRESET", in: u32(104), out: "ECONNRESET"},
		{name: "EOPNOTSUPP", in: u32(95), out: "EOPNOTSUPP"},
		{name: "EHWPOISON", in: u32(133), out: "EHWPOISON"},
		{name: "EUCLEAN", in: u32(117), out: "EUCLEAN"},
		{name: "134", in: u32(134), out: "134"},
		{name: "ERESTARTSYS", in: u32(uint32(0xfffffe00)), out: "ERESTARTSYS"}, // -512
		{name: "ENOTSUPP", in: u32(524), out: "ENOTSUPP"},
		{name: "hole", in: u32(520), out: "520"},
		{name: "unknown", in: u32(1000), out: "1000"},
		{name: "unknown negative", in: u32(uint32(0xfffffc18)), out: "1000"}, // -1000
		{name: "short", in: u16(1), err: "errno: got 2 bytes, want 4"},
	})
	runCases(t, mustNew(t, e, conf, 1), []decodeCase{
		{name: "s8", in: u8(0xfe), out: "ENOENT"},
		{name: "'1' is 49", in: []byte("1"), out: "EUNATCH"},
	})
	runCases(t, mustNew(t, e, conf, 2), []decodeCase{
		{name: "s16", in: u16(0xfff2), out: "EFAULT"},
	})
	runCases(t, mustNew(t, e, conf, 8), []decodeCase{
		{name: "s64", in: u64(1<<64 - 110), out: "ETIMEDOUT"},
		{name: "min int64", in: u64(1 << 63), out: "9223372036854775808"},
	})
	// After uint: decimal text, and a leading minus for %d-style input.
	runCases(t, mustNew(t, e, conf, 0), []decodeCase{
		{name: "text", in: []byte("1"), out: "EPERM"},
		{name: "text negative", in: []byte("-2"), out: "ENOENT"},
		{name: "text zero", in: []byte("0"), out: "0"},
		{name: "bad", in: []byte("-"), err: `errno: bad number 0x2d`},
		{name: "bad2", in: []byte("--2"), err: `errno: bad number 0x2d2d32`},
	})
	newErr(t, e, conf, 3, "errno: size 3 not supported (want 1, 2, 4 or 8)")
}

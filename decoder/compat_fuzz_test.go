// SPDX-License-Identifier: Apache-2.0

package decoder

import (
	"encoding/binary"
	"testing"

	"github.com/kernel-exporter/kernel_exporter/config"
)

// FuzzCompatDecoders is FuzzDecoders's check (checkDecode: no panic, UTF-8
// output, errors that name the decoder and do not quote the input) for the
// decoders that print differently under --compat.ebpf-exporter
// (Env.Compat): errno, ifname, ksym, hex, kstack, regexp, dname and
// syscall, each first in its chain, on a raw field or on text.
func FuzzCompatDecoders(f *testing.F) {
	names := []string{"errno", "ifname", "ksym", "hex", "kstack", "regexp", "dname", "syscall"}
	e := fuzzEnv(f)
	e.Compat = true
	stacks := func(string) (StackReader, error) { return fuzzStacks{}, nil }
	u32 := binary.NativeEndian.AppendUint32
	u64 := binary.NativeEndian.AppendUint64
	f.Add(byte(0), 0, []byte("512"), "")
	f.Add(byte(1), 8, u64(nil, 1|1<<40), "")
	f.Add(byte(2), 8, u64(nil, 0xffffffff80000000), "")
	f.Add(byte(3), 4, u32(nil, 0x1f), "")
	f.Add(byte(4), 24, append(u64(u64(nil, 0xffffffff81000305), 7), 0, 0, 0, 0, 0, 0, 0, 0), "")
	f.Add(byte(5), 0, []byte("sys_enter_read"), "^(a)(b)\n^sys_(\\w+)\ntcp")
	f.Add(byte(6), 16, []byte("\x07example\x03com\x00\x00\x00"), "")
	f.Add(byte(6), 5, []byte("\x07exa\xff"), "")
	f.Add(byte(7), 0, []byte("230"), "")
	f.Fuzz(func(t *testing.T, pick byte, size int, in []byte, regexps string) {
		conf := config.Decoder{Name: names[int(pick)%len(names)]}
		if conf.Name == "regexp" {
			conf.Regexps = splitLines(regexps)
		}
		chain, err := e.NewChain([]config.Decoder{conf}, size, stacks)
		if err != nil {
			return
		}
		checkDecode(t, chain, in)
		if size > 0 && size <= MaxSize && len(in) != size {
			checkDecode(t, chain, append(append([]byte{}, in...), make([]byte, max(size-len(in), 0))...)[:size])
		}
	})
}

// splitLines splits s at newlines.
func splitLines(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

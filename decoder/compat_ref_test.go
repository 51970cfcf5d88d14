// SPDX-License-Identifier: Apache-2.0

package decoder

import (
	"net"
	"strconv"
	"testing"

	"github.com/kernel-exporter/kernel_exporter/config"
	"github.com/kernel-exporter/kernel_exporter/internal/testenv"
)

// TestCompatErrno checks errno under --compat.ebpf-exporter (Env.Compat):
// golang.org/x/sys's names, and cloudflare/ebpf_exporter's
// "unknown:<n>" for 0, the kernel-internal values and values without a
// name, where this exporter prints names or decimals.
func TestCompatErrno(t *testing.T) {
	for _, compat := range []bool{true, false} {
		e, want := compatEnv(compat)
		conf := config.Decoder{Name: "errno"}
		runCases(t, mustNew(t, e, conf, textInput), []decodeCase{
			{name: "ENOENT", in: []byte("2"), out: "ENOENT"},
			{name: "EAGAIN", in: []byte("11"), out: "EAGAIN"},
			{name: "zero", in: []byte("0"), out: want("unknown:0", "0")},
			{name: "ERESTARTSYS", in: []byte("512"), out: want("unknown:512", "ERESTARTSYS")},
			{name: "no name", in: []byte("4000"), out: want("unknown:4000", "4000")},
			{name: "huge", in: []byte("18446744073709551615"), out: want("unknown:18446744073709551615", "18446744073709551615")},
		})
		runCases(t, mustNew(t, e, conf, 4), []decodeCase{
			{name: "raw -2", in: u32(1<<32 - 2), out: "ENOENT"},
			{name: "raw 700", in: u32(700), out: want("unknown:700", "700")},
		})
	}
}

// TestCompatIfname checks ifname under Env.Compat: "unknown:<index>" for
// an index without an interface, and only the first 4 bytes of an 8-byte
// field read, as cloudflare/ebpf_exporter does.
func TestCompatIfname(t *testing.T) {
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		testenv.SkipOrFail(t, "no loopback interface: %v", err)
	}
	for _, compat := range []bool{true, false} {
		e, want := compatEnv(compat)
		runCases(t, mustNew(t, e, config.Decoder{Name: "ifname"}, 4), []decodeCase{
			{name: "lo", in: u32(uint32(lo.Index)), out: "lo"},
			{name: "zero", in: u32(0), out: want("unknown:0", "0")},
			{name: "none", in: u32(1 << 30), out: want("unknown:1073741824", "1073741824")},
		})
		if nativeIsLittle() {
			runCases(t, mustNew(t, e, config.Decoder{Name: "ifname"}, 8), []decodeCase{
				{name: "high bits", in: u64(uint64(lo.Index) | 1<<40), out: want("lo", strconv.FormatUint(uint64(lo.Index)|1<<40, 10))},
			})
		}
	}
}

// TestCompatKsym checks ksym under Env.Compat: an address below kallsyms
// prints as cloudflare/ebpf_exporter prints it, a module symbol keeps its
// module after a tab, and an address past the last symbol is that
// symbol's, as the reference's kallsyms reader has them.
func TestCompatKsym(t *testing.T) {
	e := kallsymsEnv(t, testKallsyms)
	e.Compat = true
	runCases(t, mustNew(t, e, config.Decoder{Name: "ksym"}, 8), []decodeCase{
		{name: "known", in: u64(0xffffffff81000305), out: "tcp_sendmsg"},
		{name: "padding, as the reference names it", in: u64(0xffffffff810002f4), out: "__pfx_tcp_sendmsg"},
		{name: "before first", in: u64(0xffffffff80000000), out: "unknown_addr:0xffffffff80000000"},
		{name: "zero", in: u64(0), out: "unknown_addr:0x0"},
		{name: "module", in: u64(0xffffffffc0a01050), out: "nf_hook_slow\t[nf_tables]"},
		{name: "past last", in: u64(0xffffffffc0a01101), out: "nft_do_chain\t[nf_tables]"},
	})
}

// nativeIsLittle reports whether the host is little-endian.
func nativeIsLittle() bool {
	v, _ := nativeUint([]byte{1, 0})
	return v == 1
}

// TestCompatHex checks hex under Env.Compat: an integer field prints as
// its raw bytes, as cloudflare/ebpf_exporter prints it.
func TestCompatHex(t *testing.T) {
	e := NewEnv(16)
	e.Compat = true
	in := u32(0x1f)
	want := "1f000000"
	if !nativeIsLittle() {
		want = "0000001f"
	}
	runCases(t, mustNew(t, e, config.Decoder{Name: "hex"}, 4), []decodeCase{{name: "u32", in: in, out: want}})
	runCases(t, mustNew(t, e, config.Decoder{Name: "hex"}, 6), []decodeCase{{name: "mac", in: []byte{0, 0x11, 0x22, 0x33, 0x44, 0x55}, out: "001122334455"}})
	runCases(t, mustNew(t, e, config.Decoder{Name: "hex"}, textInput), []decodeCase{{name: "text", in: []byte("42"), out: "3432"}})
	runCases(t, mustNew(t, NewEnv(16), config.Decoder{Name: "hex"}, 4), []decodeCase{{name: "u32 default", in: in, out: "0x1f"}})
}

// TestCompatKstack checks kstack under Env.Compat: frames innermost
// first, one per line, module symbols with their module after a tab, "??"
// outside kallsyms, and "" for no frames.
func TestCompatKstack(t *testing.T) {
	frames := func(addrs ...uint64) []byte {
		var b []byte
		for _, a := range addrs {
			b = append(b, u64(a)...)
		}
		return b
	}
	in := frames(0xffffffffc0a01050, 0xffffffff81000305, 0xffffffff81000105, 0xffffffff80000000, 0)
	for _, compat := range []bool{true, false} {
		e := kallsymsEnv(t, testKallsyms)
		e.Compat = compat
		want, none := "0xffffffff80000000;do_syscall_64;tcp_sendmsg;nf_hook_slow", string(noStack)
		if compat {
			want, none = "nf_hook_slow\t[nf_tables]\ntcp_sendmsg\ndo_syscall_64\n??", ""
		}
		runCases(t, mustNew(t, e, config.Decoder{Name: "kstack"}, 40), []decodeCase{
			{name: "stack", in: in, out: want},
			{name: "empty", in: make([]byte, 40), out: none},
		})
	}
}

// TestCompatRegexp checks regexp under Env.Compat: the first pattern that
// matches with at most one group gives its group, or its match.
func TestCompatRegexp(t *testing.T) {
	conf := config.Decoder{Name: "regexp", Regexps: []string{`^(a)(b)`, `^sys_(\w+)`, `tcp`, `^(x)?y`}}
	e := NewEnv(16)
	e.Compat = true
	runCases(t, mustNew(t, e, conf, textInput), []decodeCase{
		{name: "group", in: []byte("sys_enter_read"), out: "enter_read"},
		{name: "match", in: []byte("tcp_sendmsg"), out: "tcp"},
		{name: "two groups passed over", in: []byte("abtcp"), out: "tcp"},
		{name: "two groups only", in: []byte("ab"), err: "key skipped by decoder"},
		{name: "unset group", in: []byte("y"), out: ""},
		{name: "none", in: []byte("udp"), err: "key skipped by decoder"},
	})
	runCases(t, mustNew(t, NewEnv(16), conf, textInput), []decodeCase{
		{name: "filter keeps the text", in: []byte("tcp_sendmsg"), out: "tcp_sendmsg"},
	})
}

// TestCompatDname checks dname under Env.Compat: the final dot kept, one
// dot per zero byte of padding, and a truncated name left as it is.
func TestCompatDname(t *testing.T) {
	e := NewEnv(16)
	e.Compat = true
	name := []byte("\x07example\x03com\x00")
	runCases(t, mustNew(t, e, config.Decoder{Name: "dname"}, textInput), []decodeCase{
		{name: "name", in: name, out: "example.com."},
		{name: "padded", in: append(append([]byte{}, name...), 0, 0), out: "example.com..."},
		{name: "root", in: []byte{0}, out: ""},
		{name: "empty", in: []byte{}, out: "."},
		{name: "truncated", in: []byte("\x07exa"), out: "\x07exa"},
	})
	runCases(t, mustNew(t, NewEnv(16), config.Decoder{Name: "dname"}, textInput), []decodeCase{
		{name: "default", in: name, out: "example.com"},
	})
}

// compatEnv returns an Env with Compat set to compat, and a function that
// picks, of the reference's output c and this exporter's k, the one that
// Env must print.
func compatEnv(compat bool) (*Env, func(c, k string) string) {
	e := NewEnv(16)
	e.Compat = compat
	return e, func(c, k string) string {
		if compat {
			return c
		}
		return k
	}
}

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
		e := NewEnv(16)
		e.Compat = compat
		want := func(c, k string) string {
			if compat {
				return c
			}
			return k
		}
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
		e := NewEnv(16)
		e.Compat = compat
		want := func(c, k string) string {
			if compat {
				return c
			}
			return k
		}
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

// TestCompatKsym checks ksym under Env.Compat: an address outside
// kallsyms prints as cloudflare/ebpf_exporter prints it.
func TestCompatKsym(t *testing.T) {
	e := kallsymsEnv(t, testKallsyms)
	e.Compat = true
	runCases(t, mustNew(t, e, config.Decoder{Name: "ksym"}, 8), []decodeCase{
		{name: "known", in: u64(0xffffffff81000305), out: "tcp_sendmsg"},
		{name: "before first", in: u64(0xffffffff80000000), out: "unknown_addr:0xffffffff80000000"},
		{name: "zero", in: u64(0), out: "unknown_addr:0x0"},
	})
}

// nativeIsLittle reports whether the host is little-endian.
func nativeIsLittle() bool {
	v, _ := nativeUint([]byte{1, 0})
	return v == 1
}

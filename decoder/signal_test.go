// SPDX-License-Identifier: Apache-2.0

package decoder

import (
	"syscall"
	"testing"

	"github.com/kernel-exporter/kernel_exporter/config"
	"golang.org/x/sys/unix"
)

func TestSignal(t *testing.T) {
	e := NewEnv(16)
	conf := config.Decoder{Name: "signal"}
	runCases(t, mustNew(t, e, conf, 4), []decodeCase{
		{name: "zero", in: u32(0), out: "0"},
		{name: "SIGHUP", in: u32(1), out: "SIGHUP"},
		{name: "SIGABRT not SIGIOT", in: u32(6), out: "SIGABRT"},
		{name: "SIGKILL", in: u32(9), out: "SIGKILL"},
		{name: "SIGSEGV", in: u32(11), out: "SIGSEGV"},
		{name: "SIGTERM", in: u32(15), out: "SIGTERM"},
		{name: "SIGSTKFLT", in: u32(16), out: "SIGSTKFLT"},
		{name: "SIGCHLD", in: u32(17), out: "SIGCHLD"},
		{name: "SIGIO not SIGPOLL", in: u32(29), out: "SIGIO"},
		{name: "SIGSYS", in: u32(31), out: "SIGSYS"},
		{name: "SIGRTMIN", in: u32(32), out: "SIGRTMIN"},
		{name: "glibc SIGRTMIN", in: u32(34), out: "SIGRTMIN+2"},
		{name: "SIGRTMAX", in: u32(64), out: "SIGRTMIN+32"},
		{name: "above SIGRTMAX", in: u32(65), out: "65"},
		{name: "negative", in: u32(uint32(0xffffffff)), out: "-1"},
		{name: "short", in: u16(9), err: "signal: got 2 bytes, want 4"},
	})
	runCases(t, mustNew(t, e, conf, 1), []decodeCase{
		{name: "u8", in: u8(9), out: "SIGKILL"},
		{name: "s8", in: u8(0xff), out: "-1"},
	})
	runCases(t, mustNew(t, e, conf, 2), []decodeCase{{name: "u16", in: u16(17), out: "SIGCHLD"}})
	runCases(t, mustNew(t, e, conf, 8), []decodeCase{
		{name: "u64", in: u64(40), out: "SIGRTMIN+8"},
		{name: "min int64", in: u64(1 << 63), out: "-9223372036854775808"},
	})
	// After uint: decimal text.
	runCases(t, mustNew(t, e, conf, 0), []decodeCase{
		{name: "text", in: []byte("9"), out: "SIGKILL"},
		{name: "text realtime", in: []byte("33"), out: "SIGRTMIN+1"},
		{name: "text zero", in: []byte("0"), out: "0"},
		{name: "text big", in: []byte("4294967295"), out: "4294967295"},
		{name: "text negative", in: []byte("-9"), out: "-9"},
		{name: "bad", in: []byte("-"), err: "signal: bad number 0x2d"},
		{name: "bad2", in: []byte("SIGKILL"), err: "signal: bad number 0x5349474b494c4c"},
	})
	newErr(t, e, conf, 3, "signal: size 3 not supported (want 1, 2, 4 or 8)")
}

// TestSignalNamesMatchUnix checks the table against golang.org/x/sys's
// names for this architecture's kernel headers.
func TestSignalNamesMatchUnix(t *testing.T) {
	for n := 1; n < sigRTMin; n++ {
		want := unix.SignalName(syscall.Signal(n))
		if got := string(signalNames[n]); got != want {
			t.Errorf("signal %d: %q, x/sys/unix says %q", n, got, want)
		}
	}
}

// TestSignalDecodeNoAlloc: names are shared slices, as in the errno decoder.
func TestSignalDecodeNoAlloc(t *testing.T) {
	d := mustNew(t, NewEnv(16), config.Decoder{Name: "signal"}, 4)
	in := u32(17)
	if n := testing.AllocsPerRun(100, func() { _, _ = d.Decode(in) }); n != 0 {
		t.Errorf("Decode(SIGCHLD) allocates %v times", n)
	}
}

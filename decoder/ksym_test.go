// SPDX-License-Identifier: Apache-2.0

package decoder

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/kernel-exporter/kernel_exporter/config"

	"github.com/kernel-exporter/kernel_exporter/internal/testenv"
)

// testKallsyms is a small kallsyms file: out of order (modules first),
// with aliases, a percpu symbol at 0, a malformed line, a module suffix, a
// function's padding (__pfx_) and a kCFI preamble (__cfi_).
const testKallsyms = `ffffffffc0a01100 t nft_do_chain	[nf_tables]
ffffffffc0a01000 t nf_hook_slow	[nf_tables]
0000000000000000 A fixed_percpu_data
ffffffff81000000 t local_alias
ffffffff81000000 T __pi__text
ffffffff81000000 T _stext
ffffffff81000010 T entry_SYSCALL_64
ffffffff81000100 t do_syscall_64
ffffffff81000200 T __x64_sys_sendto
not a symbol line
ffffffff810002f0 t __pfx_tcp_sendmsg
ffffffff81000300 T tcp_sendmsg
ffffffff810003f0 t __cfi_tcp_push_one
ffffffff81000400 T tcp_push_one
ffffffff81000500 W weak_func
ffffffff81000600 U undefined_sym
ffffffff81000700 T _etext
`

func kallsymsEnv(t testing.TB, content string) *Env {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, dir+"/kallsyms", content)
	e := NewEnv(16)
	e.ProcRoot = dir
	return e
}

func TestKsym(t *testing.T) {
	e := kallsymsEnv(t, testKallsyms)
	d := mustNew(t, e, config.Decoder{Name: "ksym"}, 8)
	cases := []decodeCase{
		{name: "exact", in: u64(0xffffffff81000300), out: "tcp_sendmsg"},
		{name: "inside", in: u64(0xffffffff81000305), out: "tcp_sendmsg"},
		{name: "local", in: u64(0xffffffff810001ff), out: "do_syscall_64"},
		{name: "padding: the function before", in: u64(0xffffffff810002f4), out: "__x64_sys_sendto"},
		{name: "kCFI preamble: the function before", in: u64(0xffffffff810003f0), out: "tcp_sendmsg"},
		{name: "weak", in: u64(0xffffffff81000501), out: "weak_func"},
		{name: "undefined skipped", in: u64(0xffffffff81000600), out: "weak_func"},
		{name: "alias: global, fewest underscores", in: u64(0xffffffff81000000), out: "_stext"},
		{name: "module", in: u64(0xffffffffc0a01050), out: "nf_hook_slow"},
		{name: "last exact", in: u64(0xffffffffc0a01100), out: "nft_do_chain"},
		{name: "past last", in: u64(0xffffffffc0a01101), out: "0xffffffffc0a01101"},
		{name: "before first", in: u64(0xffffffff80000000), out: "0xffffffff80000000"},
		{name: "zero", in: u64(0), out: "0x0"},
		{name: "short", in: u32(1), err: "ksym: got 4 bytes, want 8"},
	}
	runCases(t, d, cases)
	in := u64(0xffffffff81000305)
	if n := testing.AllocsPerRun(100, func() { d.Decode(in) }); n != 0 {
		t.Errorf("Decode allocates %v times", n)
	}

	newErr(t, e, config.Decoder{Name: "ksym"}, 4, "ksym: size 4 not supported (want 8)")
	newErr(t, e, config.Decoder{Name: "ksym"}, 0, "ksym: must be the first decoder of a chain: it reads the raw 8-byte field")
}

func TestKsymErrors(t *testing.T) {
	dir := t.TempDir()
	e := NewEnv(16)
	e.ProcRoot = dir
	// The file is read lazily: building the decoder succeeds.
	d := mustNew(t, e, config.Decoder{Name: "ksym"}, 8)
	runCases(t, d, []decodeCase{
		{name: "missing", in: u64(1), err: "ksym: kernel symbol table " + dir + "/kallsyms: no such file or directory"},
	})

	e = kallsymsEnv(t, "0000000000000000 T schedule\n0000000000000000 t foo\t[mod]\n")
	runCases(t, mustNew(t, e, config.Decoder{Name: "ksym"}, 8), []decodeCase{
		{name: "restricted", in: u64(1), err: "ksym: " + e.ProcRoot + "/kallsyms: all symbol addresses are zero (kernel.kptr_restrict, or not running as root?)"},
	})

	e = kallsymsEnv(t, "")
	runCases(t, mustNew(t, e, config.Decoder{Name: "ksym"}, 8), []decodeCase{
		{name: "empty", in: u64(1), err: "ksym: " + e.ProcRoot + "/kallsyms: no symbols"},
	})
}

func TestParseKallsyms(t *testing.T) {
	k, err := parseKallsymsSkip([]byte(testKallsyms), false, isPadding)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		addr uint64
		name string
	}{
		{0xffffffff81000000, "_stext"},
		{0xffffffff81000010, "entry_SYSCALL_64"},
		{0xffffffff81000100, "do_syscall_64"},
		{0xffffffff81000200, "__x64_sys_sendto"},
		{0xffffffff81000300, "tcp_sendmsg"},
		{0xffffffff81000400, "tcp_push_one"},
		{0xffffffff81000500, "weak_func"},
		{0xffffffff81000700, "_etext"},
		{0xffffffffc0a01000, "nf_hook_slow"},
		{0xffffffffc0a01100, "nft_do_chain"},
	}
	if len(k.addrs) != len(want) {
		t.Fatalf("got %d symbols, want %d", len(k.addrs), len(want))
	}
	for i, w := range want {
		name, ok := k.lookup(w.addr)
		if k.addrs[i] != w.addr || !ok || string(name) != w.name {
			t.Errorf("symbol %d = %#x %q, want %#x %q", i, k.addrs[i], name, w.addr, w.name)
		}
		if cap(name) != len(name) {
			t.Errorf("%q: result has spare capacity", name)
		}
	}
	// No trailing newline, CRLF-free last line.
	k, err = parseKallsyms([]byte("ffffffff81000000 T a\nffffffff81000010 T b"))
	if err != nil || len(k.addrs) != 2 {
		t.Fatalf("no final newline: %v, %d symbols", err, len(k.addrs))
	}
}

func TestParseHexPrefix(t *testing.T) {
	for in, want := range map[string]struct {
		v uint64
		n int
	}{
		"ffffffff821fb620 T": {0xffffffff821fb620, 16},
		"00AbC ":             {0xabc, 5},
		"x":                  {0, 0},
		"":                   {0, 0},
	} {
		if v, n := parseHexPrefix([]byte(in)); v != want.v || n != want.n {
			t.Errorf("parseHexPrefix(%q) = %#x, %d", in, v, n)
		}
	}
}

// realSymbol returns the address of a global text symbol in /proc/kallsyms,
// skipping the test if addresses are hidden.
func realSymbol(t *testing.T, name string) uint64 {
	t.Helper()
	f, err := os.Open("/proc/kallsyms")
	if err != nil {
		testenv.SkipOrFail(t, "cannot read kernel symbols: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 3 && fields[1] == "T" && fields[2] == name {
			addr, err := strconv.ParseUint(fields[0], 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			if addr == 0 {
				testenv.SkipOrFail(t, "/proc/kallsyms hides addresses (not root, or no CAP_SYSLOG?)")
			}
			return addr
		}
	}
	t.Fatalf("no %s in /proc/kallsyms", name)
	return 0
}

func TestKsymRealKallsyms(t *testing.T) {
	addr := realSymbol(t, "schedule")
	d := mustNew(t, NewEnv(16), config.Decoder{Name: "ksym"}, 8)
	runCases(t, d, []decodeCase{
		{name: "schedule", in: u64(addr), out: "schedule"},
		{name: "schedule+4", in: u64(addr + 4), out: "schedule"},
	})
}

func BenchmarkParseKallsyms(b *testing.B) {
	data, err := os.ReadFile("/proc/kallsyms")
	if err != nil {
		b.Skip(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := parseKallsyms(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkKsym(b *testing.B) {
	e := kallsymsEnv(b, testKallsyms)
	d := mustNew(b, e, config.Decoder{Name: "ksym"}, 8)
	in := u64(0xffffffff81000305)
	b.ReportAllocs()
	for b.Loop() {
		d.Decode(in)
	}
}

func BenchmarkKallsymsLookup(b *testing.B) {
	data, err := os.ReadFile("/proc/kallsyms")
	if err != nil {
		b.Skip(err)
	}
	k, err := parseKallsyms(data)
	if err != nil {
		b.Skip(err)
	}
	addr := k.addrs[len(k.addrs)/3] + 5
	b.ReportAllocs()
	for b.Loop() {
		k.lookup(addr)
	}
}

// SPDX-License-Identifier: Apache-2.0

package decoder

import (
	"encoding/binary"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/kernel-exporter/kernel_exporter/config"
)

// decodeCase is one row of a table-driven Decode test: the decoder turns in
// into out, or fails with exactly err.
type decodeCase struct {
	name string
	in   []byte
	out  string
	err  string
}

// runCases checks each case against d.
func runCases(t *testing.T, d Decoder, cases []decodeCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Helper()
			out, err := d.Decode(c.in)
			if c.err != "" {
				if err == nil || err.Error() != c.err {
					t.Fatalf("Decode(% x) = %q, %v; want error %q", c.in, out, err, c.err)
				}
				return
			}
			if err != nil || string(out) != c.out {
				t.Fatalf("Decode(% x) = %q, %v; want %q", c.in, out, err, c.out)
			}
		})
	}
}

// mustNew builds a decoder or fails the test.
func mustNew(t testing.TB, e *Env, conf config.Decoder, size int) Decoder {
	t.Helper()
	d, err := e.New(conf, size, nil)
	if err != nil {
		t.Fatalf("New(%+v, %d): %v", conf, size, err)
	}
	return d
}

// newErr checks that building conf with size fails with exactly want.
func newErr(t *testing.T, e *Env, conf config.Decoder, size int, want string) {
	t.Helper()
	d, err := e.New(conf, size, nil)
	if err == nil || err.Error() != want {
		t.Fatalf("New(%+v, %d) = %v, %v; want error %q", conf, size, d, err, want)
	}
}

func u8(v uint8) []byte   { return []byte{v} }
func u16(v uint16) []byte { return binary.NativeEndian.AppendUint16(nil, v) }
func u32(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }
func u64(v uint64) []byte { return binary.NativeEndian.AppendUint64(nil, v) }

func TestNewEnv(t *testing.T) {
	e := NewEnv(0)
	if e.ProcRoot != "/proc" || e.SysRoot != "/sys" || e.CacheSize != 0 {
		t.Fatalf("NewEnv(0) = %+v", e)
	}
	if got := e.cacheSize(); got != DefaultCacheSize {
		t.Fatalf("cacheSize() = %d, want %d", got, DefaultCacheSize)
	}
	if got := NewEnv(7).deviceCache().Len(); got != 0 {
		t.Fatalf("new cache has %d entries", got)
	}
}

func TestKnownNames(t *testing.T) {
	const want = "cgroup, dname, errno, hex, ifname, inet_ip, kstack, ksym, kube_container, kube_namespace, kube_pod, majorminor, pci_class, pci_device, pci_subclass, pci_vendor, regexp, signal, static_map, string, syscall, uint"
	if got := knownNames(); got != want {
		t.Fatalf("knownNames() = %q, want %q", got, want)
	}
}

func TestUnknownDecoder(t *testing.T) {
	_, err := NewEnv(16).New(config.Decoder{Name: "nope"}, 4, nil)
	const want = `unknown decoder "nope" (known: cgroup, dname, errno, hex, ifname, inet_ip, kstack, ksym, kube_container, kube_namespace, kube_pod, majorminor, pci_class, pci_device, pci_subclass, pci_vendor, regexp, signal, static_map, string, syscall, uint)`
	if err == nil || err.Error() != want {
		t.Fatalf("New(nope) error = %v, want %q", err, want)
	}
	if !errors.Is(err, ErrUnknown) {
		t.Fatalf("error %v does not wrap ErrUnknown", err)
	}
}

func TestNewChain(t *testing.T) {
	e := NewEnv(16)
	sm := map[string]string{"0": "read", "1": "write"}
	chain, err := e.NewChain([]config.Decoder{{Name: "uint"}, {Name: "static_map", StaticMap: sm}}, 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	for in, want := range map[uint32]string{0: "read", 1: "write"} {
		if got, err := chain.Decode(u32(in)); err != nil || got != want {
			t.Errorf("Decode(%d) = %q, %v; want %q", in, got, err, want)
		}
	}
	// A number with no entry keeps its key (kfree_skb's drop reason 104,
	// missing from a map written for an older kernel).
	for in, want := range map[uint32]string{7: "unknown:7", 104: "unknown:104"} {
		if got, err := chain.Decode(u32(in)); err != nil || got != want {
			t.Errorf("Decode(%d) = %q, %v; want %q", in, got, err, want)
		}
	}

	// An empty chain returns the raw bytes.
	if got, err := (Chain{}).Decode([]byte("abc")); err != nil || got != "abc" {
		t.Errorf("empty chain: %q, %v", got, err)
	}

	// ErrSkip passes through unwrapped.
	chain, err = e.NewChain([]config.Decoder{{Name: "string"}, {Name: "regexp", Regexps: []string{"^a"}}}, 8, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chain.Decode([]byte("bcd\x00\x00\x00\x00\x00")); err != ErrSkip {
		t.Errorf("no match: error %v, want ErrSkip", err)
	}
	if got, err := chain.Decode([]byte("abc\x00\x00\x00\x00\x00")); err != nil || got != "abc" {
		t.Errorf("match: %q, %v", got, err)
	}
}

func TestNewChainErrors(t *testing.T) {
	e := NewEnv(16)
	cases := []struct {
		confs []config.Decoder
		size  int
		index int
		name  string
		err   string
	}{
		{
			confs: []config.Decoder{{Name: "uint"}, {Name: "regexp", Regexps: []string{"a("}}},
			size:  4, index: 1, name: "regexp",
			err: "regexp: bad pattern (a string of 2 bytes): missing closing )",
		},
		{
			confs: []config.Decoder{{Name: "uint"}},
			size:  3, index: 0, name: "uint",
			err: "uint: size 3 not supported (want 1, 2, 4 or 8)",
		},
		{
			// Only the first decoder reads the raw field.
			confs: []config.Decoder{{Name: "string"}, {Name: "uint"}},
			size:  4, index: 1, name: "uint",
			err: "uint: must be the first decoder of a chain: it reads the raw 1, 2, 4 or 8-byte field",
		},
		{
			confs: []config.Decoder{{Name: "uint"}, {Name: "nope"}},
			size:  4, index: 1, name: "nope",
			err: `unknown decoder "nope" (known: cgroup, dname, errno, hex, ifname, inet_ip, kstack, ksym, kube_container, kube_namespace, kube_pod, majorminor, pci_class, pci_device, pci_subclass, pci_vendor, regexp, signal, static_map, string, syscall, uint)`,
		},
	}
	for _, c := range cases {
		_, err := e.NewChain(c.confs, c.size, nil)
		var ce *ChainError
		if !errors.As(err, &ce) {
			t.Fatalf("NewChain(%+v) error = %v, want a *ChainError", c.confs, err)
		}
		if ce.Index != c.index || ce.Name != c.name || err.Error() != c.err {
			t.Errorf("NewChain(%+v) = {%d %q %q}, want {%d %q %q}", c.confs, ce.Index, ce.Name, err, c.index, c.name, c.err)
		}
	}
}

// TestEbpfExporterChains checks chains written for ebpf_exporter, where
// syscall, errno and cgroup follow uint and read its decimal text.
func TestEbpfExporterChains(t *testing.T) {
	e := NewEnv(16)
	chain, err := e.NewChain([]config.Decoder{{Name: "uint"}, {Name: "syscall"}}, 8, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"amd64": "write", "arm64": "io_destroy"}[runtimeArch()]
	if got, err := chain.Decode(u64(1)); err != nil || got != want {
		t.Errorf("[uint, syscall](1) = %q, %v; want %q", got, err, want)
	}
	chain, err = e.NewChain([]config.Decoder{{Name: "uint"}, {Name: "errno"}}, 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := chain.Decode(u32(32)); err != nil || got != "EPIPE" {
		t.Errorf("[uint, errno](32) = %q, %v", got, err)
	}
}

// TestConcurrentDecode runs every stateless-looking and caching decoder from
// many goroutines; run with -race.
func TestConcurrentDecode(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir+"/kallsyms", testKallsyms)
	e := NewEnv(4)
	e.ProcRoot = dir
	decoders := []struct {
		d  Decoder
		in func(i int) []byte
	}{
		{mustNew(t, e, config.Decoder{Name: "uint"}, 8), func(i int) []byte { return u64(uint64(i)) }},
		{mustNew(t, e, config.Decoder{Name: "ksym"}, 8), func(i int) []byte { return u64(0xffffffff81000000 + uint64(i%64)*0x10) }},
		{mustNew(t, e, config.Decoder{Name: "errno"}, 4), func(i int) []byte { return u32(uint32(i % 150)) }},
		{mustNew(t, e, config.Decoder{Name: "ifname"}, 4), func(i int) []byte { return u32(uint32(i % 3)) }},
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				for _, d := range decoders {
					if _, err := d.d.Decode(d.in(i + g)); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
}

func TestParseDecimal(t *testing.T) {
	for in, want := range map[string]uint64{"0": 0, "42": 42, "18446744073709551615": 1<<64 - 1} {
		if v, ok := parseDecimal([]byte(in)); !ok || v != want {
			t.Errorf("parseDecimal(%q) = %d, %v", in, v, ok)
		}
	}
	for _, in := range []string{"", "-1", "1a", " 1", "18446744073709551616", "99999999999999999999"} {
		if v, ok := parseDecimal([]byte(in)); ok {
			t.Errorf("parseDecimal(%q) = %d, want failure", in, v)
		}
	}
}

func TestOrList(t *testing.T) {
	for want, ns := range map[string][]int{"8": {8}, "4 or 8": {4, 8}, "1, 2, 4 or 8": {1, 2, 4, 8}} {
		if got := orList(ns); got != want {
			t.Errorf("orList(%v) = %q", ns, got)
		}
	}
	if !strings.Contains(checkSize("x", -1, 4).Error(), "size -1") {
		t.Error("negative size accepted")
	}
}

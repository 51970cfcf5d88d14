// SPDX-License-Identifier: Apache-2.0

package decoder

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/kernel-exporter/kernel_exporter/config"
)

// fuzzEnv is an Env over a fake /proc and /sys: a small kallsyms, a
// cgroup2 mount with a few cgroups, a block device's uevent and a
// partitions table.
func fuzzEnv(f *testing.F) *Env {
	proc, sys, mount := f.TempDir(), f.TempDir(), f.TempDir()
	for _, d := range []string{
		filepath.Join(proc, "self"),
		filepath.Join(sys, "dev", "block", "8:0"),
		filepath.Join(mount, "system.slice", "cron.service"),
		filepath.Join(mount, "user.slice"),
	} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			f.Fatal(err)
		}
	}
	writeFile(f, filepath.Join(proc, "kallsyms"), testKallsyms)
	writeFile(f, filepath.Join(proc, "self", "mountinfo"),
		"41 31 0:38 / "+mount+" rw,relatime shared:9 - cgroup2 cgroup2 rw\n")
	writeFile(f, filepath.Join(proc, "partitions"), "major minor  #blocks  name\n\n 259 0 1000 nvme0n1\n 259 1 10 nvme0n1p1\n")
	writeFile(f, filepath.Join(sys, "dev", "block", "8:0", "uevent"), "MAJOR=8\nMINOR=0\nDEVNAME=sda\nDEVTYPE=disk\n")
	e := NewEnv(64)
	e.ProcRoot, e.SysRoot = proc, sys
	return e
}

// fuzzStacks is a stack-trace map whose stack n has n frames.
type fuzzStacks struct{}

func (fuzzStacks) Stack(id uint32) ([]uint64, error) {
	if id > 127 {
		return nil, errors.New("no such stack")
	}
	frames := make([]uint64, id)
	for i := range frames {
		frames[i] = 0xffffffff81000000 + uint64(i)*0x100
	}
	return frames, nil
}

// fuzzDecoderNames are the registered decoders, in a fixed order (set by
// FuzzDecoders: package variables are initialized before the registry is
// filled by init functions).
var fuzzDecoderNames []string

// fuzzConf builds a decoder config: pick chooses the decoder, and the
// static_map and regexps come from the fuzzed text (static_map: lines
// "key=value"; regexps: lines).
func fuzzConf(pick byte, mapText, regexps string, allowUnknown bool) config.Decoder {
	conf := config.Decoder{Name: fuzzDecoderNames[int(pick)%len(fuzzDecoderNames)], AllowUnknown: allowUnknown}
	switch conf.Name {
	case "static_map":
		conf.StaticMap = map[string]string{}
		for line := range strings.Lines(mapText) {
			k, v, _ := strings.Cut(strings.TrimSuffix(line, "\n"), "=")
			conf.StaticMap[k] = v
		}
	case "regexp":
		conf.Regexps = strings.Split(regexps, "\n")
	case "kstack":
		conf.StackMap = "stacks"
	}
	return conf
}

// FuzzDecoders builds a chain of one or two decoders, as the collector does
// (Env.NewChain), and decodes arbitrary bytes with it. It must not panic,
// its output must be valid UTF-8, and its errors must name the decoder and
// must not quote the input beyond a short hex token.
func FuzzDecoders(f *testing.F) {
	fuzzDecoderNames = strings.Split(knownNames(), ", ")
	if len(fuzzDecoderNames) < 14 {
		f.Fatalf("decoders: %v", fuzzDecoderNames)
	}
	e := fuzzEnv(f)
	stacks := func(name string) (StackReader, error) { return fuzzStacks{}, nil }
	u32 := binary.NativeEndian.AppendUint32
	u64 := binary.NativeEndian.AppendUint64
	idx := func(name string) byte { return byte(slices.Index(fuzzDecoderNames, name)) }
	none := byte(255)
	f.Add(idx("uint"), idx("static_map"), 4, u32(nil, 1), "1=read\n2=write", "", false)
	f.Add(idx("uint"), idx("static_map"), 4, u32(nil, 9), "1=read", "", true)
	f.Add(idx("string"), idx("regexp"), 16, []byte("tcp_sendmsg\x00\x00\x00\x00\x00"), "", "^tcp_\n(?i)udp", false)
	f.Add(idx("ksym"), none, 8, u64(nil, 0xffffffff81000305), "", "", false)
	f.Add(idx("kstack"), none, 4, u32(nil, 3), "", "", false)
	f.Add(idx("kstack"), none, 24, u64(u64(u64(nil, 0xffffffff81000300), 0xffffffff81000010), 0), "", "", false)
	f.Add(idx("uint"), idx("syscall"), 4, u32(nil, 0), "", "", false)
	f.Add(idx("errno"), none, 4, u32(nil, uint32(0xfffffffe)), "", "", false)
	f.Add(idx("inet_ip"), none, 16, []byte("\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\xff\xff\xc0\x00\x02\x01"), "", "", false)
	f.Add(idx("majorminor"), none, 4, u32(nil, 8<<20), "", "", false)
	f.Add(idx("majorminor"), none, 8, u64(nil, 259<<20|1), "", "", false)
	f.Add(idx("majorminor"), none, 4, u32(nil, 0xfe00), "", "", false)              // 254:0 the userspace way
	f.Add(idx("majorminor"), none, 8, u64(nil, 0x12345_6789a_00_9a), "", "", false) // userspace, beyond 32 bits
	f.Add(idx("ifname"), none, 4, u32(nil, 1), "", "", false)
	f.Add(idx("cgroup"), none, 8, u64(nil, 1), "", "", false)
	f.Add(idx("dname"), none, 32, []byte("\x07example\x03com\x00"), "", "", false)
	f.Add(idx("hex"), idx("string"), 6, []byte{0, 0xff, 0x22, 0x33, 0x44, 0x55}, "", "", false)
	f.Add(idx("string"), none, 8, []byte{'a', 0xff, 0xfe, 'b', 0, 0, 0, 0}, "", "", false)
	f.Fuzz(func(t *testing.T, first, second byte, size int, in []byte, mapText, regexps string, allowUnknown bool) {
		confs := []config.Decoder{fuzzConf(first, mapText, regexps, allowUnknown)}
		if second != none {
			confs = append(confs, fuzzConf(second, mapText, regexps, allowUnknown))
		}
		chain, err := e.NewChain(confs, size, stacks)
		if err != nil {
			var ce *ChainError
			if !errors.As(err, &ce) || ce.Index < 0 || ce.Index >= len(confs) {
				t.Fatalf("NewChain error %v is not a *ChainError", err)
			}
			if len(err.Error()) > 400 {
				t.Fatalf("NewChain error of %d bytes", len(err.Error()))
			}
			return
		}
		if size >= 0 && size <= MaxSize && len(in) != size {
			// The collector gives the first decoder exactly size bytes;
			// also try what the fuzzer gave, which decoders must reject
			// without panicking.
			checkDecode(t, chain, in)
			in = append(bytes.Clone(in), make([]byte, max(size-len(in), 0))...)[:size]
		}
		checkDecode(t, chain, in)
	})
}

func checkDecode(t *testing.T, chain Chain, in []byte) {
	orig := bytes.Clone(in)
	out, err := chain.DecodeBytes(in)
	if !bytes.Equal(in, orig) {
		t.Fatalf("Decode modified its input: % x → % x", orig, in)
	}
	if err == ErrSkip {
		return
	}
	if err != nil {
		var de *DecodeError
		if !errors.As(err, &de) || de.Decoder == "" {
			t.Fatalf("error %v is not a *DecodeError", err)
		}
		msg := err.Error()
		if !utf8.ValidString(msg) {
			t.Fatalf("error is not UTF-8: %q", msg)
		}
		if len(in) > 16 && strings.Contains(msg, string(in)) {
			t.Fatalf("error %q quotes the input", msg)
		}
		if len(msg) > 400 {
			t.Fatalf("error of %d bytes: %.100q...", len(msg), msg)
		}
		return
	}
	if !utf8.Valid(out) {
		t.Fatalf("output % x is not UTF-8", out)
	}
	s, err := chain.Decode(in)
	if err != nil || s != string(out) {
		t.Fatalf("Decode = %q, %v; DecodeBytes = %q", s, err, out)
	}
}

// FuzzKallsyms parses arbitrary text as /proc/kallsyms. It must not panic;
// a table it returns must be sorted and consistent, and lookups must return
// the name of the closest symbol at or before the address.
func FuzzKallsyms(f *testing.F) {
	f.Add([]byte(testKallsyms), uint64(0xffffffff81000305))
	f.Add([]byte("ffffffff81000000 T _stext\nffffffff81000000 t a\n"), uint64(0xffffffff81000000))
	f.Add([]byte("0000000000000000 T x\n0000000000000000 t y\n"), uint64(0))
	f.Add([]byte("ffffffffffffffff T last\n1 T first\n"), uint64(1<<64-1))
	f.Add([]byte("10 T a\tmod\n20 t _b\n20 T __b\n20 W b\n"), uint64(0x1f))
	f.Add([]byte("\n\n\nzz T bad\n10 TT x\n10 T \n"), uint64(0x10))
	f.Fuzz(func(t *testing.T, data []byte, addr uint64) {
		fuzzKallsyms(t, data, addr, false)
		fuzzKallsyms(t, data, addr, true)
	})
}

// fuzzKallsyms is one FuzzKallsyms case, with the reference's names and
// lookup when ref is set.
func fuzzKallsyms(t *testing.T, data []byte, addr uint64, ref bool) {
	k, err := parseKallsymsAs(data, ref)
	if err != nil {
		if k != nil {
			t.Fatal("table and error")
		}
		return
	}
	n := len(k.addrs)
	if n == 0 || len(k.ends) != n || int(k.ends[n-1]) != len(k.names) || len(k.names) > len(data) {
		t.Fatalf("inconsistent table: %d addrs, %d ends, %d name bytes", n, len(k.ends), len(k.names))
	}
	for i := range n {
		start := uint32(0)
		if i > 0 {
			start = k.ends[i-1]
			if k.addrs[i] <= k.addrs[i-1] {
				t.Fatalf("addresses not ascending at %d", i)
			}
		}
		if k.ends[i] <= start || k.ends[i]-start > maxSymbolName {
			t.Fatalf("bad name bounds at %d", i)
		}
		name, ok := k.lookup(k.addrs[i])
		if !ok || string(name) != string(k.names[start:k.ends[i]]) {
			t.Fatalf("lookup of symbol %d's address = %q, %v", i, name, ok)
		}
	}
	name, ok := k.lookup(addr)
	switch {
	case addr < k.addrs[0] || (addr > k.addrs[n-1] && !ref):
		if ok {
			t.Fatalf("lookup(%#x) outside the table = %q", addr, name)
		}
	case !ok:
		t.Fatalf("lookup(%#x) inside the table failed", addr)
	default:
		i, _ := slices.BinarySearch(k.addrs, addr)
		if i == n || k.addrs[i] != addr {
			i--
		}
		want, _ := k.lookup(k.addrs[i])
		if string(name) != string(want) {
			t.Fatalf("lookup(%#x) = %q, want %q", addr, name, want)
		}
	}
	if cap(name) != len(name) {
		t.Fatalf("lookup result can be appended to in place")
	}
}

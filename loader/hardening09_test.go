// SPDX-License-Identifier: Apache-2.0

package loader

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
)

// childEnv names the operation a re-executed test binary runs (see
// runLimited) and childArg its argument.
const (
	childEnv = "KE_HARDENING09_CHILD"
	childArg = "KE_HARDENING09_ARG"
)

// childAS is the address-space limit (bytes) of the child process the
// memory tests run their operation in: the code before the fix dies of
// it instead of eating the machine's memory.
const childAS = 2_000_000_000

// maxChildRSS is the peak resident memory (KiB) the operation may reach.
const maxChildRSS = 200 << 10 // 200 MiB

// runLimited re-executes the test binary, running only test, under an
// address-space limit of childAS bytes, with childEnv=op and childArg=arg.
// The child prints "RESULT: <error or ok>". It returns that line and the
// child's peak RSS in KiB; when the child dies (out of memory), the test
// fails and the result is "(died)".
func runLimited(t *testing.T, test, op, arg string) (string, int64) {
	t.Helper()
	cmd := exec.Command("prlimit", fmt.Sprintf("--as=%d", childAS), "--",
		os.Args[0], "-test.run=^"+test+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"="+op, childArg+"="+arg)
	out, err := cmd.CombinedOutput()
	var rss int64
	if cmd.ProcessState != nil {
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			rss = ru.Maxrss
		}
	}
	tail := string(out)
	if i := strings.Index(tail, "fatal error"); i >= 0 {
		tail = tail[i:] // the Go runtime's reason, before its goroutine dump
	}
	if len(tail) > 300 {
		tail = tail[:300] + "..."
	}
	if err != nil {
		t.Errorf("%s %s: child under a %d-byte address-space limit failed (%v, peak RSS %d MiB):\n%s", op, arg, childAS, err, rss>>10, tail)
		return "(died)", rss
	}
	for _, l := range strings.Split(string(out), "\n") {
		if r, ok := strings.CutPrefix(l, "RESULT: "); ok {
			t.Logf("%s: peak RSS %d MiB: %s", op, rss>>10, r)
			return r, rss
		}
	}
	t.Fatalf("%s: child printed no result:\n%s", op, tail)
	return "", 0
}

// childResult prints the result line runLimited reads.
func childResult(err error) {
	if err == nil {
		fmt.Println("RESULT: ok")
		return
	}
	fmt.Println("RESULT: " + err.Error())
}

// sparseTarget writes a copy of src whose section named sec has its
// sh_offset set to off and its sh_size to size, extended (sparse) to
// total bytes.
func sparseTarget(t *testing.T, src, sec string, off, size, total uint64) string {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.NewFile(strings.NewReader(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	if f.Class != elf.ELFCLASS64 || f.ByteOrder != binary.LittleEndian {
		t.Skipf("%s is not a little-endian ELF64 file", src)
	}
	shoff := binary.LittleEndian.Uint64(data[40:])
	shentsize := uint64(binary.LittleEndian.Uint16(data[58:]))
	idx := -1
	for i, s := range f.Sections {
		if s.Name == sec {
			idx = i
		}
	}
	if idx < 0 {
		t.Fatalf("%s has no section %s", src, sec)
	}
	h := data[shoff+uint64(idx)*shentsize:]
	binary.LittleEndian.PutUint64(h[24:], off)  // sh_offset
	binary.LittleEndian.PutUint64(h[32:], size) // sh_size
	p := filepath.Join(t.TempDir(), filepath.Base(src)+".sparse")
	if err := os.WriteFile(p, data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, int64(total)); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestHardening09TargetSymbolTable (finding 9, memory): a 4 GB sparse
// uprobe target (under bounded.MaxTarget) whose .dynsym claims 160,000,000
// symbols made the loader read the whole table and build a Go value per
// symbol (debug/elf's DynamicSymbols): more than 6 GB. Now the table is
// scanned in chunks and a table of more than usdt.MaxSymbols entries is
// refused, naming the target, the section and the limit; a large table
// under the limit is scanned in bounded memory. Each lookup runs in a
// child process under a 2 GB address-space limit (the old code dies).
func TestHardening09TargetSymbolTable(t *testing.T) {
	switch os.Getenv(childEnv) {
	case "uprobe":
		tgt, err := openUprobeTarget(os.Getenv(childArg), "uprobe target")
		if err == nil {
			_, err = tgt.address("main", 0)
		}
		childResult(err)
		return
	case "":
	default:
		return
	}
	const total = 4_000_000_000
	over := sparseTarget(t, "/bin/true", ".dynsym", 4096, 24*160_000_000, total)
	got, rss := runLimited(t, t.Name(), "uprobe", over)
	want := "uprobe target " + over + ": read dynamic symbols: section .dynsym: 160000000 entries, more than the limit of 16777216"
	if got != want {
		t.Errorf("over the symbol limit: got %q, want %q", got, want)
	}
	if rss > maxChildRSS {
		t.Errorf("over the symbol limit: peak RSS %d MiB, want at most %d MiB", rss>>10, maxChildRSS>>10)
	}

	// 15,000,000 entries, under the limit: scanned (360 MB of the file),
	// in bounded memory; /bin/true has no function main.
	under := sparseTarget(t, "/bin/true", ".dynsym", 4096, 24*15_000_000, total)
	got, rss = runLimited(t, t.Name(), "uprobe", under)
	if want := "symbol main: " + link.ErrNoSymbol.Error(); got != want {
		t.Errorf("under the symbol limit: got %q, want %q", got, want)
	}
	if rss > maxChildRSS {
		t.Errorf("under the symbol limit: peak RSS %d MiB, want at most %d MiB", rss>>10, maxChildRSS>>10)
	}
}

// oldAddresses is the symbol map of the code before the fix: function
// symbols of .symtab then .dynsym from debug/elf, the last of a name
// winning, converted to file offsets through the executable segments.
func oldAddresses(t *testing.T, path string) map[string]targetSymbol {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	all, err := f.Symbols()
	if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
		t.Fatal(err)
	}
	dyn, err := f.DynamicSymbols()
	if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
		t.Fatal(err)
	}
	out := map[string]targetSymbol{}
	for _, s := range append(all, dyn...) {
		if elf.ST_TYPE(s.Info) != elf.STT_FUNC {
			continue
		}
		off := s.Value
		for _, p := range f.Progs {
			if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 && p.Vaddr <= s.Value && s.Value-p.Vaddr < p.Memsz {
				off = s.Value - p.Vaddr + p.Off
				break
			}
		}
		out[s.Name] = targetSymbol{off: off, size: s.Size}
	}
	return out
}

// TestHardening09TargetSymbolLookup: the streaming lookup gives the
// offsets and sizes the code before the fix gave (debug/elf's whole
// tables), for the function symbols of real files: libc's .dynsym (with
// versions and imports), and the go tool's .symtab (tens of thousands of
// symbols: a sample).
func TestHardening09TargetSymbolLookup(t *testing.T) {
	paths := []string{"/bin/true", "/usr/local/go/bin/go"}
	if libc, err := filepath.Glob("/lib/*-linux-gnu/libc.so.6"); err == nil {
		paths = append(paths, libc...)
	}
	total := 0
	for _, path := range paths {
		if _, err := os.Stat(path); err != nil {
			continue
		}
		want := oldAddresses(t, path)
		tgt, err := openUprobeTarget(path, "uprobe target")
		if err != nil {
			t.Fatal(err)
		}
		checked, i := 0, 0
		for name, w := range want {
			i++
			if len(want) > 500 && i%(len(want)/500) != 0 {
				continue
			}
			got, ok, err := tgt.lookup(name)
			if err != nil || !ok || got != w {
				t.Errorf("%s: lookup(%q) = %+v, %v, %v; want %+v", path, name, got, ok, err, w)
			}
			checked++
		}
		if _, ok, err := tgt.lookup("no_such_function_here"); ok || err != nil {
			t.Errorf("%s: missing symbol found (%v)", path, err)
		}
		t.Logf("%s: %d function symbols, %d checked", path, len(want), checked)
		total += checked
	}
	if total < 100 {
		t.Fatalf("%d symbols compared in %v: too few to check the lookup", total, paths)
	}
}

// TestHardening09BTFPathSize (finding 9, memory): a --btf.path file under
// bounded.MaxTarget whose BTF header claims 3.9 GB of types made
// cilium/ebpf read it all (5+ GB). Now checkBTF refuses, before cilium
// reads anything, raw BTF larger than MaxBTF and an ELF file whose .BTF
// section is larger, naming the path and the limit. Each load runs in a
// child process under a 2 GB address-space limit (the old code dies). A
// real BTF file, raw and in an ELF object, still loads.
func TestHardening09BTFPathSize(t *testing.T) {
	switch os.Getenv(childEnv) {
	case "btf":
		_, err := loadKernelBTF(os.Getenv(childArg))
		childResult(err)
		return
	case "":
	default:
		return
	}
	// Raw BTF: the header claims type_len 3.9e9, the file (sparse) holds it.
	const tl = 3_900_000_000
	raw := filepath.Join(t.TempDir(), "btf.raw")
	hdr := make([]byte, 24)
	binary.LittleEndian.PutUint16(hdr[0:], 0xeB9F)
	hdr[2] = 1                                 // version
	binary.LittleEndian.PutUint32(hdr[4:], 24) // hdr_len
	binary.LittleEndian.PutUint32(hdr[12:], tl)
	binary.LittleEndian.PutUint32(hdr[16:], tl)
	binary.LittleEndian.PutUint32(hdr[20:], 16)
	if err := os.WriteFile(raw, hdr, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(raw, 24+tl+16); err != nil {
		t.Fatal(err)
	}
	got, rss := runLimited(t, t.Name(), "btf", raw)
	if want := "load BTF " + raw + ": raw BTF of 3900000040 bytes, larger than the 64 MiB limit"; got != want {
		t.Errorf("raw: got %q, want %q", got, want)
	}
	if rss > maxChildRSS {
		t.Errorf("raw: peak RSS %d MiB, want at most %d MiB", rss>>10, maxChildRSS>>10)
	}

	// ELF: a BPF object whose .BTF claims 3.9 GB at offset 4096 of a
	// sparse 4 GB file.
	obj := sparseTarget(t, "../programs/exec.bpf.o", ".BTF", 4096, tl, 4_000_000_000)
	got, rss = runLimited(t, t.Name(), "btf", obj)
	if want := "load BTF " + obj + ": section .BTF: 3900000000 bytes, more than the 64 MiB limit"; got != want {
		t.Errorf("ELF: got %q, want %q", got, want)
	}
	if rss > maxChildRSS {
		t.Errorf("ELF: peak RSS %d MiB, want at most %d MiB", rss>>10, maxChildRSS>>10)
	}

	// Real files load: the BPF object, and a copy of the kernel's BTF.
	if _, err := loadKernelBTF("../programs/exec.bpf.o"); err != nil {
		t.Errorf("BPF object: %v", err)
	}
	data, err := os.ReadFile("/sys/kernel/btf/vmlinux")
	if err != nil {
		t.Logf("no kernel BTF to copy: %v", err)
		return
	}
	vmlinux := filepath.Join(t.TempDir(), "vmlinux.btf")
	if err := os.WriteFile(vmlinux, data, 0o644); err != nil {
		t.Fatal(err)
	}
	spec, err := loadKernelBTF(vmlinux)
	if err != nil {
		t.Fatalf("kernel BTF copy: %v", err)
	}
	if _, err := spec.AnyTypeByName("task_struct"); err != nil {
		t.Errorf("kernel BTF copy: task_struct: %v", err)
	}
	t.Logf("kernel BTF: %d bytes", len(data))
}

// TestCheckBTF: the raw BTF header and the ELF checks, case by case.
func TestCheckBTF(t *testing.T) {
	le, be := binary.ByteOrder(binary.LittleEndian), binary.ByteOrder(binary.BigEndian)
	hdr := func(bo binary.ByteOrder, hdrLen, typeOff, typeLen, strOff, strLen uint32) []byte {
		b := make([]byte, 24)
		bo.PutUint16(b, 0xeB9F)
		b[2] = 1
		bo.PutUint32(b[4:], hdrLen)
		bo.PutUint32(b[8:], typeOff)
		bo.PutUint32(b[12:], typeLen)
		bo.PutUint32(b[16:], strOff)
		bo.PutUint32(b[20:], strLen)
		return b
	}
	for _, tc := range []struct {
		name string
		data []byte
		size int64
		want string
	}{
		{"little-endian", hdr(le, 24, 0, 100, 100, 10), 134, ""},
		{"big-endian", hdr(be, 24, 0, 100, 100, 10), 134, ""},
		{"types past the end", hdr(le, 24, 0, 1000, 0, 10), 134, "raw BTF: type section (1000 bytes at offset 24) is past the end of the file (134 bytes)"},
		{"strings past the end", hdr(be, 24, 0, 10, 100, 100), 134, "raw BTF: string section (100 bytes at offset 124) is past the end of the file (134 bytes)"},
		{"header length", hdr(le, 8, 0, 10, 10, 10), 134, "raw BTF: header length 8 is out of range (24 to the file's 134 bytes)"},
		{"short", hdr(le, 24, 0, 0, 0, 0)[:10], 10, "raw BTF: file of 10 bytes is shorter than the 24-byte header"},
		{"large file", hdr(le, 24, 0, 10, 10, 10), MaxBTF + 1, "raw BTF of 67108865 bytes, larger than the 64 MiB limit"},
		{"neither", []byte("root:$6$secret:19000:0:99999:7:::\n"), 35, "not a BTF file: neither raw BTF (magic 0xeB9F) nor ELF"},
	} {
		_, err := checkBTF(strings.NewReader(string(tc.data)), tc.size)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("%s: err = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestHardening09BTFPathShared checks that --btf.path is parsed once for
// all the configs loading at the same time (each parsed its own copy: with
// every bundled program, a 40 MB file took 2.5 GB), and again after
// ReleaseKernelTypes.
func TestHardening09BTFPathShared(t *testing.T) {
	data, err := os.ReadFile("/sys/kernel/btf/vmlinux")
	if err != nil {
		t.Skip("no kernel BTF:", err)
	}
	path := filepath.Join(t.TempDir(), "vmlinux.btf")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ReleaseKernelTypes)
	specs := make([]*btf.Spec, 8)
	var wg sync.WaitGroup
	for i := range specs {
		wg.Go(func() {
			s, err := sharedExternalBTF(path)
			if err != nil {
				t.Error(err)
			}
			specs[i] = s
		})
	}
	wg.Wait()
	for i, s := range specs {
		if s == nil || s != specs[0] {
			t.Fatalf("load %d got spec %p, load 0 %p: want one spec for all", i, s, specs[0])
		}
	}
	ReleaseKernelTypes()
	if s, err := sharedExternalBTF(path); err != nil || s == specs[0] {
		t.Errorf("after ReleaseKernelTypes: spec %p (%v), want a new one", s, err)
	}
}

// SPDX-License-Identifier: Apache-2.0

package symbolize

import (
	"bytes"
	"debug/elf"
	"debug/gosym"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/internal/testenv"
)

const mapsSample = `55ab298ee000-55ab298f0000 r--p 00000000 fe:00 247278                     /usr/bin/head
55ab298f0000-55ab298f6000 r-xp 00002000 fe:00 247278                     /usr/bin/head
7f1178e00000-7f1178e20000 r-xp 00001000 08:01 99                         /usr/lib/with space/lib.so (deleted)
7f1178e4d000-7f1178e4f000 r-xp 00000000 00:00 0                          [vdso]
7f1178e50000-7f1178e60000 rwxp 00000000 00:00 0 
bad line
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]
`

func TestParseMaps(t *testing.T) {
	maps, err := ParseMaps([]byte(mapsSample))
	if err != nil {
		t.Fatal(err)
	}
	want := []Mapping{
		{Start: 0x55ab298f0000, End: 0x55ab298f6000, Offset: 0x2000, Dev: unix.Mkdev(0xfe, 0), Inode: 247278, Path: "/usr/bin/head"},
		{Start: 0x7f1178e00000, End: 0x7f1178e20000, Offset: 0x1000, Dev: unix.Mkdev(8, 1), Inode: 99, Path: "/usr/lib/with space/lib.so", Deleted: true},
		{Start: 0x7f1178e4d000, End: 0x7f1178e4f000, Path: "[vdso]"},
		{Start: 0x7f1178e50000, End: 0x7f1178e60000},
		{Start: 0xffffffffff600000, End: 0xffffffffff601000, Path: "[vsyscall]"},
	}
	if !reflect.DeepEqual(maps, want) {
		t.Errorf("got\n%+v\nwant\n%+v", maps, want)
	}
	if i, ok := find(maps, 0x7f1178e4e123); !ok || i != 2 {
		t.Errorf("find vdso: %d %v", i, ok)
	}
	if _, ok := find(maps, 0x1000); ok {
		t.Error("find below every mapping")
	}
	if !maps[0].File() || maps[2].File() || maps[3].File() {
		t.Error("File()")
	}
}

func FuzzParseMaps(f *testing.F) {
	f.Add([]byte(mapsSample))
	f.Fuzz(func(t *testing.T, data []byte) {
		maps, err := ParseMaps(data)
		if err != nil {
			return
		}
		for _, m := range maps {
			if m.End <= m.Start || len(m.Path) > maxPath {
				t.Fatalf("bad mapping %+v", m)
			}
		}
	})
}

func tableOf(t *testing.T, path string) *Table {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	tb, err := ReadTable(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func pcOf(fn any) uint64 { return uint64(reflect.ValueOf(fn).Pointer()) }

// TestReadTableGo reads this test binary (a Go binary without .symtab:
// go test links with -s) from its .gopclntab and finds this function.
func TestReadTableGo(t *testing.T) {
	tb := tableOf(t, "/proc/self/exe")
	if !strings.Contains(tb.Source, "gopclntab") && !strings.Contains(tb.Source, "symtab") || tb.BuildID == "" {
		t.Errorf("source %s, build ID %q", tb.Source, tb.BuildID)
	}
	// Not PIE: virtual addresses are the process's.
	name, ok := tb.Lookup(pcOf(TestReadTableGo))
	if !ok || !strings.HasSuffix(string(name), "symbolize.TestReadTableGo") {
		t.Errorf("lookup of this function: %q %v", name, ok)
	}
}

const cSource = `
__attribute__((noinline)) int alpha(int x) { return x * 3 + 1; }
__attribute__((noinline)) int beta(int x) { return alpha(x) * 5; }
int main(int argc, char **argv) { return beta(argc) & 1; }
`

// TestReadTableC reads a PIE C binary with .symtab, then stripped (only
// .dynsym), and checks the segment mapping and lookups against nm.
func TestReadTableC(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		testenv.SkipOrFail(t, "gcc is missing (make test-deps installs it)")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "c.c")
	bin := filepath.Join(dir, "c")
	if err := os.WriteFile(src, []byte(cSource), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("gcc", "-O1", "-pie", "-fPIE", "-Wl,--build-id", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	out, err := exec.Command("nm", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	addrs := map[string]uint64{}
	for _, l := range strings.Split(string(out), "\n") {
		var a uint64
		var typ, name string
		if n, _ := fmtSscan(l, &a, &typ, &name); n == 3 {
			addrs[name] = a
		}
	}
	tb := tableOf(t, bin)
	if tb.Source != "symtab+dynsym" && tb.Source != "symtab" || len(tb.BuildID) != 40 {
		t.Errorf("source %s, build ID %q", tb.Source, tb.BuildID)
	}
	for _, fn := range []string{"alpha", "beta", "main"} {
		if name, ok := tb.Lookup(addrs[fn] + 1); !ok || string(name) != fn {
			t.Errorf("lookup %s at %#x+1: %q %v", fn, addrs[fn], name, ok)
		}
	}
	// Each PT_LOAD segment maps its file offsets to its addresses.
	ef, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ef.Progs {
		if p.Type != elf.PT_LOAD || p.Filesz < 0x20 {
			continue
		}
		if v, ok := tb.VAddr(p.Off + 0x10); !ok || v != p.Vaddr+0x10 {
			t.Errorf("VAddr(%#x) = %#x %v, want %#x", p.Off+0x10, v, ok, p.Vaddr+0x10)
		}
	}
	ef.Close()
	if out, err := exec.Command("strip", bin).CombinedOutput(); err != nil {
		t.Fatalf("strip: %v\n%s", err, out)
	}
	tb = tableOf(t, bin)
	if _, ok := tb.Lookup(addrs["alpha"]); ok || strings.Contains(tb.Source, "symtab") {
		t.Errorf("stripped: source %s, alpha still found", tb.Source)
	}
}

func fmtSscan(l string, a *uint64, typ, name *string) (int, error) {
	f := strings.Fields(l)
	if len(f) != 3 {
		return 0, nil
	}
	var v uint64
	for _, c := range f[0] {
		d := strings.IndexRune("0123456789abcdef", c)
		if d < 0 {
			return 0, nil
		}
		v = v<<4 | uint64(d)
	}
	*a, *typ, *name = v, f[1], f[2]
	return 3, nil
}

// TestSessionUser resolves addresses of this very process: a function of
// its own, an address in no mapping, and a kernel address.
func TestSessionUser(t *testing.T) {
	s := New(Options{})
	ss, err := s.NewSession()
	if err != nil && os.Geteuid() == 0 {
		t.Fatalf("kernel symbols as root: %v", err)
	}
	pid := uint32(os.Getpid())
	fr := ss.User(nil, pid, "symbolize.test", []uint64{pcOf(TestSessionUser), 0x10, 0})
	if len(fr) != 2 {
		t.Fatalf("%d frames, want 2 (a zero ends the stack)", len(fr))
	}
	if !fr[0].Resolved || !strings.HasSuffix(fr[0].Function, "symbolize.TestSessionUser") || fr[0].Kernel || fr[0].BuildID == "" {
		t.Errorf("own function: %+v", *fr[0])
	}
	if fr[1].Resolved || fr[1].Function != "[unknown in symbolize.test]" {
		t.Errorf("address in no mapping: %+v", *fr[1])
	}
	again := ss.User(nil, pid, "symbolize.test", []uint64{pcOf(TestSessionUser)})
	if again[0] != fr[0] {
		t.Error("frames are not interned")
	}
	st := ss.Stats()
	if st.UserFrames != 3 || st.UserResolved != 2 {
		t.Errorf("stats %+v", st)
	}
	if os.Geteuid() != 0 {
		return
	}
	k := ss.Kernel(nil, []uint64{kernelAddr(t, "schedule") + 4})
	if !k[0].Resolved || k[0].Function != "schedule" || !k[0].Kernel || k[0].Module != KernelModule {
		t.Errorf("kernel frame: %+v", *k[0])
	}
	if s.CachedBytes() == 0 {
		t.Error("no ELF table cached")
	}
}

// kernelAddr returns the address of a kernel symbol from /proc/kallsyms.
func kernelAddr(t *testing.T, name string) uint64 {
	data, err := os.ReadFile("/proc/kallsyms")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		var a uint64
		var typ, n string
		if c, _ := fmtSscan(l, &a, &typ, &n); c == 3 && n == name {
			return a
		}
	}
	t.Fatalf("no %s in /proc/kallsyms", name)
	return 0
}

// FuzzReadTable feeds ReadTable ELF files that may be malformed anywhere:
// it must fail or return a table whose lookups stay in bounds.
func FuzzReadTable(f *testing.F) {
	self, err := os.ReadFile("/proc/self/exe")
	if err == nil {
		// The headers of a real file, cut: sections point past the end.
		f.Add(self[:min(len(self), 64<<10)])
	}
	f.Add(minimalELF())
	f.Add([]byte("\x7fELF"))
	f.Fuzz(func(t *testing.T, data []byte) {
		tb, err := ReadTable(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		for _, a := range []uint64{0, 1, 0x400000, 0x401000, ^uint64(0)} {
			tb.Lookup(a)
			tb.VAddr(a)
		}
		if tb.Len() > MaxSymbols {
			t.Fatalf("%d symbols", tb.Len())
		}
	})
}

// minimalELF is a 64-byte ELF64 header with no sections or segments.
func minimalELF() []byte {
	b := make([]byte, 64)
	copy(b, "\x7fELF\x02\x01\x01")
	binary.LittleEndian.PutUint16(b[16:], 2)    // ET_EXEC
	binary.LittleEndian.PutUint16(b[18:], 0x3e) // x86-64
	binary.LittleEndian.PutUint32(b[20:], 1)
	binary.LittleEndian.PutUint16(b[52:], 64) // e_ehsize
	return b
}

func FuzzParseNotes(f *testing.F) {
	note := make([]byte, 12, 36)
	binary.LittleEndian.PutUint32(note, 4)
	binary.LittleEndian.PutUint32(note[4:], 20)
	binary.LittleEndian.PutUint32(note[8:], 3)
	note = append(note, "GNU\x00"...)
	note = append(note, bytes.Repeat([]byte{0xab}, 20)...)
	f.Add(note)
	f.Fuzz(func(t *testing.T, data []byte) {
		if d, ok := ParseNotes(data, binary.LittleEndian, "GNU", 3); ok && len(d) > len(data) {
			t.Fatal("descriptor longer than the input")
		}
	})
}

// TestPclnMatchesGosym reads this test binary's .gopclntab with
// pclnSymbols and with debug/gosym: the same functions, entries and ends.
func TestPclnMatchesGosym(t *testing.T) {
	f, err := elf.Open("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pcln, text := f.Section(".gopclntab"), f.Section(".text")
	data, err := pcln.Data()
	if err != nil {
		t.Fatal(err)
	}
	tab, err := gosym.NewTable(nil, gosym.NewLineTable(data, text.Addr))
	if err != nil {
		t.Fatal(err)
	}
	set := symbolSet{names: &nameStore{}}
	if err := pclnSymbols(&set, pcln.ReaderAt, int64(pcln.Size), text.Addr); err != nil {
		t.Fatal(err)
	}
	syms := set.syms
	if len(syms) != len(tab.Funcs) {
		t.Fatalf("%d functions, debug/gosym has %d", len(syms), len(tab.Funcs))
	}
	for i, fn := range tab.Funcs {
		s := syms[i]
		name := string(set.names.get(s.pos, s.n))
		if s.addr != fn.Entry || s.addr+uint64(s.size) != fn.End || name != fn.Name {
			t.Fatalf("function %d: %#x-%#x %s, debug/gosym: %#x-%#x %s", i, s.addr, s.addr+uint64(s.size), name, fn.Entry, fn.End, fn.Name)
		}
	}
}

// FuzzPclntab feeds pclnSymbols any table: it must fail or return
// functions within bounds.
func FuzzPclntab(f *testing.F) {
	if ef, err := elf.Open("/proc/self/exe"); err == nil {
		if s := ef.Section(".gopclntab"); s != nil {
			b := make([]byte, min(s.Size, 32<<10))
			_, _ = s.ReadAt(b, 0)
			f.Add(b)
		}
		ef.Close()
	}
	f.Add([]byte("\xf1\xff\xff\xff\x00\x00\x01\x08"))
	f.Fuzz(func(t *testing.T, data []byte) {
		set := symbolSet{names: &nameStore{}}
		if err := pclnSymbols(&set, bytes.NewReader(data), int64(len(data)), 0x401000); err != nil {
			return
		}
		for _, s := range set.syms {
			if s.n == 0 || s.n > MaxSymbolName || len(set.names.get(s.pos, s.n)) != int(s.n) {
				t.Fatalf("name of %d bytes at %#x", s.n, s.pos)
			}
		}
	})
}

// BenchmarkReadTable reads the symbol table of this test binary (a Go
// binary without .symtab: .gopclntab) and of the go command's compiler
// (with .symtab) when it is there.
func BenchmarkReadTable(b *testing.B) {
	for _, path := range []string{"/proc/self/exe", filepath.Join(runtime.GOROOT(), "pkg/tool", runtime.GOOS+"_"+runtime.GOARCH, "compile")} {
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		st, _ := f.Stat()
		b.Run(filepath.Base(path), func(b *testing.B) {
			var tb *Table
			for range b.N {
				if tb, err = ReadTable(f, st.Size()); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(tb.Len()), "symbols")
			b.ReportMetric(float64(tb.Bytes())/(1<<20), "table-MiB")
		})
		f.Close()
	}
}

// SPDX-License-Identifier: Apache-2.0

package usdt

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
)

func TestParseArgsX86(t *testing.T) {
	syms := map[string]uint64{"counter": 0x4010, "table": 0x5000}
	resolve := func(s string) (uint64, bool) { v, ok := syms[s]; return v, ok }
	const pc = 0x1080
	for _, tc := range []struct {
		text string
		want Arg
	}{
		{"-4@%edi", Arg{Size: 4, Signed: true, Kind: ArgReg, Base: "rdi"}},
		{"8@%rax", Arg{Size: 8, Kind: ArgReg, Base: "rax"}},
		{"1@%bl", Arg{Size: 1, Kind: ArgReg, Base: "rbx"}},
		{"2@%r9w", Arg{Size: 2, Kind: ArgReg, Base: "r9"}},
		{"-1@%sil", Arg{Size: 1, Signed: true, Kind: ArgReg, Base: "rsi"}},
		{"-4@$5", Arg{Size: 4, Signed: true, Kind: ArgConst, Value: 5}},
		{"-4@$-7", Arg{Size: 4, Signed: true, Kind: ArgConst, Value: -7}},
		{"8@$0x10", Arg{Size: 8, Kind: ArgConst, Value: 16}},
		{"-8@-16(%rbp)", Arg{Size: 8, Signed: true, Kind: ArgMem, Base: "rbp", Value: -16}},
		{"4@(%rsp)", Arg{Size: 4, Kind: ArgMem, Base: "rsp"}},
		{"8@24(%rax,%rbx,8)", Arg{Size: 8, Kind: ArgMem, Base: "rax", Index: "rbx", Scale: 8, Value: 24}},
		{"8@(,%rcx,4)", Arg{Size: 8, Kind: ArgMem, Index: "rcx", Scale: 4}},
		{"8@(%rdx,%rcx)", Arg{Size: 8, Kind: ArgMem, Base: "rdx", Index: "rcx", Scale: 1}},
		{"-8@counter(%rip)", Arg{Size: 8, Signed: true, Kind: ArgMem, Base: "rip", Value: 0x4010 - pc}},
		{"4@counter+8(%rip)", Arg{Size: 4, Kind: ArgMem, Base: "rip", Value: 0x4010 + 8 - pc}},
		{"8@table(,%rax,8)", Arg{Size: 8, Kind: ArgMem, Index: "rax", Scale: 8, Value: 0x5000}},
		{"8@0x601040", Arg{Size: 8, Kind: ArgMem, Value: 0x601040}},
		{"%rdi", Arg{Size: 8, Kind: ArgReg, Base: "rdi"}},
	} {
		got := ParseArgs(elf.EM_X86_64, tc.text, pc, resolve)
		if len(got) != 1 {
			t.Errorf("%q: got %d args", tc.text, len(got))
			continue
		}
		tc.want.Text = tc.text
		if got[0].Err != nil || !reflect.DeepEqual(got[0], tc.want) {
			t.Errorf("%q:\n got %+v\nwant %+v", tc.text, got[0], tc.want)
		}
	}
}

func TestParseArgsUnsupported(t *testing.T) {
	for _, text := range []string{"4@%ah", "8@%xmm0", "3@%eax", "x@%eax", "8@nosuch(%rip)", "8@4(%rax", "8@(%rax,%rbx,3)"} {
		got := ParseArgs(elf.EM_X86_64, text, 0, func(string) (uint64, bool) { return 0, false })
		if len(got) != 1 || got[0].Kind != ArgUnsupported || got[0].Err == nil {
			t.Errorf("%q: got %+v, want one unsupported arg with an error", text, got)
		}
	}
	// One bad argument does not hide the others.
	got := ParseArgs(elf.EM_X86_64, "-4@%edi 4@%ah 8@$1", 0, nil)
	if len(got) != 3 || got[0].Kind != ArgReg || got[1].Kind != ArgUnsupported || got[2].Kind != ArgConst {
		t.Errorf("mixed args: %+v", got)
	}
}

func TestParseArgsARM64(t *testing.T) {
	for _, tc := range []struct {
		text string
		want Arg
	}{
		{"-4@x0", Arg{Size: 4, Signed: true, Kind: ArgReg, Base: "x0"}},
		{"4@w19", Arg{Size: 4, Kind: ArgReg, Base: "x19"}},
		{"8@[sp, 16]", Arg{Size: 8, Kind: ArgMem, Base: "sp", Value: 16}},
		{"-4@[x29, -12]", Arg{Size: 4, Signed: true, Kind: ArgMem, Base: "x29", Value: -12}},
		{"8@[x0]", Arg{Size: 8, Kind: ArgMem, Base: "x0"}},
		{"-4@5", Arg{Size: 4, Signed: true, Kind: ArgConst, Value: 5}},
		{"8@#-3", Arg{Size: 8, Kind: ArgConst, Value: -3}},
	} {
		got := ParseArgs(elf.EM_AARCH64, tc.text, 0, nil)
		tc.want.Text = tc.text
		if len(got) != 1 || got[0].Err != nil || !reflect.DeepEqual(got[0], tc.want) {
			t.Errorf("%q:\n got %+v\nwant %+v", tc.text, got, tc.want)
		}
	}
}

// TestSpecLayout pins the byte layout shared with struct ke_usdt_spec in
// include/kernel_exporter/usdt.bpf.h.
func TestSpecLayout(t *testing.T) {
	args := ParseArgs(elf.EM_X86_64, "-4@%edi 8@24(%rax,%rbx,8) 2@$-3 4@%ah", 0, nil)
	s, err := NewSpec(elf.EM_X86_64, args)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := s.MarshalBinary()
	if len(b) != SpecSize || SpecSize != 200 {
		t.Fatalf("spec is %d bytes, SpecSize %d, want 200", len(b), SpecSize)
	}
	bo := binary.NativeEndian
	arg := func(i int) (off int64, reg, idx int16, kind, size, signed, shift uint8) {
		a := b[i*16:]
		return int64(bo.Uint64(a)), int16(bo.Uint16(a[8:])), int16(bo.Uint16(a[10:])), a[12], a[13], a[14], a[15]
	}
	type row struct {
		off                       int64
		reg, idx                  int16
		kind, size, signed, shift uint8
	}
	for i, want := range []row{
		{0, 112, -1, 2, 4, 1, 0}, // %edi: pt_regs->di
		{24, 80, 40, 3, 8, 0, 3}, // 24(%rax,%rbx,8)
		{-3, -1, -1, 1, 2, 0, 0}, // $-3
		{0, -1, -1, 0, 0, 0, 0},  // %ah: unsupported
	} {
		var got row
		got.off, got.reg, got.idx, got.kind, got.size, got.signed, got.shift = arg(i)
		if got != want {
			t.Errorf("arg %d: got %+v, want %+v", i, got, want)
		}
	}
	if n := bo.Uint32(b[MaxArgs*16:]); n != 4 {
		t.Errorf("nargs = %d, want 4", n)
	}
	if _, err := NewSpec(elf.EM_X86_64, make([]Arg, MaxArgs+1)); err == nil {
		t.Error("13 arguments: want an error")
	}
}

// buildTarget compiles testdata/sdt_*.c with the system C compiler.
func buildTarget(t *testing.T, opt string) string {
	t.Helper()
	cc := ""
	for _, c := range []string{"cc", "gcc", "clang-19", "clang"} {
		if p, err := exec.LookPath(c); err == nil {
			cc = p
			break
		}
	}
	if cc == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("no C compiler (make test-deps installs gcc)")
		}
		t.Skip("no C compiler")
	}
	out := filepath.Join(t.TempDir(), "sdt_target"+opt)
	cmd := exec.Command(cc, opt, "-o", out, "testdata/sdt_target.c", "testdata/sdt_gated.c")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s(sys/sdt.h is in Debian's systemtap-sdt-dev; make test-deps installs it)", cmd, err, b)
	}
	return out
}

func TestOpenTarget(t *testing.T) {
	for _, opt := range []string{"-O0", "-O2"} {
		t.Run(opt, func(t *testing.T) {
			bin := buildTarget(t, opt)
			f, err := Open(bin)
			if err != nil {
				t.Fatal(err)
			}
			if f.Machine != elf.EM_X86_64 && f.Machine != elf.EM_AARCH64 {
				t.Fatalf("machine %v", f.Machine)
			}
			want := []string{"ketest:args", "ketest:consts", "ketest:gated", "ketest:global", "ketest:noargs", "ketest:twice"}
			if got := f.Names(); !reflect.DeepEqual(got, want) {
				t.Fatalf("probes %v, want %v", got, want)
			}
			data, err := os.ReadFile(bin)
			if err != nil {
				t.Fatal(err)
			}
			ef, err := elf.Open(bin)
			if err != nil {
				t.Fatal(err)
			}
			defer ef.Close()
			for _, p := range f.Probes {
				// Every site is the nop <sys/sdt.h> plants.
				if p.Offset >= uint64(len(data)) || (f.Machine == elf.EM_X86_64 && data[p.Offset] != 0x90) {
					t.Errorf("%s: byte at file offset %#x is not a nop", p.String(), p.Offset)
				}
				for _, a := range p.Args {
					if a.Err != nil {
						t.Errorf("%s: %v", p.String(), a.Err)
					}
				}
			}
			if n := len(f.Find("ketest", "twice")); n != 2 {
				t.Errorf("ketest:twice has %d sites, want 2", n)
			}
			nargs := map[string]int{"args": 3, "consts": 2, "gated": 1, "global": 1, "noargs": 0, "twice": 1}
			for name, n := range nargs {
				for _, p := range f.Find("ketest", name) {
					if len(p.Args) != n {
						t.Errorf("%s: %d args (%q), want %d", p.String(), len(p.Args), p.ArgsText, n)
					}
				}
			}
			c := f.Find("ketest", "consts")[0]
			if c.Args[0].Kind != ArgConst || c.Args[0].Value != 5 || c.Args[1].Value != -7 || !c.Args[1].Signed || c.Args[1].Size != 4 {
				t.Errorf("consts args %+v", c.Args)
			}
			a := f.Find("ketest", "args")[0]
			if sz := []int{a.Args[0].Size, a.Args[1].Size, a.Args[2].Size}; !reflect.DeepEqual(sz, []int{4, 8, 1}) ||
				!a.Args[0].Signed || !a.Args[1].Signed || a.Args[2].Signed {
				t.Errorf("args sizes/signs: %+v", a.Args)
			}

			// The semaphore: only ketest:gated has one, and its file offset
			// is where the symbol ketest_gated_semaphore's bytes are.
			syms, _ := ef.Symbols()
			var sem elf.Symbol
			for _, s := range syms {
				if s.Name == "ketest_gated_semaphore" {
					sem = s
				}
			}
			for _, p := range f.Probes {
				if (p.Name == "gated") != (p.Semaphore != 0) {
					t.Errorf("%s: semaphore %#x", p.String(), p.Semaphore)
				}
			}
			g := f.Find("ketest", "gated")[0]
			if g.Semaphore != sem.Value {
				t.Errorf("gated semaphore %#x, symbol at %#x", g.Semaphore, sem.Value)
			}
			sec := ef.Sections[sem.Section]
			if wantOff := sem.Value - sec.Addr + sec.Offset; g.SemaphoreOffset != wantOff || sec.Name != ".probes" {
				t.Errorf("gated semaphore file offset %#x, want %#x (section %s)", g.SemaphoreOffset, wantOff, sec.Name)
			}
		})
	}
}

// TestGlobalArgRIP checks that a %rip-relative argument naming a global
// resolves to the global's address relative to the probe site.
func TestGlobalArgRIP(t *testing.T) {
	bin := buildTarget(t, "-O2")
	f, err := Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	ef, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	syms, _ := ef.Symbols()
	var counter uint64
	for _, s := range syms {
		if s.Name == "ketest_counter" {
			counter = s.Value
		}
	}
	p := f.Find("ketest", "global")[0]
	a := p.Args[0]
	if a.Base != "rip" {
		t.Skipf("compiler chose %q for the global, not a %%rip operand", a.Text)
	}
	if uint64(int64(p.PC)+a.Value) != counter {
		t.Errorf("pc %#x + %d = %#x, want &ketest_counter %#x", p.PC, a.Value, uint64(int64(p.PC)+a.Value), counter)
	}
}

func TestNoNotes(t *testing.T) {
	f, err := Open("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Probes) != 0 {
		t.Errorf("go test binary has probes: %v", f.Names())
	}
	if _, err := NewFile(bytes.NewReader([]byte("not an ELF file"))); err == nil {
		t.Error("want an error for a non-ELF file")
	}
}

// TestMalformedNotes feeds truncated note sections through the parser.
func TestMalformedNotes(t *testing.T) {
	bo := binary.LittleEndian
	note := func(namesz, descsz uint32, name string, desc []byte) []byte {
		b := bo.AppendUint32(nil, namesz)
		b = bo.AppendUint32(b, descsz)
		b = bo.AppendUint32(b, noteType)
		n := make([]byte, align4(namesz))
		copy(n, name)
		b = append(b, n...)
		b = append(b, desc...)
		return append(b, make([]byte, align4(descsz)-uint64(descsz))...)
	}
	desc := make([]byte, 24)
	desc = append(desc, "prov\x00name\x00-4@%edi\x00"...)
	if _, err := parseNote(desc, bo, 8); err != nil {
		t.Errorf("good note: %v", err)
	}
	if _, err := parseNote(desc[:20], bo, 8); err == nil {
		t.Error("short descriptor: want an error")
	}
	if _, err := parseNote(append(make([]byte, 24), "\x00\x00\x00"...), bo, 8); err == nil {
		t.Error("empty provider: want an error")
	}
	sec := append(note(8, uint32(len(desc)), noteOwner, desc), note(4, 4, "GNU", []byte{1, 2, 3, 4})...)
	sec = append(sec, note(8, uint32(len(desc)), noteOwner, desc)...)
	descs, err := stapsdtNotes(sec, bo)
	if err != nil || len(descs) != 2 || !bytes.Equal(descs[1], desc) {
		t.Errorf("two stapsdt notes and a GNU one: got %d descriptors, %v", len(descs), err)
	}
	for _, cut := range []int{5, 12 + 8, len(sec) - 3} {
		if _, err := stapsdtNotes(sec[:cut], bo); err == nil {
			t.Errorf("section cut at %d bytes: want an error", cut)
		}
	}
}

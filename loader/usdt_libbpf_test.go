// SPDX-License-Identifier: Apache-2.0

package loader

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"
)

// testSym is a symbol of testObject: name, info, other and section index.
type testSym struct {
	name        string
	info, other byte
	shndx       uint16
}

// testObject builds a little-endian ELF64 relocatable BPF object with
// sections .maps (index 1), .text (2), .symtab (3) and .strtab (4), and
// the given symbols after the null one.
func testObject(syms []testSym) []byte {
	le := binary.LittleEndian
	shstr := []byte("\x00.maps\x00.text\x00.symtab\x00.strtab\x00")
	str := []byte{0}
	var symtab []byte = make([]byte, 24)
	for _, s := range syms {
		off := uint32(len(str))
		str = append(append(str, s.name...), 0)
		e := le.AppendUint32(nil, off)
		e = append(e, s.info, s.other)
		e = le.AppendUint16(e, s.shndx)
		e = le.AppendUint64(e, 0)
		e = le.AppendUint64(e, 8)
		symtab = append(symtab, e...)
	}
	maps, text := make([]byte, 16), make([]byte, 8)
	// Layout: header (64), shstrtab, .maps, .text, .symtab, .strtab, section headers.
	body := [][]byte{shstr, maps, text, symtab, str}
	offs := make([]uint64, len(body))
	off := uint64(64)
	for i, b := range body {
		offs[i] = off
		off += uint64(len(b))
	}
	shoff := (off + 7) &^ 7
	h := make([]byte, 64)
	copy(h, elf.ELFMAG)
	h[4], h[5], h[6] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), 1
	le.PutUint16(h[16:], uint16(elf.ET_REL))
	le.PutUint16(h[18:], uint16(elf.EM_BPF))
	le.PutUint32(h[20:], 1)
	le.PutUint64(h[40:], shoff)
	le.PutUint16(h[52:], 64)
	le.PutUint16(h[58:], 64)
	le.PutUint16(h[60:], 6) // null + 5 sections
	le.PutUint16(h[62:], 5) // .shstrtab is the last
	out := h
	for _, b := range body {
		out = append(out, b...)
	}
	out = append(out, make([]byte, shoff-uint64(len(out)))...)
	sh := func(name uint32, typ elf.SectionType, i int, link, entsize uint32) []byte {
		b := make([]byte, 64)
		le.PutUint32(b, name)
		le.PutUint32(b[4:], uint32(typ))
		le.PutUint64(b[24:], offs[i])
		le.PutUint64(b[32:], uint64(len(body[i])))
		le.PutUint32(b[40:], link)
		le.PutUint64(b[48:], 8)
		le.PutUint64(b[56:], uint64(entsize))
		return b
	}
	out = append(out, make([]byte, 64)...)
	out = append(out, sh(1, elf.SHT_PROGBITS, 1, 0, 0)...) // .maps
	out = append(out, sh(7, elf.SHT_PROGBITS, 2, 0, 0)...) // .text
	out = append(out, sh(13, elf.SHT_SYMTAB, 3, 4, 24)...) // .symtab, names in .strtab
	out = append(out, sh(21, elf.SHT_STRTAB, 4, 0, 0)...)  // .strtab
	return append(out, sh(0, elf.SHT_STRTAB, 0, 0, 0)...)  // .shstrtab (named "")
}

// TestLibbpfObject checks the rewrite ParseObject applies before
// cilium/ebpf parses an object: weak map symbols become global (in a copy),
// other weak or local symbols stay, and hidden global functions are
// collected.
func TestLibbpfObject(t *testing.T) {
	weakObj := elf.ST_INFO(elf.STB_WEAK, elf.STT_OBJECT)
	obj := testObject([]testSym{
		{"__bpf_usdt_specs", weakObj, 0, 1},
		{"global_map", elf.ST_INFO(elf.STB_GLOBAL, elf.STT_OBJECT), 0, 1},
		{"weak_elsewhere", weakObj, 0, 2},
		{"bpf_usdt_arg", elf.ST_INFO(elf.STB_WEAK, elf.STT_FUNC), byte(elf.STV_HIDDEN), 2},
		{"visible_fn", elf.ST_INFO(elf.STB_GLOBAL, elf.STT_FUNC), 0, 2},
	})
	orig := bytes.Clone(obj)
	out, hidden := libbpfObject(obj)
	if !bytes.Equal(obj, orig) {
		t.Fatal("the input object was modified")
	}
	f, err := elf.NewFile(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	binds := map[string]elf.SymBind{}
	for _, s := range syms {
		binds[s.Name] = elf.ST_BIND(s.Info)
	}
	for name, want := range map[string]elf.SymBind{
		"__bpf_usdt_specs": elf.STB_GLOBAL, "global_map": elf.STB_GLOBAL, "weak_elsewhere": elf.STB_WEAK,
		"bpf_usdt_arg": elf.STB_WEAK, "visible_fn": elf.STB_GLOBAL,
	} {
		if binds[name] != want {
			t.Errorf("%s: binding %v, want %v", name, binds[name], want)
		}
	}
	if len(hidden) != 1 || !hidden["bpf_usdt_arg"] {
		t.Errorf("hidden functions %v, want bpf_usdt_arg only", hidden)
	}
	// Nothing to rewrite: the same slice comes back.
	plain := testObject([]testSym{{"m", elf.ST_INFO(elf.STB_GLOBAL, elf.STT_OBJECT), 0, 1}})
	if out, _ := libbpfObject(plain); &out[0] != &plain[0] {
		t.Error("an object without weak maps was copied")
	}
	// Not an ELF object, or a truncated one: returned as is.
	for _, b := range [][]byte{[]byte("not elf"), obj[:100]} {
		if out, h := libbpfObject(b); !bytes.Equal(out, b) || len(h) != 0 {
			t.Errorf("%d bytes of non-object: rewritten", len(b))
		}
	}
}

// TestResolveBinary checks how a usdt section's binary is found: paths as
// they are, library names as the dynamic loader finds them, other bare
// names in the standard directories (executable regular files only).
func TestResolveBinary(t *testing.T) {
	dir := t.TempDir()
	defer func(d []string) { executableDirs = d }(executableDirs)
	other := t.TempDir()
	executableDirs = []string{dir, other}
	os.WriteFile(filepath.Join(dir, "noexec"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(other, "noexec"), []byte("x"), 0o755)
	os.WriteFile(filepath.Join(dir, "tool"), []byte("x"), 0o755)
	os.Mkdir(filepath.Join(dir, "adir"), 0o755)
	for name, want := range map[string]string{
		"tool":      filepath.Join(dir, "tool"),
		"noexec":    filepath.Join(other, "noexec"),
		"/abs/path": "/abs/path",
		"rel/path":  "rel/path",
	} {
		if got, err := ResolveBinary(name); err != nil || got != want {
			t.Errorf("%s -> %q, %v; want %s", name, got, err, want)
		}
	}
	for _, name := range []string{"adir", "missing", "..", "libno-such-library.so.9"} {
		_, err := ResolveBinary(name)
		if err == nil {
			t.Errorf("%s: resolved", name)
			continue
		}
		if name == "missing" && !strings.Contains(err.Error(), "executable missing not found in "+dir+", "+other) {
			t.Errorf("%s: error %v", name, err)
		}
	}
}

// TestPrepareLibbpfUSDT parses the prebuilt test object built with the
// system libbpf's usdt.bpf.h and checks what Load will get: the spec
// layout of libbpf 0.8-1.6, the hidden helpers static, and every load of
// LINUX_HAS_BPF_COOKIE pointed at the frozen answer map.
func TestPrepareLibbpfUSDT(t *testing.T) {
	data, err := os.ReadFile("../integration/testdata/fallback/usdt_libbpf.bpf.o")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := ParseObject("usdt_libbpf.bpf.o", data)
	if err != nil {
		t.Fatal(err)
	}
	lu, err := prepareLibbpfUSDT(spec)
	if err != nil {
		t.Fatal(err)
	}
	if lu == nil || lu.layout.SpecSize != 208 || lu.layout.MaxArgs != 12 || lu.layout.HasSIB {
		t.Fatalf("layout %+v, want 208 bytes, 12 arguments, no SIB", lu)
	}
	m := spec.Maps[libbpfCookieMap]
	if m == nil || m.Flags&unix.BPF_F_RDONLY_PROG == 0 || len(m.Contents) != 1 || m.Contents[0].Value != uint64(b2i(lu.cookie)) {
		t.Fatalf("cookie map %+v, want read-only holding %v", m, lu.cookie)
	}
	var loads, static int
	for _, ps := range spec.Programs {
		for i := range ps.Instructions {
			ins := &ps.Instructions[i]
			if ins.OpCode.IsDWordLoad() && ins.Src == asm.PseudoMapValue {
				if ins.Reference() == "" {
					t.Errorf("%s: instruction %d: a map-value load without a map is left", ps.Name, i)
				}
				if ins.Reference() == libbpfCookieMap {
					loads++
				}
			}
			if fn := btf.FuncMetadata(ins); fn != nil && strings.HasPrefix(fn.Name, "bpf_usdt_") {
				if fn.Linkage != btf.StaticFunc {
					t.Errorf("%s: hidden helper %s has linkage %v", ps.Name, fn.Name, fn.Linkage)
				}
				static++
			}
		}
	}
	if loads == 0 || static == 0 {
		t.Errorf("%d loads of %s rewritten, %d hidden helpers seen; want some of each", loads, libbpfCookieVar, static)
	}
	// Again (a Load of a copy after alternatives): nothing changes.
	if _, err := prepareLibbpfUSDT(spec); err != nil {
		t.Fatal(err)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

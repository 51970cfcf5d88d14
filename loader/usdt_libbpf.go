// SPDX-License-Identifier: Apache-2.0

package loader

// Objects built with libbpf's <bpf/usdt.bpf.h> (ebpf_exporter's usdt
// example): what cilium/ebpf does not do for them, done here without
// changing cilium/ebpf.
//
//   - The header declares its two maps __weak. cilium/ebpf v0.22 refuses an
//     instruction that refers to a map through a weak symbol ("unsupported
//     binding: STB_WEAK"). In a single object a weak definition is the
//     definition, so ParseObject makes the .maps symbols global in a copy of
//     the object before parsing it (weakMapsGlobal).
//   - The header reads `extern const _Bool LINUX_HAS_BPF_COOKIE __kconfig`,
//     which cilium/ebpf takes for a kernel config option and fails to find.
//     prepareLibbpfUSDT points its loads at a frozen one-entry array map of
//     our own holding 1 when the kernel has bpf_get_attach_cookie (5.15+),
//     0 otherwise (the header then looks the spec id up by probe address).
//   - The loader fills __bpf_usdt_specs in libbpf's layout, read from the
//     object's BTF (usdt.LibbpfLayout), and gives each uprobe its spec id as
//     BPF cookie, as libbpf does.

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/features"
	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/usdt"
)

// libbpfCookieVar is libbpf's __kconfig variable saying whether the kernel
// has BPF cookies; libbpfCookieMap the map prepareLibbpfUSDT gives it.
const (
	libbpfCookieVar = "LINUX_HAS_BPF_COOKIE"
	// The ".rodata" prefix makes cilium/ebpf freeze the map after filling it.
	libbpfCookieMap = ".rodata.ke_cookie"
)

// libbpfObject prepares a BPF object for cilium/ebpf as libbpf would load
// it. It returns obj with every weak object symbol of a .maps section bound
// global instead (in a copy; obj itself when there is none, or when obj is
// not an ELF64 object it can read: the parser then reports what is wrong),
// and the names of the functions with hidden visibility, whose BTF libbpf
// marks static (see staticHidden).
func libbpfObject(obj []byte) ([]byte, map[string]bool) {
	f, err := usdt.ReadELF(bytes.NewReader(obj))
	if err != nil || f.Class != elf.ELFCLASS64 {
		return obj, nil
	}
	defer f.Close()
	maps := map[uint16]bool{}
	for i, s := range f.Sections {
		if s.Name == ".maps" && i < int(elf.SHN_LORESERVE) {
			maps[uint16(i)] = true
		}
	}
	// Elf64_Sym: name u32, info u8, other u8, shndx u16, value u64, size u64.
	const symSize = 24
	out, copied := obj, false
	hidden := map[string]bool{}
	for _, s := range f.Sections {
		if s.Type != elf.SHT_SYMTAB || s.Offset > uint64(len(obj)) || s.Size > uint64(len(obj))-s.Offset {
			continue
		}
		var names []byte
		if int(s.Link) < len(f.Sections) {
			st := f.Sections[s.Link]
			if st.Type == elf.SHT_STRTAB && st.Offset <= uint64(len(obj)) && st.Size <= uint64(len(obj))-st.Offset {
				names = obj[st.Offset : st.Offset+st.Size]
			}
		}
		for off := s.Offset; off+symSize <= s.Offset+s.Size; off += symSize {
			info, other := obj[off+4], obj[off+5]
			if elf.ST_TYPE(info) == elf.STT_FUNC && elf.ST_VISIBILITY(other) == elf.STV_HIDDEN && elf.ST_BIND(info) != elf.STB_LOCAL {
				if n := cString(names, f.ByteOrder.Uint32(obj[off:])); n != "" && len(hidden) < maxHiddenFuncs {
					hidden[n] = true
				}
			}
			shndx := f.ByteOrder.Uint16(obj[off+6:])
			if elf.ST_BIND(info) != elf.STB_WEAK || elf.ST_TYPE(info) != elf.STT_OBJECT || !maps[shndx] {
				continue
			}
			if !copied {
				out, copied = bytes.Clone(obj), true
			}
			out[off+4] = byte(elf.STB_GLOBAL)<<4 | byte(elf.STT_OBJECT)
		}
	}
	return out, hidden
}

// maxHiddenFuncs bounds the hidden function names libbpfObject collects.
const maxHiddenFuncs = 10000

// cString returns the NUL-terminated string at off in tab ("" when off is
// outside it or the string is unterminated).
func cString(tab []byte, off uint32) string {
	if uint64(off) >= uint64(len(tab)) {
		return ""
	}
	n := bytes.IndexByte(tab[off:], 0)
	if n < 0 {
		return ""
	}
	return string(tab[off : int(off)+n])
}

// staticHidden gives the BTF of the non-static functions of spec that have
// hidden visibility (__hidden, as libbpf's usdt.bpf.h declares its helpers)
// static linkage, as libbpf does. The verifier checks a global function on
// its own, with any pointer argument possibly NULL, and would reject
// bpf_usdt_arg, which writes through its argument unchecked; a static one
// is checked in the context of each call.
func staticHidden(spec *ebpf.CollectionSpec, hidden map[string]bool) {
	if len(hidden) == 0 {
		return
	}
	for _, ps := range spec.Programs {
		for i := range ps.Instructions {
			if fn := btf.FuncMetadata(&ps.Instructions[i]); fn != nil && hidden[fn.Name] && fn.Linkage != btf.StaticFunc {
				fn.Linkage = btf.StaticFunc
			}
		}
	}
}

// haveBPFCookie reports whether kprobe programs may call
// bpf_get_attach_cookie (Linux 5.15+), probed once.
var haveBPFCookie = sync.OnceValue(func() bool {
	return features.HaveProgramHelper(ebpf.Kprobe, asm.FnGetAttachCookie) == nil
})

// libbpfUSDT is what attaching writes for an object built with libbpf's
// usdt.bpf.h: the layout of its spec map and whether the kernel has BPF
// cookies (without them the spec id is looked up by probe address).
type libbpfUSDT struct {
	layout *usdt.LibbpfLayout
	cookie bool
}

// prepareLibbpfUSDT readies an object that includes libbpf's usdt.bpf.h
// (it has a __bpf_usdt_specs map) for loading: it reads the spec layout
// from the map's BTF and answers LINUX_HAS_BPF_COOKIE (see the top of this
// file). It returns nil for other objects. Errors: a spec layout this
// version does not know (usdt.NewLibbpfLayout), a map of another shape, or
// an object that reads other __kconfig variables besides
// LINUX_HAS_BPF_COOKIE (cilium/ebpf would then fail on it).
func prepareLibbpfUSDT(spec *ebpf.CollectionSpec) (*libbpfUSDT, error) {
	ms := spec.Maps[usdt.LibbpfSpecsMap]
	if ms == nil {
		return nil, nil
	}
	layout, err := usdt.NewLibbpfLayout(ms.Value)
	if err != nil {
		return nil, fmt.Errorf("map %s: %w", usdt.LibbpfSpecsMap, err)
	}
	if ms.Type != ebpf.Array || ms.KeySize != 4 || ms.ValueSize != layout.SpecSize {
		return nil, fmt.Errorf("map %s: want an array of int to %d-byte struct __bpf_usdt_spec, got %s of %d-byte keys to %d-byte values",
			usdt.LibbpfSpecsMap, layout.SpecSize, ms.Type, ms.KeySize, ms.ValueSize)
	}
	if ip := spec.Maps[usdt.LibbpfIPToSpecMap]; ip != nil && (ip.Type != ebpf.Hash || ip.KeySize != 8 || ip.ValueSize != 4) {
		return nil, fmt.Errorf("map %s: want a hash of long to __u32, got %s of %d-byte keys to %d-byte values",
			usdt.LibbpfIPToSpecMap, ip.Type, ip.KeySize, ip.ValueSize)
	}
	lu := &libbpfUSDT{layout: layout, cookie: haveBPFCookie()}
	if err := answerCookieKconfig(spec, lu.cookie); err != nil {
		return nil, err
	}
	return lu, nil
}

// answerCookieKconfig points the loads of LINUX_HAS_BPF_COOKIE at a frozen
// map holding have. cilium/ebpf marks a __kconfig load as a map-value load
// without a map name; when LINUX_HAS_BPF_COOKIE is the object's only
// __kconfig variable, those loads are all of it.
func answerCookieKconfig(spec *ebpf.CollectionSpec, have bool) error {
	var ds *btf.Datasec
	if spec.Types == nil || spec.Types.TypeByName(".kconfig", &ds) != nil {
		return nil
	}
	var found bool
	var others []string
	for _, v := range ds.Vars {
		if n := v.Type.TypeName(); n == libbpfCookieVar {
			found = true
		} else if len(others) < 3 {
			others = append(others, sanitize(n))
		}
	}
	if !found {
		return nil
	}
	if len(others) > 0 {
		return fmt.Errorf("object reads %d __kconfig variables besides %s (%s): not supported together with libbpf's usdt.bpf.h", len(ds.Vars)-1, libbpfCookieVar, strings.Join(others, ", "))
	}
	var val uint64
	if have {
		val = 1
	}
	for _, ps := range spec.Programs {
		for i, ins := range ps.Instructions {
			if !ins.OpCode.IsDWordLoad() || ins.Src != asm.PseudoMapValue || ins.Reference() != "" {
				continue
			}
			if ins.Constant != 0 {
				return fmt.Errorf("program %s: load of %s at instruction %d has offset %d, want 0", ps.Name, libbpfCookieVar, i, ins.Constant)
			}
			n := asm.LoadMapValue(ins.Dst, 0, 0).WithReference(libbpfCookieMap).WithSymbol(ins.Symbol()).WithSource(ins.Source())
			if fn := btf.FuncMetadata(&ins); fn != nil {
				n = btf.WithFuncMetadata(n, fn)
			}
			ps.Instructions[i] = n
		}
	}
	if spec.Maps[libbpfCookieMap] == nil {
		spec.Maps[libbpfCookieMap] = &ebpf.MapSpec{
			Name: libbpfCookieMap, Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 1,
			// Read-only for programs and frozen: the verifier knows the
			// value and drops the branch not taken (and its helper call).
			Flags:    unix.BPF_F_RDONLY_PROG,
			Contents: []ebpf.MapKV{{Key: uint32(0), Value: val}},
		}
	}
	return nil
}

// errNeedCookie is why a position-independent file cannot be traced with
// libbpf's usdt.bpf.h on a kernel without BPF cookies.
var errNeedCookie = errors.New("libbpf's usdt.bpf.h reads the arguments of a position-independent file only with BPF cookies (Linux 5.15+)")

// libbpfSite writes the spec of one probe site into the object's libbpf
// maps under spec id id. With BPF cookies (lu.cookie) the attachment's
// cookie must be id; without them the id is also written under the site's
// address into __bpf_usdt_ip_to_spec_id, which only a file at fixed
// addresses allows (errNeedCookie otherwise).
func (lu *libbpfUSDT) libbpfSite(env *attachEnv, f *usdt.File, site usdt.Probe, id uint32) error {
	specs := env.coll.Maps[usdt.LibbpfSpecsMap]
	if specs == nil {
		return fmt.Errorf("map %s was not loaded", usdt.LibbpfSpecsMap)
	}
	if id >= specs.MaxEntries() {
		return fmt.Errorf("more than %d probe sites in this object (raise BPF_USDT_MAX_SPEC_CNT)", specs.MaxEntries())
	}
	b, err := lu.layout.LibbpfSpec(f.Machine, site.Args, 0)
	if err != nil {
		return err
	}
	if err := specs.Put(id, b); err != nil {
		return fmt.Errorf("write argument spec: %w", err)
	}
	if lu.cookie {
		return nil
	}
	// Without cookies the header looks the spec id up by the probe's
	// address in the process: the link-time address in a fixed-address
	// executable, unknown in a position-independent file.
	if f.Type != elf.ET_EXEC {
		return errNeedCookie
	}
	ips := env.coll.Maps[usdt.LibbpfIPToSpecMap]
	if ips == nil {
		return fmt.Errorf("map %s was not loaded", usdt.LibbpfIPToSpecMap)
	}
	if err := ips.Put(site.PC, id); err != nil {
		return fmt.Errorf("write %s: %w", usdt.LibbpfIPToSpecMap, err)
	}
	return nil
}

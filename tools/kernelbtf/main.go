// SPDX-License-Identifier: Apache-2.0

// Command kernelbtf copies the BTF of a kernel image into a raw BTF file,
// which bpftool turns into a vmlinux.h (tools/vmlinux.sh):
//
//	go run ./tools/kernelbtf -o vmlinux.btf /boot/vmlinuz-6.12.95+deb12-arm64
//
// The input is a kernel that keeps its BTF uncompressed: an ELF vmlinux (its
// .BTF section), a raw BTF file (/sys/kernel/btf/vmlinux), or an arm64
// Image as Debian ships it in /boot (not compressed, with the .BTF section
// loaded as part of the image). For an Image, every offset holding the BTF
// header (magic 0xeb9f, version 1, a 24-byte header) is tried, and the first
// whose type and string sections lie inside the file and parse with
// cilium/ebpf's btf package, with at least 1000 types, is written. A
// compressed kernel (an x86 bzImage) is refused: decompress it first.
package main

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/cilium/ebpf/btf"
)

// maxInput bounds the kernel image read: a distribution's arm64 Image is
// about 45 MB, an ELF vmlinux with BTF but without DWARF a little more.
const maxInput = 512 << 20

// btfHeader is struct btf_header (include/uapi/linux/btf.h).
type btfHeader struct {
	Magic   uint16
	Version uint8
	Flags   uint8
	HdrLen  uint32
	TypeOff uint32
	TypeLen uint32
	StrOff  uint32
	StrLen  uint32
}

func main() {
	out := flag.String("o", "", "raw BTF file to write")
	flag.Parse()
	if *out == "" || flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: kernelbtf -o OUT.btf KERNEL")
		os.Exit(2)
	}
	raw, err := extract(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "kernelbtf:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(*out, raw, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "kernelbtf:", err)
		os.Exit(1)
	}
}

func extract(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() || st.Size() > maxInput {
		return nil, fmt.Errorf("%s: not a regular file of at most %d MiB", path, maxInput>>20)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	if ef, err := elf.NewFile(bytes.NewReader(data)); err == nil {
		sec := ef.Section(".BTF")
		if sec == nil {
			return nil, fmt.Errorf("%s: ELF file without a .BTF section", path)
		}
		raw, err := sec.Data()
		if err != nil {
			return nil, fmt.Errorf("%s: .BTF: %w", path, err)
		}
		return raw, check(raw)
	}
	if bytes.HasPrefix(data, []byte{0x1f, 0x8b}) || bytes.HasPrefix(data, []byte{0xfd, '7', 'z', 'X', 'Z'}) {
		return nil, fmt.Errorf("%s: compressed (gzip or xz): decompress it first", path)
	}
	magic := []byte{0x9f, 0xeb, 1, 0, 24, 0, 0, 0} // little-endian header start
	for off := 0; ; {
		i := bytes.Index(data[off:], magic)
		if i < 0 {
			return nil, fmt.Errorf("%s: no BTF found (not an uncompressed kernel built with CONFIG_DEBUG_INFO_BTF?)", path)
		}
		off += i
		var h btfHeader
		if err := binary.Read(bytes.NewReader(data[off:]), binary.LittleEndian, &h); err == nil {
			end := uint64(h.HdrLen) + max(uint64(h.TypeOff)+uint64(h.TypeLen), uint64(h.StrOff)+uint64(h.StrLen))
			if uint64(off)+end <= uint64(len(data)) {
				raw := data[off : off+int(end)]
				if check(raw) == nil {
					return raw, nil
				}
			}
		}
		off++
	}
}

// check parses raw BTF and wants a kernel's worth of types.
func check(raw []byte) error {
	spec, err := btf.LoadSpecFromReader(bytes.NewReader(raw))
	if err != nil {
		return err
	}
	if _, err := spec.TypeByID(1000); err != nil {
		return fmt.Errorf("not a kernel's BTF: %w", err)
	}
	return nil
}

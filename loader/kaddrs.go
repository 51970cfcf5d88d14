// SPDX-License-Identifier: Apache-2.0

package loader

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"

	"github.com/kernel-exporter/kernel_exporter/bounded"
)

// kallsymsPath is read by setKaddrs (a variable for tests).
var kallsymsPath = "/proc/kallsyms"

// setKaddrs writes the address of each kernel symbol into the object's
// global variable kaddr_<symbol> (a u64 in .rodata or .data), resolved from
// /proc/kallsyms (read through bounded: at most bounded.MaxKallsyms bytes).
func setKaddrs(spec *ebpf.CollectionSpec, syms []string) error {
	if len(syms) == 0 {
		return nil
	}
	want := map[string]uint64{}
	for _, s := range syms {
		want[s] = 0
	}
	f, err := bounded.Open(kallsymsPath, "kallsyms")
	if err != nil {
		return fmt.Errorf("kaddrs: %w", err)
	}
	defer f.Close()
	if err := scanKallsyms(f, want); err != nil {
		return fmt.Errorf("kaddrs: kallsyms %s: %w", kallsymsPath, err)
	}
	return setKaddrsFrom(spec, syms, want)
}

// setKaddrsFrom writes addrs[sym] into kaddr_<sym> for each of syms; a
// zero or missing address is an error (the symbol is not in kallsyms).
func setKaddrsFrom(spec *ebpf.CollectionSpec, syms []string, addrs map[string]uint64) error {
	for _, s := range syms {
		addr := addrs[s]
		if addr == 0 {
			return fmt.Errorf("kaddrs: symbol %q not found in %s (or addresses hidden: run as root)", s, kallsymsPath)
		}
		v, ok := spec.Variables["kaddr_"+s]
		if !ok || v == nil {
			return fmt.Errorf("kaddrs: object has no global variable kaddr_%s", s)
		}
		if err := v.Set(addr); err != nil {
			return fmt.Errorf("kaddrs: set kaddr_%s: %w", s, err)
		}
	}
	return nil
}

// maxKallsymsLine bounds one line of /proc/kallsyms (an address, a type, a
// symbol of at most KSYM_NAME_LEN 512 bytes and a module name).
const maxKallsymsLine = 4096

// scanKallsyms fills want (symbol -> 0) with the first non-zero address of
// each symbol in r, in the format of /proc/kallsyms ("<hex address> <type>
// <symbol> [<module>]"). It reads at most bounded.MaxKallsyms bytes and
// refuses longer input, and lines longer than 4096 bytes; other malformed
// lines are skipped. Errors never quote the input.
func scanKallsyms(r io.Reader, want map[string]uint64) error {
	lr := &io.LimitedReader{R: r, N: bounded.MaxKallsyms + 1}
	sc := bufio.NewScanner(lr)
	sc.Buffer(make([]byte, 0, maxKallsymsLine), maxKallsymsLine)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 {
			continue
		}
		if v, ok := want[fields[2]]; ok && v == 0 {
			addr, err := strconv.ParseUint(fields[0], 16, 64)
			if err == nil {
				want[fields[2]] = addr
			}
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return fmt.Errorf("a line is longer than %d bytes", maxKallsymsLine)
		}
		return err
	}
	if lr.N <= 0 {
		return fmt.Errorf("larger than the %s limit", bounded.Size(bounded.MaxKallsyms))
	}
	return nil
}

// loadKernelBTF reads an external vmlinux BTF file (for kernels without
// /sys/kernel/btf/vmlinux): a raw BTF blob (as /sys/kernel/btf/vmlinux) or
// an ELF vmlinux with a .BTF section. The file is opened through bounded
// (a regular file, never blocking on a FIFO) and checked with checkBTF
// before cilium/ebpf parses it: a raw blob of at most MaxBTF bytes (read
// whole, here), or an ELF file of at most bounded.MaxTarget bytes whose
// .BTF section is at most MaxBTF bytes and whose symbol table (cilium/ebpf
// reads it whole) at most MaxBTFSymbols bytes. Errors name the path.
func loadKernelBTF(path string) (*btf.Spec, error) {
	const what = "BTF file"
	f, size, err := bounded.OpenLimit(path, what, bounded.MaxTarget)
	if err != nil {
		return nil, fmt.Errorf("load BTF: %w", err)
	}
	defer f.Close()
	raw, err := checkBTF(f, size)
	if err != nil {
		return nil, fmt.Errorf("load BTF %s: %w", path, err)
	}
	var rd io.ReaderAt = &budgetReader{r: f, left: btfReadBudget}
	if raw {
		// cilium/ebpf reads a raw blob whole: read it here, bounded,
		// whatever the file became since it was checked.
		data, err := io.ReadAll(io.LimitReader(f, MaxBTF+1))
		if err != nil {
			return nil, fmt.Errorf("load BTF %s: %w", path, err)
		}
		if len(data) > MaxBTF {
			return nil, fmt.Errorf("load BTF %s: raw BTF larger than the %s limit", path, bounded.Size(MaxBTF))
		}
		rd = bytes.NewReader(data)
	}
	s, err := btf.LoadSpecFromReader(rd)
	if err != nil {
		return nil, fmt.Errorf("load BTF %s: %w", path, err)
	}
	return s, nil
}

package loader

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
)

// setKaddrs writes the address of each kernel symbol into the object's
// global variable kaddr_<symbol> (a u64 in .rodata or .data), resolved from
// /proc/kallsyms.
func setKaddrs(spec *ebpf.CollectionSpec, syms []string) error {
	if len(syms) == 0 {
		return nil
	}
	want := map[string]uint64{}
	for _, s := range syms {
		want[s] = 0
	}
	f, err := os.Open("/proc/kallsyms")
	if err != nil {
		return fmt.Errorf("kaddrs: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
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
	for _, s := range syms {
		addr := want[s]
		if addr == 0 {
			return fmt.Errorf("kaddrs: symbol %q not found in /proc/kallsyms (or addresses hidden: run as root)", s)
		}
		v, ok := spec.Variables["kaddr_"+s]
		if !ok {
			return fmt.Errorf("kaddrs: object has no global variable kaddr_%s", s)
		}
		if err := v.Set(addr); err != nil {
			return fmt.Errorf("kaddrs: set kaddr_%s: %w", s, err)
		}
	}
	return nil
}

// loadKernelBTF reads an external vmlinux BTF file (for kernels without
// /sys/kernel/btf/vmlinux).
func loadKernelBTF(path string) (*btf.Spec, error) {
	s, err := btf.LoadSpec(path)
	if err != nil {
		return nil, fmt.Errorf("load BTF %s: %w", path, err)
	}
	return s, nil
}

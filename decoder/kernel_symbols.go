package decoder

import (
	"fmt"

	"github.com/kernel-exporter/kernel_exporter/bounded"
)

// KernelSymbols is the kernel's symbol table as <procRoot>/kallsyms lists
// it when it is read: the kernel image and the modules loaded then, one
// name per address (as the ksym decoder resolves them). It is immutable and
// safe for concurrent use. Package profile resolves kernel stacks with it.
type KernelSymbols struct{ k *kallsyms }

// ReadKernelSymbols reads and parses <procRoot>/kallsyms (at most
// bounded.MaxKallsyms bytes). It fails when the file cannot be read, is
// too large, or shows only zero addresses (kernel.kptr_restrict, or no
// CAP_SYSLOG).
func ReadKernelSymbols(procRoot string) (*KernelSymbols, error) {
	file := joinPath(procRoot, []string{"kallsyms"})
	data, err := bounded.ReadFile(file, "kernel symbol table", bounded.MaxKallsyms)
	if err != nil {
		return nil, err
	}
	k, err := parseKallsyms(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return &KernelSymbols{k: k}, nil
}

// Lookup returns the name of the symbol that contains addr (the one at
// addr or the closest before it, without module), and false for an
// address below the first symbol or above the last.
func (s *KernelSymbols) Lookup(addr uint64) (string, bool) {
	name, ok := s.k.lookup(addr)
	return string(name), ok
}

// Len returns the number of symbols (distinct addresses).
func (s *KernelSymbols) Len() int { return len(s.k.addrs) }

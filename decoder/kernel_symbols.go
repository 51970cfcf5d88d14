// SPDX-License-Identifier: Apache-2.0

package decoder

import (
	"fmt"
	"io"

	"github.com/kernel-exporter/kernel_exporter/bounded"
)

// KernelSymbols is the kernel's symbol table as <procRoot>/kallsyms lists
// it when it is read: the kernel image and the modules loaded then, one
// name per address (as the ksym decoder resolves them). It is immutable and
// safe for concurrent use. Package profile resolves kernel stacks with it.
type KernelSymbols struct{ k *kallsyms }

// ReadKernelSymbols reads and parses <procRoot>/kallsyms (at most
// bounded.MaxKallsyms bytes), leaving out the symbols no stack frame is in:
// the padding before each function (__pfx_, Linux 6.2+, one per function)
// and the kCFI preambles (__cfi_). It fails when the file cannot be read,
// is too large, or shows only zero addresses (kernel.kptr_restrict, or no
// CAP_SYSLOG).
func ReadKernelSymbols(procRoot string) (*KernelSymbols, error) {
	file := joinPath(procRoot, []string{"kallsyms"})
	f, err := bounded.Open(file, "kernel symbol table")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// procfs says the file is empty: read into a buffer that takes a
	// distribution kernel's table in one go, doubling if needed.
	data := make([]byte, 0, 8<<20)
	for {
		if len(data) == cap(data) {
			if len(data) > bounded.MaxKallsyms {
				return nil, &bounded.Error{Path: file, What: "kernel symbol table", Limit: bounded.MaxKallsyms, Err: bounded.ErrTooLarge}
			}
			data = append(data, 0)[:len(data)]
		}
		n, err := f.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if err == io.EOF || (n == 0 && err == nil) {
			break
		}
		if err != nil {
			return nil, &bounded.Error{Path: file, What: "kernel symbol table", Err: err}
		}
	}
	if len(data) > bounded.MaxKallsyms {
		return nil, &bounded.Error{Path: file, What: "kernel symbol table", Limit: bounded.MaxKallsyms, Err: bounded.ErrTooLarge}
	}
	k, err := parseKallsymsSkip(data, false, isPadding)
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

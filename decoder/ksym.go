// SPDX-License-Identifier: Apache-2.0

package decoder

import (
	"fmt"

	"github.com/kernel-exporter/kernel_exporter/config"
)

func init() { register("ksym", newKsym) }

// ksymDecoder turns an 8-byte kernel address (host byte order) into the name
// of the kernel symbol that contains it, from <ProcRoot>/kallsyms: the symbol
// at that address or the closest one before it, without offset or module
// ("tcp_sendmsg"). An address outside the table prints in hex
// ("0xffffffff81000000"; "unknown_addr:0xffffffff81000000" with Env.Compat,
// as cloudflare/ebpf_exporter prints). With Env.Compat names are the
// reference's: a module symbol keeps its module after a tab
// ("nf_hook_slow\t[nf_tables]"), and an address past the last symbol is
// that symbol's (see kallsyms.ref).
//
// Names are not cached: a binary search of the immutable table (~15 ns, no
// lock, no allocation) is cheaper than an LRU lookup (~50 ns, and a mutex
// shared by all scrapes).
type ksymDecoder struct{ e *Env }

func newKsym(e *Env, _ config.Decoder, size int, _ StackMaps) (Decoder, error) {
	if err := checkSize("ksym", size, 8); err != nil {
		return nil, err
	}
	e.prefetchKallsyms()
	return &ksymDecoder{e: e}, nil
}

// Decode fails if in is not 8 bytes or kallsyms cannot be read.
func (d *ksymDecoder) Decode(in []byte) ([]byte, error) {
	if err := checkLen("ksym", in, 8); err != nil {
		return nil, err
	}
	addr, _ := nativeUint(in)
	syms, err := d.e.kallsyms()
	if err != nil {
		return nil, fmt.Errorf("ksym: %w", err)
	}
	if name, ok := syms.lookup(addr); ok {
		return name, nil
	}
	if d.e.Compat {
		// cloudflare/ebpf_exporter's form.
		return hexAddr(append(make([]byte, 0, 31), "unknown_addr:"...), addr), nil
	}
	return hexAddr(make([]byte, 0, 18), addr), nil
}

// SPDX-License-Identifier: Apache-2.0

package decoder

import (
	"fmt"

	"github.com/kernel-exporter/kernel_exporter/config"
)

func init() { register("pci_subclass", newPCISubclass) }

// pciSubclass turns a PCI subclass, given as (class << 8) + subclass (the
// top 16 bits of the 24-bit class of struct pci_dev, class >> 8), into its
// name from the pci.ids database: 264 (0x0108) → "Non-Volatile memory
// controller". Its input is an unsigned integer (see pciDecoder). As in
// cloudflare/ebpf_exporter, a subclass the database does not name prints
// as "unknown pci subclass: 0x0b (class 0x01)", one of an unknown class as
// "unknown pci class: 0xfd", and without a database every value prints as
// "missing pci.ids db".
type pciSubclass struct{ pciDecoder }

func newPCISubclass(e *Env, _ config.Decoder, size int, _ StackMaps) (Decoder, error) {
	d, err := newPCIDecoder(e, "pci_subclass", size)
	if err != nil {
		return nil, err
	}
	return &pciSubclass{d}, nil
}

// Decode fails only on malformed input: a raw field of the wrong width or
// text that is not a decimal number.
func (d *pciSubclass) Decode(in []byte) ([]byte, error) {
	v, err := d.input(in)
	if err != nil {
		return nil, err
	}
	if d.db == nil {
		return missingPCIIDs, nil
	}
	class, sub := v>>8, v&0xff
	if class <= 0xff {
		if _, ok := d.db.classes[uint8(class)]; ok {
			if name, ok := d.db.subclasses[uint16(v)]; ok {
				return name, nil
			}
			return fmt.Appendf(nil, "unknown pci subclass: 0x%02x (class 0x%02x)", sub, class), nil
		}
	}
	return pciUnknown("class", class, 2), nil
}

// SPDX-License-Identifier: Apache-2.0

package decoder

import "github.com/kernel-exporter/kernel_exporter/config"

func init() { register("pci_class", newPCIClass) }

// pciClass turns a PCI base class (the top byte of the 24-bit class of
// struct pci_dev, class >> 16) into its name from the pci.ids database:
// 2 → "Network controller". Its input is an unsigned integer (see
// pciDecoder). A class the database does not name prints as "unknown pci
// class: 0xfd" (hex, at least 2 digits); without a database every value
// prints as "missing pci.ids db", both as in cloudflare/ebpf_exporter.
type pciClass struct{ pciDecoder }

func newPCIClass(e *Env, _ config.Decoder, size int, _ StackMaps) (Decoder, error) {
	d, err := newPCIDecoder(e, "pci_class", size)
	if err != nil {
		return nil, err
	}
	return &pciClass{d}, nil
}

// Decode fails only on malformed input: a raw field of the wrong width or
// text that is not a decimal number.
func (d *pciClass) Decode(in []byte) ([]byte, error) {
	v, err := d.input(in)
	if err != nil {
		return nil, err
	}
	if d.db == nil {
		return missingPCIIDs, nil
	}
	if v <= 0xff {
		if name, ok := d.db.classes[uint8(v)]; ok {
			return name, nil
		}
	}
	return pciUnknown("class", v, 2), nil
}

// SPDX-License-Identifier: Apache-2.0

package decoder

import "github.com/kernel-exporter/kernel_exporter/config"

func init() { register("pci_device", newPCIDevice) }

// pciDevice turns a PCI device, given as (vendor << 16) + device id (the
// 16-bit vendor and device of struct pci_dev), into the device's name from
// the pci.ids database: 2156269568 (0x80861000) → "82542 Gigabit Ethernet
// Controller (Fiber)". Its input is an unsigned integer (see pciDecoder).
// A device the database does not name prints as "unknown pci device:
// 0x80860d57" (hex, at least 4 digits); without a database every value
// prints as "missing pci.ids db", both as in cloudflare/ebpf_exporter. With
// Env.Compat, devices of vendors below 0x1000 print as unknown too, as
// there.
type pciDevice struct{ pciDecoder }

func newPCIDevice(e *Env, _ config.Decoder, size int, _ StackMaps) (Decoder, error) {
	d, err := newPCIDecoder(e, "pci_device", size)
	if err != nil {
		return nil, err
	}
	return &pciDevice{d}, nil
}

// Decode fails only on malformed input: a raw field of the wrong width or
// text that is not a decimal number.
func (d *pciDevice) Decode(in []byte) ([]byte, error) {
	v, err := d.input(in)
	if err != nil {
		return nil, err
	}
	if d.db == nil {
		return missingPCIIDs, nil
	}
	if v <= 0xffffffff && !(d.compat && v < 0x1000<<16) {
		if name, ok := d.db.devices[uint32(v)]; ok {
			return name, nil
		}
	}
	return pciUnknown("device", v, 4), nil
}

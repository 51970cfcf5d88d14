// SPDX-License-Identifier: Apache-2.0

package decoder

import "github.com/kernel-exporter/kernel_exporter/config"

func init() { register("pci_vendor", newPCIVendor) }

// pciVendor turns a PCI vendor id (the 16-bit vendor of struct pci_dev,
// PCI_VENDOR_ID in config space) into the vendor's name from the pci.ids
// database: 32902 (0x8086) → "Intel Corporation". Its input is an unsigned
// integer (see pciDecoder). An id the database does not name prints as
// "unknown pci vendor: 0xbeef" (hex, at least 2 digits); without a database
// every id prints as "missing pci.ids db", both as in
// cloudflare/ebpf_exporter. With Env.Compat, ids below 0x1000 print as
// unknown too, as there.
type pciVendor struct{ pciDecoder }

func newPCIVendor(e *Env, _ config.Decoder, size int, _ StackMaps) (Decoder, error) {
	d, err := newPCIDecoder(e, "pci_vendor", size)
	if err != nil {
		return nil, err
	}
	return &pciVendor{d}, nil
}

// Decode fails only on malformed input: a raw field of the wrong width or
// text that is not a decimal number.
func (d *pciVendor) Decode(in []byte) ([]byte, error) {
	v, err := d.input(in)
	if err != nil {
		return nil, err
	}
	if d.db == nil {
		return missingPCIIDs, nil
	}
	if v <= 0xffff && !(d.compat && v < 0x1000) {
		if name, ok := d.db.vendors[uint16(v)]; ok {
			return name, nil
		}
	}
	return pciUnknown("vendor", v, 2), nil
}

// SPDX-License-Identifier: Apache-2.0

package decoder

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"

	"github.com/kernel-exporter/kernel_exporter/bounded"
)

// The pci.ids database (https://pci-ids.ucw.cz's format, shipped by
// Debian's pci.ids package and as hwdata's) names PCI vendors, devices,
// classes and subclasses for the pci_vendor, pci_device, pci_class and
// pci_subclass decoders. It is a text file of one entry a line:
//
//	# comment
//	8086  Intel Corporation                 vendor: 4 hex digits, 2 spaces, name
//	<TAB>1000  82542 Gigabit Ethernet …      device of the vendor above
//	<TAB><TAB>8086 1000  PRO/1000 Gigabit … subsystem (ignored)
//	C 02  Network controller                class: "C", 2 hex digits, name
//	<TAB>00  Ethernet controller            subclass of the class above
//	<TAB><TAB>00  …                         programming interface (ignored)
//
// The file is read once, on the first pci_* decoder an Env builds, from the
// first of PCIIDsPaths that exists.

// PCIIDsPaths are where the database is looked for, in order (as
// cloudflare/ebpf_exporter does).
var PCIIDsPaths = []string{"/usr/share/misc/pci.ids", "/usr/share/hwdata/pci.ids"}

// Bounds of the pci.ids database: the file (about 1.4 MB today) is refused
// when larger than MaxPCIIDsSize, and lines longer than MaxPCIIDsLine bytes
// (the longest is under 200) are skipped as malformed.
const (
	MaxPCIIDsSize = 16 << 20 // 16 MiB
	MaxPCIIDsLine = 1024
)

// missingPCIIDs is what every pci_* decoder prints when no database file
// exists, as cloudflare/ebpf_exporter does.
var missingPCIIDs = []byte("missing pci.ids db")

// pciDB is a parsed pci.ids database. Names are slices of the file's bytes
// (shared, never modified). It is immutable once parsed.
type pciDB struct {
	vendors    map[uint16][]byte // vendor id → name
	devices    map[uint32][]byte // vendor<<16 | device → name
	classes    map[uint8][]byte  // class → name
	subclasses map[uint16][]byte // class<<8 | subclass → name
	// Malformed counts the lines skipped: too long, an id that is not
	// hex of the right width, no name, or an entry without a parent.
	malformed int
}

// parsePCIIDs parses a pci.ids database. It never fails: blank lines,
// comments, subsystem and programming-interface lines are ignored, and
// malformed lines are skipped and counted. A later duplicate entry replaces
// an earlier one. A trailing CR is dropped from each line.
func parsePCIIDs(data []byte) *pciDB {
	db := &pciDB{
		vendors:    map[uint16][]byte{},
		devices:    map[uint32][]byte{},
		classes:    map[uint8][]byte{},
		subclasses: map[uint16][]byte{},
	}
	const (
		none = iota
		inVendor
		inClass
	)
	state := none
	var vendor uint16
	var class uint8
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		line = bytes.TrimSuffix(line, []byte{'\r'})
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		if len(line) > MaxPCIIDsLine {
			db.malformed++
			continue
		}
		switch {
		case line[0] == 'C' && len(line) > 1 && line[1] == ' ':
			id, name, ok := pciEntry(line[2:], 2)
			if !ok {
				db.malformed++
				state = none
				continue
			}
			class, state = uint8(id), inClass
			db.classes[class] = name
		case line[0] != '\t':
			id, name, ok := pciEntry(line, 4)
			if !ok {
				db.malformed++
				state = none
				continue
			}
			vendor, state = uint16(id), inVendor
			db.vendors[vendor] = name
		case len(line) > 1 && line[1] == '\t':
			// Subsystem or programming interface: not decoded.
		case state == inVendor:
			id, name, ok := pciEntry(line[1:], 4)
			if !ok {
				db.malformed++
				continue
			}
			db.devices[uint32(vendor)<<16|uint32(id)] = name
		case state == inClass:
			id, name, ok := pciEntry(line[1:], 2)
			if !ok {
				db.malformed++
				continue
			}
			db.subclasses[uint16(class)<<8|uint16(id)] = name
		default:
			db.malformed++
		}
	}
	return db
}

// pciEntry parses "<digits hex digits><spaces or tabs><name>". The name
// keeps any trailing blanks, as the file has them.
func pciEntry(s []byte, digits int) (uint32, []byte, bool) {
	if len(s) <= digits {
		return 0, nil, false
	}
	var id uint32
	for _, c := range s[:digits] {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, nil, false
		}
		id = id<<4 | uint32(d)
	}
	rest := s[digits:]
	if rest[0] != ' ' && rest[0] != '\t' {
		return 0, nil, false
	}
	name := bytes.TrimLeft(rest, " \t")
	if len(name) == 0 {
		return 0, nil, false
	}
	return id, name, true
}

// pciIDs returns the Env's database, read on first use from the first of
// e.PCIIDs (PCIIDsPaths when nil) that exists. It returns nil and no error
// when none exists (the decoders then print "missing pci.ids db"), and an
// error naming the path when one exists but cannot be read: not a regular
// file, larger than MaxPCIIDsSize, or unreadable. The error never quotes the
// file's content.
func (e *Env) pciIDs() (*pciDB, error) {
	e.pciOnce.Do(func() {
		paths := e.PCIIDs
		if paths == nil {
			paths = PCIIDsPaths
		}
		for _, p := range paths {
			data, err := bounded.ReadFile(p, "pci.ids database", MaxPCIIDsSize)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				e.pciErr = err
				return
			}
			e.pci = parsePCIIDs(data)
			if e.pci.malformed > 0 {
				slog.Warn("pci.ids database: malformed lines skipped", "path", p, "lines", e.pci.malformed)
			}
			return
		}
		slog.Warn(fmt.Sprintf("no pci.ids database found (install the pci.ids package): the pci_* decoders print %q", missingPCIIDs), "paths", paths)
	})
	return e.pci, e.pciErr
}

// pciDecoder is the common part of the four pci_* decoders: their input is
// an unsigned integer, a raw 1, 2, 4 or 8-byte field or the decimal text
// of an earlier uint decoder (as in cloudflare/ebpf_exporter's
// [uint, pci_vendor] chains).
type pciDecoder struct {
	name string
	size int
	db   *pciDB // nil: no database file, every value is missingPCIIDs
	// compat prints as cloudflare/ebpf_exporter does (Env.Compat): vendor
	// ids below 0x1000 are not found (it looks them up without leading
	// zeros).
	compat bool
}

// newPCIDecoder reads the database (once per Env) and checks the input
// width. Errors: a size other than 0 (text), 1, 2, 4 or 8, or a database
// file that exists but cannot be read (see Env.pciIDs).
func newPCIDecoder(e *Env, name string, size int) (pciDecoder, error) {
	if size != textInput {
		if err := checkSize(name, size, 1, 2, 4, 8); err != nil {
			return pciDecoder{}, err
		}
	}
	db, err := e.pciIDs()
	if err != nil {
		return pciDecoder{}, fmt.Errorf("%s: %w", name, err)
	}
	return pciDecoder{name: name, size: size, db: db, compat: e.Compat}, nil
}

// input returns the decoder's integer input.
func (d *pciDecoder) input(in []byte) (uint64, error) {
	return readInput(d.name, in, d.size)
}

// unknown formats "unknown pci <what>: 0x<v>" with at least digits hex
// digits, as cloudflare/ebpf_exporter prints ids it does not know.
func pciUnknown(what string, v uint64, digits int) []byte {
	return fmt.Appendf(nil, "unknown pci %s: 0x%0*x", what, digits, v)
}

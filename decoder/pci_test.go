// SPDX-License-Identifier: Apache-2.0

package decoder

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kernel-exporter/kernel_exporter/bounded"
	"github.com/kernel-exporter/kernel_exporter/config"
	"github.com/kernel-exporter/kernel_exporter/internal/testenv"
)

// pciEnv is an Env whose pci_* decoders read the given database paths.
func pciEnv(compat bool, paths ...string) *Env {
	e := NewEnv(16)
	e.Compat = compat
	e.PCIIDs = paths
	return e
}

// TestPCIIDsParse checks the parser on testdata/pci.ids: vendors, devices,
// classes and subclasses found, subsystem and programming-interface lines
// ignored, a trailing CR dropped, and the malformed lines counted (a vendor
// id that is not hex, a device under it, a 1-digit subclass id).
func TestPCIIDsParse(t *testing.T) {
	data, err := os.ReadFile("testdata/pci.ids")
	if err != nil {
		t.Fatal(err)
	}
	db := parsePCIIDs(data)
	for _, c := range []struct {
		got  []byte
		want string
	}{
		{db.vendors[0x0014], "Loongson Technology LLC"},
		{db.vendors[0x8086], "Intel Corporation"},
		{db.vendors[0xabcd], "Trailing CR"},
		{db.devices[0x80861000], "82542 Gigabit Ethernet Controller (Fiber)"},
		{db.devices[0x1af41041], "Virtio 1.0 network device"},
		{db.classes[0x06], "Bridge"},
		{db.subclasses[0x0108], "Non-Volatile memory controller"},
		{db.subclasses[0x0604], "PCI bridge"},
	} {
		if string(c.got) != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
	if len(db.vendors) != 4 || len(db.devices) != 3 || len(db.classes) != 2 || len(db.subclasses) != 3 {
		t.Errorf("entries: %d vendors, %d devices, %d classes, %d subclasses; want 4, 3, 2, 3",
			len(db.vendors), len(db.devices), len(db.classes), len(db.subclasses))
	}
	if db.malformed != 3 {
		t.Errorf("malformed = %d, want 3", db.malformed)
	}
	long := "1234  " + strings.Repeat("x", MaxPCIIDsLine) + "\n5678  ok\n"
	db = parsePCIIDs([]byte(long))
	if db.malformed != 1 || len(db.vendors) != 1 || string(db.vendors[0x5678]) != "ok" {
		t.Errorf("long line: malformed %d, vendors %v", db.malformed, db.vendors)
	}
}

// TestPCIDecoders checks the four decoders on testdata/pci.ids, with the
// text input of a uint decoder and a raw field, and the unknown forms of
// cloudflare/ebpf_exporter; with Env.Compat, vendors below 0x1000 are
// unknown as there.
func TestPCIDecoders(t *testing.T) {
	for _, compat := range []bool{false, true} {
		e := pciEnv(compat, "testdata/pci.ids")
		want := func(c, k string) string {
			if compat {
				return c
			}
			return k
		}
		runCases(t, mustNew(t, e, config.Decoder{Name: "pci_vendor"}, textInput), []decodeCase{
			{name: "intel", in: []byte("32902"), out: "Intel Corporation"},
			{name: "unknown", in: []byte("48879"), out: "unknown pci vendor: 0xbeef"},
			{name: "low", in: []byte("20"), out: want("unknown pci vendor: 0x14", "Loongson Technology LLC")},
			{name: "zero", in: []byte("0"), out: "unknown pci vendor: 0x00"},
			{name: "wide", in: []byte("74565"), out: "unknown pci vendor: 0x12345"},
			{name: "bad", in: []byte("x"), err: "pci_vendor: bad number 0x78"},
		})
		runCases(t, mustNew(t, e, config.Decoder{Name: "pci_vendor"}, 2), []decodeCase{
			{name: "raw", in: u16(0x1af4), out: "Red Hat, Inc."},
			{name: "short", in: []byte{1}, err: "pci_vendor: got 1 byte, want 2"},
		})
		runCases(t, mustNew(t, e, config.Decoder{Name: "pci_device"}, textInput), []decodeCase{
			{name: "82542", in: []byte("2156269568"), out: "82542 Gigabit Ethernet Controller (Fiber)"},
			{name: "unknown", in: []byte("3735928559"), out: "unknown pci device: 0xdeadbeef"},
			{name: "host bridge", in: []byte("2156268887"), out: "unknown pci device: 0x80860d57"},
			{name: "low vendor", in: []byte("1341955"), out: want("unknown pci device: 0x147a03", "Gigabit Ethernet Controller")},
			{name: "no vendor", in: []byte("4096"), out: "unknown pci device: 0x1000"},
		})
		runCases(t, mustNew(t, e, config.Decoder{Name: "pci_class"}, textInput), []decodeCase{
			{name: "bridge", in: []byte("6"), out: "Bridge"},
			{name: "unknown", in: []byte("253"), out: "unknown pci class: 0xfd"},
			{name: "wide", in: []byte("4096"), out: "unknown pci class: 0x1000"},
		})
		runCases(t, mustNew(t, e, config.Decoder{Name: "pci_subclass"}, textInput), []decodeCase{
			{name: "nvme", in: []byte("264"), out: "Non-Volatile memory controller"},
			{name: "host bridge", in: []byte("1536"), out: "Host bridge"},
			{name: "unknown class", in: []byte("64768"), out: "unknown pci class: 0xfd"},
			{name: "unknown subclass", in: []byte("267"), out: "unknown pci subclass: 0x0b (class 0x01)"},
			{name: "class 0", in: []byte("3"), out: "unknown pci class: 0x00"},
			{name: "wide", in: []byte("16777215"), out: "unknown pci class: 0xffff"},
		})
	}
}

// TestPCIMissing checks that without a database file every decoder prints
// "missing pci.ids db", as cloudflare/ebpf_exporter does, and that a path
// that exists but is no regular file, or too large, fails the decoder's
// construction with an error naming the path (the config is reported
// down).
func TestPCIMissing(t *testing.T) {
	dir := t.TempDir()
	e := pciEnv(false, filepath.Join(dir, "none"), filepath.Join(dir, "none2"))
	for _, name := range []string{"pci_vendor", "pci_device", "pci_class", "pci_subclass"} {
		runCases(t, mustNew(t, e, config.Decoder{Name: name}, textInput), []decodeCase{
			{name: "missing", in: []byte("1"), out: "missing pci.ids db"},
		})
	}
	newErr(t, pciEnv(false, dir), config.Decoder{Name: "pci_class"}, textInput,
		"pci_class: pci.ids database "+dir+": not a regular file (a directory)")
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, MaxPCIIDsSize+1), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := pciEnv(false, big).New(config.Decoder{Name: "pci_vendor"}, textInput, nil)
	if !errors.Is(err, bounded.ErrTooLarge) || !strings.Contains(err.Error(), big) {
		t.Errorf("large file: %v, want ErrTooLarge naming %s", err, big)
	}
}

// TestPCIRealDatabase checks the decoders against the system's pci.ids
// (Debian's pci.ids package; make test-deps installs it) with the values of
// cloudflare/ebpf_exporter's own tests.
func TestPCIRealDatabase(t *testing.T) {
	e := pciEnv(false)
	db, err := e.pciIDs()
	if err != nil {
		t.Fatal(err)
	}
	if db == nil {
		testenv.SkipOrFail(t, "no pci.ids database in %v (apt-get install pci.ids)", PCIIDsPaths)
	}
	if len(db.vendors) < 1000 || len(db.devices) < 10000 || db.malformed != 0 {
		t.Errorf("%d vendors, %d devices, %d malformed lines: want thousands and none", len(db.vendors), len(db.devices), db.malformed)
	}
	runCases(t, mustNew(t, e, config.Decoder{Name: "pci_vendor"}, textInput), []decodeCase{
		{name: "intel", in: []byte("32902"), out: "Intel Corporation"},
		{name: "amd", in: []byte("4098"), out: "Advanced Micro Devices, Inc. [AMD/ATI]"},
		{name: "nvidia", in: []byte("4318"), out: "NVIDIA Corporation"},
		{name: "unknown", in: []byte("48879"), out: "unknown pci vendor: 0xbeef"},
	})
	runCases(t, mustNew(t, e, config.Decoder{Name: "pci_device"}, textInput), []decodeCase{
		{name: "82542", in: []byte("2156269568"), out: "82542 Gigabit Ethernet Controller (Fiber)"},
		{name: "connectx", in: []byte("364056607"), out: "MT2894 Family [ConnectX-6 Lx]"},
		{name: "unknown", in: []byte("3735928559"), out: "unknown pci device: 0xdeadbeef"},
	})
	runCases(t, mustNew(t, e, config.Decoder{Name: "pci_class"}, textInput), []decodeCase{
		{name: "storage", in: []byte("1"), out: "Mass storage controller"},
		{name: "serial", in: []byte("12"), out: "Serial bus controller"},
		{name: "unknown", in: []byte("253"), out: "unknown pci class: 0xfd"},
	})
	runCases(t, mustNew(t, e, config.Decoder{Name: "pci_subclass"}, textInput), []decodeCase{
		{name: "nvme", in: []byte("264"), out: "Non-Volatile memory controller"},
		{name: "usb", in: []byte("3075"), out: "USB controller"},
		{name: "unknown", in: []byte("267"), out: "unknown pci subclass: 0x0b (class 0x01)"},
	})
}

// FuzzPCIIDs checks that the parser never panics, keeps every name
// non-empty and free of newlines, and counts at most one malformed entry per
// line.
func FuzzPCIIDs(f *testing.F) {
	if data, err := os.ReadFile("testdata/pci.ids"); err == nil {
		f.Add(data)
	}
	f.Add([]byte("C 0\n\t\t\n\t0\nC zz  x\n\tzz  y\n1234\t\tz\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		db := parsePCIIDs(data)
		if lines := strings.Count(string(data), "\n") + 1; db.malformed > lines {
			t.Fatalf("%d malformed of %d lines", db.malformed, lines)
		}
		check := func(name []byte) {
			if len(name) == 0 || strings.ContainsAny(string(name), "\n") || len(name) > MaxPCIIDsLine {
				t.Fatalf("bad name %q", name)
			}
		}
		for _, n := range db.vendors {
			check(n)
		}
		for _, n := range db.devices {
			check(n)
		}
		for _, n := range db.classes {
			check(n)
		}
		for _, n := range db.subclasses {
			check(n)
		}
	})
}

// BenchmarkPCIIDs parses the system's pci.ids database: its time and
// allocations are the one-time cost of the first config with a pci decoder
// (the file's bytes, about 1.4 MB, are kept besides: names point into
// them).
func BenchmarkPCIIDs(b *testing.B) {
	data, err := os.ReadFile(PCIIDsPaths[0])
	if err != nil {
		b.Skip(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		parsePCIIDs(data)
	}
}

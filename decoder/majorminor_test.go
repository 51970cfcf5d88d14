// SPDX-License-Identifier: Apache-2.0

package decoder

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kernel-exporter/kernel_exporter/config"

	"github.com/kernel-exporter/kernel_exporter/internal/testenv"
)

// mkdev encodes a dev_t the way the kernel does.
func mkdev(major, minor uint32) uint32 { return major<<20 | minor }

// udev encodes a dev_t the userspace way (glibc's makedev, the kernel's
// new_encode_dev), written out bit by bit rather than by the decoder's
// formula.
func udev(major, minor uint64) uint64 {
	return minor&0xff | (major&0xfff)<<8 | (minor>>8&0xfff)<<20 | (minor>>20)<<32 | (major>>12)<<44
}

func TestMajorMinor(t *testing.T) {
	sys, proc := t.TempDir(), t.TempDir()
	for id, uevent := range map[string]string{
		"8:0":  "MAJOR=8\nMINOR=0\nDEVNAME=sda\nDEVTYPE=disk\n",
		"8:1":  "MAJOR=8\nMINOR=1\nDEVNAME=sda1\nDEVTYPE=partition\nPARTN=1\n",
		"7:3":  "MAJOR=7\nMINOR=3\n", // no DEVNAME: fall back to partitions
		"9:99": "DEVNAME=\n",
	} {
		dir := filepath.Join(sys, "dev", "block", id)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, "uevent"), uevent)
	}
	writeFile(t, filepath.Join(proc, "partitions"), `major minor  #blocks  name

 259        0  500107608 nvme0n1
 259        1    1048576 nvme0n1p1
   7        3      65536 loop3
`)
	e := NewEnv(16)
	e.SysRoot, e.ProcRoot = sys, proc
	d := mustNew(t, e, config.Decoder{Name: "majorminor"}, 4)
	runCases(t, d, []decodeCase{
		{name: "sda", in: u32(mkdev(8, 0)), out: "sda"},
		{name: "sda1", in: u32(mkdev(8, 1)), out: "sda1"},
		{name: "partitions", in: u32(mkdev(259, 1)), out: "nvme0n1p1"},
		{name: "partitions disk", in: u32(mkdev(259, 0)), out: "nvme0n1"},
		{name: "uevent without name", in: u32(mkdev(7, 3)), out: "loop3"},
		{name: "empty name", in: u32(mkdev(9, 99)), out: "9:99"},
		{name: "unknown", in: u32(mkdev(136, 16)), out: "136:16"},
		{name: "big minor", in: u32(mkdev(4095, 0xfffff)), out: "4095:1048575"},
		{name: "short", in: u16(1), err: "majorminor: got 2 bytes, want 4"},
		// The userspace encoding: 8:1 is 0x801, 259:1 is 0x10301.
		{name: "user sda1", in: u32(0x801), out: "sda1"},
		{name: "user partitions", in: u32(0x10301), out: "nvme0n1p1"},
		{name: "user old 16-bit", in: u32(8<<8 | 0), out: "sda"},
		{name: "user unknown", in: u32(uint32(udev(136, 16))), out: "136:16"},
		{name: "user big", in: u32(uint32(udev(4095, 0xfffff))), out: "4095:1048575"},
		{name: "zero", in: u32(0), out: "0:0"},
		// 259:300 the userspace way is 0x11032c, which as a kernel dev_t is
		// 1:66348: no such device, so the userspace reading is tried.
		{name: "user minor over 255", in: u32(0x11032c), out: "1:66348"},
	})
	writeFile(t, filepath.Join(proc, "partitions"), "major minor  #blocks  name\n\n 259      300   1024 nvme9n1p44\n")
	runCases(t, d, []decodeCase{{name: "user minor over 255 found", in: u32(0x11032c), out: "nvme9n1p44"}})
	writeFile(t, filepath.Join(proc, "partitions"), `major minor  #blocks  name

 259        0  500107608 nvme0n1
 259        1    1048576 nvme0n1p1
   7        3      65536 loop3
`)
	// Names found are cached; unknown devices are not.
	if err := os.RemoveAll(filepath.Join(sys, "dev")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(sys, "dev", "block", "136:16"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(sys, "dev", "block", "136:16", "uevent"), "DEVNAME=sdz\n")
	runCases(t, d, []decodeCase{
		{name: "cached", in: u32(mkdev(8, 1)), out: "sda1"},
		{name: "appeared", in: u32(mkdev(136, 16)), out: "sdz"},
	})

	if err := os.MkdirAll(filepath.Join(sys, "dev", "block", "8:0"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(sys, "dev", "block", "8:0", "uevent"), "DEVNAME=sda\n")
	d = mustNew(t, e, config.Decoder{Name: "majorminor"}, 8)
	runCases(t, d, []decodeCase{
		{name: "u64", in: u64(uint64(mkdev(8, 0))), out: "sda"},
		{name: "high bits ignored", in: u64(0xabcd<<32 | uint64(mkdev(8, 0))), out: "sda"},
		{name: "u64 user", in: u64(udev(8, 1)), out: "sda1"},
		{name: "u64 user unknown", in: u64(udev(0x12345, 0x6789a)), out: "74565:424090"},
	})

	// --compat.ebpf-exporter: unknown devices print as the reference does,
	// read the userspace way.
	c := NewEnv(16)
	c.SysRoot, c.ProcRoot, c.Compat = sys, proc, true
	d = mustNew(t, c, config.Decoder{Name: "majorminor"}, 4)
	runCases(t, d, []decodeCase{
		{name: "compat found", in: u32(0x10301), out: "nvme0n1p1"},
		{name: "compat kernel found", in: u32(mkdev(259, 0)), out: "nvme0n1"},
		{name: "compat unknown", in: u32(uint32(udev(137, 16))), out: "unknown:137:16"},
		{name: "compat zero", in: u32(0), out: "unknown:0:0"},
	})
	newErr(t, e, config.Decoder{Name: "majorminor"}, 2, "majorminor: size 2 not supported (want 4 or 8)")
}

// TestMajorMinorReal decodes every block device of this machine, found in
// /sys/dev/block, from each encoding.
func TestMajorMinorReal(t *testing.T) {
	entries, err := os.ReadDir("/sys/dev/block")
	if err != nil {
		testenv.SkipOrFail(t, "cannot list block devices: %v", err)
	}
	found := 0
	for _, ent := range entries {
		data, err := os.ReadFile(filepath.Join("/sys/dev/block", ent.Name(), "uevent"))
		if err != nil {
			continue
		}
		var name string
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "DEVNAME="); ok {
				name = v
			}
		}
		ma, mi, ok := strings.Cut(ent.Name(), ":")
		major, err1 := strconv.ParseUint(ma, 10, 12)
		minor, err2 := strconv.ParseUint(mi, 10, 20)
		if name == "" || !ok || err1 != nil || err2 != nil {
			continue
		}
		d := mustNew(t, NewEnv(16), config.Decoder{Name: "majorminor"}, 4)
		d8 := mustNew(t, NewEnv(16), config.Decoder{Name: "majorminor"}, 8)
		t.Logf("%s is %s", ent.Name(), name)
		runCases(t, d, []decodeCase{
			{name: ent.Name() + " kernel", in: u32(mkdev(uint32(major), uint32(minor))), out: name},
			{name: ent.Name() + " user", in: u32(uint32(udev(major, minor))), out: name},
		})
		runCases(t, d8, []decodeCase{
			{name: ent.Name() + " kernel u64", in: u64(uint64(mkdev(uint32(major), uint32(minor)))), out: name},
			{name: ent.Name() + " user u64", in: u64(udev(major, minor)), out: name},
		})
		if major < 256 && minor < 256 {
			runCases(t, d, []decodeCase{{name: ent.Name() + " old", in: u32(uint32(major<<8 | minor)), out: name}})
		}
		found++
	}
	if found == 0 {
		testenv.SkipOrFail(t, "no block device with a DEVNAME in /sys/dev/block")
	}
}

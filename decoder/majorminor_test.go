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
	})
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

	d = mustNew(t, e, config.Decoder{Name: "majorminor"}, 8)
	runCases(t, d, []decodeCase{
		{name: "u64", in: u64(uint64(mkdev(8, 0))), out: "sda"},
		{name: "high bits ignored", in: u64(0xabcd<<32 | uint64(mkdev(8, 0))), out: "sda"},
	})
	newErr(t, e, config.Decoder{Name: "majorminor"}, 2, "majorminor: size 2 not supported (want 4 or 8)")
}

// TestMajorMinorReal decodes a block device of this machine, found in
// /sys/dev/block.
func TestMajorMinorReal(t *testing.T) {
	entries, err := os.ReadDir("/sys/dev/block")
	if err != nil {
		testenv.SkipOrFail(t, "cannot list block devices: %v", err)
	}
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
		runCases(t, d, []decodeCase{{name: ent.Name(), in: u32(mkdev(uint32(major), uint32(minor))), out: name}})
		return
	}
	testenv.SkipOrFail(t, "no block device with a DEVNAME in /sys/dev/block")
}

// SPDX-License-Identifier: Apache-2.0

package decoder

import (
	"bytes"
	"strconv"

	"github.com/kernel-exporter/kernel_exporter/bounded"
	"github.com/kernel-exporter/kernel_exporter/config"
)

func init() { register("majorminor", newMajorMinor) }

// majorMinor turns a block device number into the device's name ("vda",
// "nvme0n1p1"). The field is 4 or 8 bytes, in one of two encodings:
//
//   - the kernel's own dev_t (MKDEV in include/linux/kdev_t.h: major in
//     the top 12 bits of a u32, minor in the low 20), as struct bio's
//     bi_bdev->bd_dev and the bundled programs hold it; an 8-byte field
//     holds it in its low 32 bits;
//   - the userspace dev_t (glibc's makedev, the kernel's new_encode_dev
//     since Linux 2.6: minor bits 0-7, major bits 8-19, minor bits 8-19
//     in bits 20-31, and for 8 bytes the major's bits 12-31 in bits 44-63
//     and the minor's bits 20-31 in bits 32-43), as ebpf_exporter's
//     examples pack it. For major and minor below 256 it is also the old
//     16-bit encoding (old_encode_dev: major<<8 | minor).
//
// The two overlap, so both are tried (neither when its major is 0, which
// no block device has: 0 is what ebpf_exporter's examples store for "no
// disk"): a value below 1<<20 is a kernel dev_t of major 0, and is read as
// a userspace one; any other value is read as a kernel dev_t first and, if no device
// has that number, as a userspace one. The name comes from DEVNAME= in
// <SysRoot>/dev/block/<major>:<minor>/uevent, else from
// <ProcRoot>/partitions. A device found under neither reading prints as
// "<major>:<minor>" (of the kernel reading if the value is a kernel dev_t
// of a major other than 0, else of the userspace one), or, when Env.Compat is
// set, as ebpf_exporter prints it: "unknown:<major>:<minor>" of the
// userspace reading. Names found are kept in the Env's LRU cache; numbers
// not found are not, as the device may show up later.
type majorMinor struct {
	e    *Env
	size int
}

func newMajorMinor(e *Env, _ config.Decoder, size int, _ StackMaps) (Decoder, error) {
	if err := checkSize("majorminor", size, 4, 8); err != nil {
		return nil, err
	}
	return &majorMinor{e: e, size: size}, nil
}

// kernelDev splits a kernel dev_t (MKDEV: MINORBITS is 20).
func kernelDev(v uint32) (major, minor uint32) { return v >> 20, v & 0xfffff }

// userDev splits a userspace dev_t as glibc's major() and minor() do; for
// a 32-bit value it is the kernel's new_decode_dev.
func userDev(v uint64) (major, minor uint32) {
	major = uint32(v>>8)&0xfff | uint32(v>>32)&^0xfff
	minor = uint32(v)&0xff | uint32(v>>12)&^0xff
	return major, minor
}

// Decode fails only if in is not as wide as the field.
func (d *majorMinor) Decode(in []byte) ([]byte, error) {
	if err := checkLen("majorminor", in, d.size); err != nil {
		return nil, err
	}
	v, _ := nativeUint(in)
	cache := d.e.deviceCache()
	if name, ok := cache.Get(v); ok {
		return name, nil
	}
	kMajor, kMinor := kernelDev(uint32(v))
	uMajor, uMinor := userDev(v)
	var name []byte
	if kMajor != 0 {
		name = d.e.blockDevName(kMajor, kMinor)
	}
	if name == nil && uMajor != 0 && (uMajor != kMajor || uMinor != kMinor) {
		name = d.e.blockDevName(uMajor, uMinor)
	}
	if name != nil {
		cache.Add(v, name)
		return name, nil
	}
	out := make([]byte, 0, 24)
	major, minor := kMajor, kMinor
	if d.e.Compat {
		out = append(out, "unknown:"...)
		major, minor = uMajor, uMinor
	} else if kMajor == 0 || v>>32 != 0 {
		major, minor = uMajor, uMinor
	}
	out = strconv.AppendUint(out, uint64(major), 10)
	out = append(out, ':')
	return strconv.AppendUint(out, uint64(minor), 10), nil
}

// maxPartitions bounds <ProcRoot>/partitions (about 50 bytes a device).
const maxPartitions = 1 << 20

// blockDevName returns the name of block device major:minor, or nil. The
// uevent file is read up to bounded.MaxSmall bytes and /proc/partitions up
// to maxPartitions; a larger or unreadable file counts as not found.
func (e *Env) blockDevName(major, minor uint32) []byte {
	id := strconv.FormatUint(uint64(major), 10) + ":" + strconv.FormatUint(uint64(minor), 10)
	if data, err := bounded.ReadFile(e.sysPath("dev", "block", id, "uevent"), "device uevent", bounded.MaxSmall); err == nil {
		for line := range bytes.Lines(data) {
			if name, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte("DEVNAME=")); ok && len(name) > 0 {
				return bytes.Clone(name)
			}
		}
	}
	// /proc/partitions: "major minor  #blocks  name", after a header.
	data, err := bounded.ReadFile(e.procPath("partitions"), "partition table", maxPartitions)
	if err != nil {
		return nil
	}
	for line := range bytes.Lines(data) {
		fields := bytes.Fields(line)
		if len(fields) != 4 {
			continue
		}
		ma, err1 := strconv.ParseUint(string(fields[0]), 10, 32)
		mi, err2 := strconv.ParseUint(string(fields[1]), 10, 32)
		if err1 == nil && err2 == nil && uint32(ma) == major && uint32(mi) == minor {
			return bytes.Clone(fields[3])
		}
	}
	return nil
}

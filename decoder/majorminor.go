package decoder

import (
	"bytes"
	"strconv"

	"github.com/kernel-exporter/kernel_exporter/bounded"
	"github.com/kernel-exporter/kernel_exporter/config"
)

func init() { register("majorminor", newMajorMinor) }

// majorMinor turns a block device number into the device's name ("vda",
// "nvme0n1p1"). The field is a kernel dev_t of 4 bytes (major in the top 12
// bits, minor in the low 20, as MKDEV makes it and struct bio's bi_bdev->
// bd_dev holds it) or 8 bytes with that encoding in the low 32 bits. The name
// comes from DEVNAME= in <SysRoot>/dev/block/<major>:<minor>/uevent, else
// from <ProcRoot>/partitions; a device found in neither prints as
// "<major>:<minor>". Names found are kept in the Env's LRU cache.
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

// Decode fails only if in is not as wide as the field.
func (d *majorMinor) Decode(in []byte) ([]byte, error) {
	if err := checkLen("majorminor", in, d.size); err != nil {
		return nil, err
	}
	v, _ := nativeUint(in)
	dev := uint32(v)
	cache := d.e.deviceCache()
	if name, ok := cache.Get(dev); ok {
		return name, nil
	}
	major, minor := dev>>20, dev&0xfffff
	if name := d.e.blockDevName(major, minor); name != nil {
		cache.Add(dev, name)
		return name, nil
	}
	// Not cached: the device may show up later.
	out := strconv.AppendUint(make([]byte, 0, 16), uint64(major), 10)
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

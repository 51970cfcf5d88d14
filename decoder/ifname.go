// SPDX-License-Identifier: Apache-2.0

package decoder

import (
	"github.com/kernel-exporter/kernel_exporter/config"
	"golang.org/x/sys/unix"
)

func init() { register("ifname", newIfname) }

// ifnameDecoder turns a network interface index (ifindex, a u32 of 4 bytes,
// or 8 bytes holding it) into the interface's name in the exporter's network
// namespace: 1 → "lo". An index with no interface prints in decimal
// ("unknown:<index>" with Env.Compat, as cloudflare/ebpf_exporter prints,
// which also reads only the first 4 bytes of an 8-byte field). Names
// found are kept in the Env's LRU cache (ifindexes are not reused until they
// wrap, but a renamed interface keeps its old name until evicted).
type ifnameDecoder struct {
	e    *Env
	size int
}

func newIfname(e *Env, _ config.Decoder, size int, _ StackMaps) (Decoder, error) {
	if err := checkSize("ifname", size, 4, 8); err != nil {
		return nil, err
	}
	return &ifnameDecoder{e: e, size: size}, nil
}

// Decode fails only if in is not as wide as the field.
func (d *ifnameDecoder) Decode(in []byte) ([]byte, error) {
	if err := checkLen("ifname", in, d.size); err != nil {
		return nil, err
	}
	v, _ := nativeUint(in)
	if d.e.Compat {
		// cloudflare/ebpf_exporter reads the first 4 bytes and prints
		// "unknown:<index>" for an index without an interface.
		v, _ = nativeUint(in[:4])
		if v == 0 {
			return []byte("unknown:0"), nil
		}
	}
	if v == 0 || v > 1<<32-1 {
		return appendDecimal(nil, v), nil
	}
	idx := uint32(v)
	cache := d.e.ifnameCache()
	if name, ok := cache.Get(idx); ok {
		return name, nil
	}
	name, err := ifnameByIndex(idx)
	if err != nil {
		if d.e.Compat {
			return appendDecimal([]byte("unknown:"), v), nil
		}
		return appendDecimal(nil, v), nil
	}
	cache.Add(idx, name)
	return name, nil
}

// ifnameByIndex asks the kernel with SIOCGIFNAME: one ioctl, where
// net.InterfaceByIndex dumps every link over netlink.
func ifnameByIndex(idx uint32) ([]byte, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("")
	if err != nil {
		return nil, err
	}
	ifr.SetUint32(idx)
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFNAME, ifr); err != nil {
		return nil, err
	}
	return []byte(ifr.Name()), nil
}

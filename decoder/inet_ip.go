// SPDX-License-Identifier: Apache-2.0

package decoder

import (
	"net/netip"

	"github.com/kernel-exporter/kernel_exporter/config"
)

func init() { register("inet_ip", newInetIP) }

// inetIP turns an IP address in network byte order, as the kernel stores it
// (__be32 saddr, struct in6_addr), into text: 4 bytes are IPv4
// ("192.0.2.1"), 16 bytes IPv6 ("2001:db8::1"). An IPv4-mapped IPv6
// address (::ffff:192.0.2.1) prints as IPv4, so that dual-stack sockets and
// IPv4 ones give the same label.
type inetIP struct{ size int }

func newInetIP(_ *Env, _ config.Decoder, size int, _ StackMaps) (Decoder, error) {
	if err := checkSize("inet_ip", size, 4, 16); err != nil {
		return nil, err
	}
	return &inetIP{size: size}, nil
}

// Decode fails if in is not as wide as the field.
func (d *inetIP) Decode(in []byte) ([]byte, error) {
	if err := checkLen("inet_ip", in, d.size); err != nil {
		return nil, err
	}
	var addr netip.Addr
	if d.size == 4 {
		addr = netip.AddrFrom4([4]byte(in))
	} else {
		addr = netip.AddrFrom16([16]byte(in)).Unmap()
	}
	return addr.AppendTo(make([]byte, 0, 39)), nil
}

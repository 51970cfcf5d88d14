// SPDX-License-Identifier: Apache-2.0

package loader

import (
	"errors"
	"fmt"
	"net"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// attachXDP attaches an XDP program of section "xdp/<ifname>" to that
// network interface of the exporter's network namespace, with a BPF link
// (5.9+), as ebpf_exporter does: no mode flag, so the kernel runs it in the
// driver (native mode) when the driver supports XDP and in the generic
// (skb) path otherwise. Should the driver refuse the program, the attach is
// retried in generic mode. The link detaches when closed, and when the
// exporter exits. Errors name the section and the interface: a missing
// interface, an interface that already has an XDP program (EBUSY), or a
// missing CAP_NET_ADMIN (EPERM), which attaching XDP needs besides CAP_BPF.
func attachXDP(sec, ifname string, prog *ebpf.Program) (link.Link, error) {
	if ifname == "" {
		return nil, fmt.Errorf("section %q: want xdp/<interface>", sec)
	}
	if len(ifname) >= unix.IFNAMSIZ {
		return nil, fmt.Errorf("section %q: interface name longer than %d bytes", sec, unix.IFNAMSIZ-1)
	}
	iface, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, fmt.Errorf("section %q: network interface %s not found in the exporter's network namespace: %v", sec, ifname, err)
	}
	l, err := link.AttachXDP(link.XDPOptions{Program: prog, Interface: iface.Index})
	if err == nil {
		return l, nil
	}
	if errors.Is(err, unix.EBUSY) || errors.Is(err, unix.EEXIST) {
		return nil, fmt.Errorf("section %q: interface %s already has an XDP program: %w", sec, ifname, err)
	}
	if isPermission(err) {
		return nil, fmt.Errorf("section %q: attach XDP to interface %s: %w (needs CAP_NET_ADMIN besides CAP_BPF; grant it, e.g. AmbientCapabilities=CAP_NET_ADMIN in the systemd unit)", sec, ifname, err)
	}
	if errors.Is(err, link.ErrNotSupported) {
		return nil, fmt.Errorf("XDP links %w (5.9+): section %q, interface %s: %v", ErrUnsupported, sec, ifname, err)
	}
	l, gerr := link.AttachXDP(link.XDPOptions{Program: prog, Interface: iface.Index, Flags: link.XDPGenericMode})
	if gerr != nil {
		return nil, fmt.Errorf("section %q: attach XDP to interface %s (index %d): %v; in generic mode: %w", sec, ifname, iface.Index, err, gerr)
	}
	return l, nil
}

// SPDX-License-Identifier: Apache-2.0

package decoder

import (
	"net"
	"testing"

	"github.com/kernel-exporter/kernel_exporter/config"

	"github.com/kernel-exporter/kernel_exporter/internal/testenv"
)

func TestIfname(t *testing.T) {
	ifaces, err := net.Interfaces()
	if err != nil {
		testenv.SkipOrFail(t, "cannot list network interfaces: %v", err)
	}
	e := NewEnv(16)
	d4 := mustNew(t, e, config.Decoder{Name: "ifname"}, 4)
	d8 := mustNew(t, e, config.Decoder{Name: "ifname"}, 8)
	var cases4, cases8 []decodeCase
	for _, ifc := range ifaces {
		cases4 = append(cases4, decodeCase{name: ifc.Name, in: u32(uint32(ifc.Index)), out: ifc.Name})
		cases8 = append(cases8, decodeCase{name: ifc.Name, in: u64(uint64(ifc.Index)), out: ifc.Name})
	}
	cases4 = append(cases4,
		decodeCase{name: "zero", in: u32(0), out: "0"},
		decodeCase{name: "unknown", in: u32(2734686214), out: "2734686214"},
		decodeCase{name: "short", in: u16(1), err: "ifname: got 2 bytes, want 4"},
	)
	cases8 = append(cases8, decodeCase{name: "too big", in: u64(1 << 40), out: "1099511627776"})
	runCases(t, d4, cases4)
	runCases(t, d4, cases4) // cached
	runCases(t, d8, cases8)
	newErr(t, e, config.Decoder{Name: "ifname"}, 2, "ifname: size 2 not supported (want 4 or 8)")
}

func TestIfnameLoopback(t *testing.T) {
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		testenv.SkipOrFail(t, "no loopback interface: %v", err)
	}
	name, err := ifnameByIndex(uint32(lo.Index))
	if err != nil || string(name) != "lo" {
		t.Fatalf("ifnameByIndex(%d) = %q, %v", lo.Index, name, err)
	}
}

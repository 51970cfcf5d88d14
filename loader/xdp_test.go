// SPDX-License-Identifier: Apache-2.0

package loader

import (
	"strings"
	"testing"
)

// TestAttachXDPBadSection: sections without an interface, with a name too
// long for an interface, or naming none of this namespace's interfaces fail
// before anything is attached, naming the section.
func TestAttachXDPBadSection(t *testing.T) {
	for _, tc := range []struct{ sec, ifname, want string }{
		{"xdp", "", `section "xdp": want xdp/<interface>`},
		{"xdp/abcdefghijklmnop", "abcdefghijklmnop", `section "xdp/abcdefghijklmnop": interface name longer than 15 bytes`},
		{"xdp/kenosuch0", "kenosuch0", `section "xdp/kenosuch0": network interface kenosuch0 not found in the exporter's network namespace`},
	} {
		_, err := attachXDP(tc.sec, tc.ifname, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.sec, err, tc.want)
		}
	}
}

// SPDX-License-Identifier: Apache-2.0

package decoder

import (
	"testing"

	"github.com/kernel-exporter/kernel_exporter/config"
)

func TestRegexp(t *testing.T) {
	e := NewEnv(16)
	d := mustNew(t, e, config.Decoder{Name: "regexp", Regexps: []string{"^tcp_", "sendmsg$", `(?i)UDP`}}, 0)
	out, err := d.Decode([]byte("tcp_v4_rcv"))
	if err != nil || string(out) != "tcp_v4_rcv" {
		t.Errorf("match: %q, %v", out, err)
	}
	for _, in := range []string{"inet_sendmsg", "udp_rcv", "__udp4_lib_rcv"} {
		if out, err := d.Decode([]byte(in)); err != nil || string(out) != in {
			t.Errorf("Decode(%q) = %q, %v", in, out, err)
		}
	}
	// Unanchored patterns match anywhere; no match drops the key.
	for _, in := range []string{"ip_rcv", "x_tcp_foo", "sendmsg_locked", ""} {
		if out, err := d.Decode([]byte(in)); err != ErrSkip {
			t.Errorf("Decode(%q) = %q, %v; want ErrSkip", in, out, err)
		}
	}
	d = mustNew(t, e, config.Decoder{Name: "regexp", Regexps: []string{"tcp"}}, 0)
	if out, err := d.Decode([]byte("x_tcp_foo")); err != nil || string(out) != "x_tcp_foo" {
		t.Errorf("unanchored: %q, %v", out, err)
	}

	newErr(t, e, config.Decoder{Name: "regexp", Regexps: []string{"ok", "a("}}, 0,
		"regexp: bad pattern (a string of 2 bytes): missing closing )")
	newErr(t, e, config.Decoder{Name: "regexp", Regexps: []string{`\p{Nope}`}}, 0,
		"regexp: bad pattern (a string of 8 bytes): invalid character class range")
	newErr(t, e, config.Decoder{Name: "regexp"}, 0, "regexp: no patterns (set regexps)")
}

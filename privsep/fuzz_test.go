// SPDX-License-Identifier: Apache-2.0

package privsep

import (
	"strings"
	"testing"
)

// FuzzParseRequest feeds the helper's request parser (the only input the
// privileged helper reads) arbitrary messages: it never panics, accepts
// only "stats" and "tracepoint <group> <event>" with names of 1 to MaxName
// bytes of [A-Za-z0-9_], and its errors and error replies stay bounded and
// printable whatever the message holds.
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{"stats", "stats x", "tracepoint syscalls sys_enter_getpid",
		"tracepoint a", "tracepoint ../x y", "tracepoint a b c", "", " ", "\x00\xff",
		"tracepoint " + strings.Repeat("a", MaxName+1) + " b"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		req, err := parseRequest(msg)
		if err != nil {
			text := err.Error()
			if len(text) > 200 {
				t.Fatalf("error of %d bytes: %.80q...", len(text), text)
			}
			if reply := errorReply(err); len(reply) > MaxReply || !strings.HasPrefix(string(reply), replyErr) {
				t.Fatalf("error reply of %d bytes: %.80q", len(reply), reply)
			}
			return
		}
		switch req.kind {
		case reqStats:
			if string(msg) != reqStats {
				t.Fatalf("accepted %q as stats", msg)
			}
		case reqTracepoint:
			for _, n := range []string{req.group, req.event} {
				if checkName(n) != nil {
					t.Fatalf("accepted tracepoint name %q", n)
				}
			}
			if string(msg) != reqTracepoint+" "+req.group+" "+req.event {
				t.Fatalf("accepted %q as tracepoint %q %q", msg, req.group, req.event)
			}
		default:
			t.Fatalf("accepted %q as kind %q", msg, req.kind)
		}
	})
}

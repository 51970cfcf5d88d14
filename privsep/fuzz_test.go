// SPDX-License-Identifier: Apache-2.0

package privsep

import (
	"strings"
	"testing"

	"github.com/kernel-exporter/kernel_exporter/config"
)

// FuzzParseRequest feeds the worker's request parser (the only input the
// privileged worker reads from the exporter) arbitrary messages: it never
// panics, accepts only "stats", "bpf_objects", "tracepoint <group> <event>" with names of
// 1 to MaxName bytes of [A-Za-z0-9_], and "load <config> <digest>" with a
// plain config name and 64 hex digits or "bundled", and its errors and
// error replies stay bounded and printable whatever the message holds.
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{"stats", "stats x", "tracepoint syscalls sys_enter_getpid",
		"tracepoint a", "tracepoint ../x y", "tracepoint a b c", "", " ", "\x00\xff",
		"tracepoint " + strings.Repeat("a", MaxName+1) + " b",
		"load timers bundled", "bpf_objects", "bpf_objects x", "load ../x bundled", "load x " + strings.Repeat("ab", 32), "load x y z"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		req, err := parseRequest(msg)
		if err != nil {
			text := err.Error()
			if len(text) > 200 {
				t.Fatalf("error of %d bytes: %.80q...", len(text), text)
			}
			if printable(text) != text {
				t.Fatalf("error not printable: %q", text)
			}
			if reply := errorReply(err); len(reply) > MaxReply || !strings.HasPrefix(string(reply), replyErr) {
				t.Fatalf("error reply of %d bytes: %.80q", len(reply), reply)
			}
			return
		}
		switch req.kind {
		case reqStats, reqBPFObjects:
			if string(msg) != req.kind {
				t.Fatalf("accepted %q as %s", msg, req.kind)
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
		case reqLoad:
			if config.CheckName(req.config) != nil || strings.ContainsAny(req.config, "/ ") {
				t.Fatalf("accepted config name %q", req.config)
			}
			if checkDigest(req.digest) != nil {
				t.Fatalf("accepted digest %q", req.digest)
			}
			if string(msg) != reqLoad+" "+req.config+" "+req.digest {
				t.Fatalf("accepted %q as load %q %q", msg, req.config, req.digest)
			}
		default:
			t.Fatalf("accepted %q as kind %q", msg, req.kind)
		}
	})
}

// FuzzParseReply feeds the exporter's parsers of what the helpers send (a
// load's reply messages, the supervisor's messages) arbitrary messages
// with 0 to 3 descriptors: they never panic, accept a message only with
// the descriptors its kind needs, keep names to [A-Za-z0-9_.] and indexes
// in range, and their errors and texts stay bounded and printable.
func FuzzParseReply(f *testing.F) {
	for _, s := range []string{"map counts", "prog p", "link p", "alt 0 -1", "alterr 1 2 text",
		"ok", "error: x", "up 12", "down 12 killed by SIGKILL", "map ../x", "alt 99 0", "\x00\xff", ""} {
		f.Add([]byte(s), uint8(1))
		f.Add([]byte(s), uint8(0))
	}
	f.Fuzz(func(t *testing.T, msg []byte, n uint8) {
		nfds := int(n % 4)
		check := func(what string, err error) {
			if err != nil {
				if text := err.Error(); len(text) > 200 || printable(text) != text {
					t.Fatalf("%s error of %d bytes: %.80q", what, len(text), text)
				}
			}
		}
		m, err := parseLoadMessage(msg, nfds)
		check("load", err)
		if err == nil {
			switch m.kind {
			case msgMap, msgProg:
				if nfds != 1 || checkObjectName(m.name) != nil {
					t.Fatalf("accepted %q with %d descriptors", msg, nfds)
				}
			case msgLink:
				if nfds < 1 || checkObjectName(m.name) != nil {
					t.Fatalf("accepted %q with %d descriptors", msg, nfds)
				}
			case msgAlt, msgAltErr, replyOK, replyErr:
				if nfds != 0 || m.group < 0 || m.group > maxIndex || m.choice < -1 || m.choice > maxIndex {
					t.Fatalf("accepted %q with %d descriptors: %+v", msg, nfds, m)
				}
				if len(m.text) > MaxLoadMessage || printable(m.text) != m.text {
					t.Fatalf("text %q", m.text)
				}
			default:
				t.Fatalf("accepted %q as %q", msg, m.kind)
			}
		}
		s, err := parseSupervisorMessage(msg, nfds)
		check("supervisor", err)
		if err == nil {
			if s.up != (nfds == 1) || s.pid <= 0 || len(s.status) > MaxReply || printable(s.status) != s.status {
				t.Fatalf("accepted %q with %d descriptors: %+v", msg, nfds, s)
			}
		}
	})
}

// FuzzParseArgs feeds the helper's settings parser arbitrary arguments
// (split at NUL bytes): it never panics, and what it accepts is plain
// config names and known attach kinds, and encodes back to the same
// settings.
func FuzzParseArgs(f *testing.F) {
	f.Add([]byte("source=timers=\x00source=rl=/etc/x\x00attach-to=rl=p=vfs_read\x00disable=kprobe\x00btf=/b"))
	f.Add([]byte("source=../x=/d"))
	f.Add([]byte("attach-to=a=b"))
	f.Add([]byte("allow-list=f\x00allow=" + strings.Repeat("0a", 32)))
	f.Fuzz(func(t *testing.T, b []byte) {
		args := strings.Split(string(b), "\x00")
		s, err := ParseArgs(args)
		if err != nil {
			if text := err.Error(); len(text) > 300 {
				t.Fatalf("error of %d bytes", len(text))
			}
			return
		}
		for _, src := range s.Sources {
			if config.CheckName(src.Name) != nil {
				t.Fatalf("accepted config name %q", src.Name)
			}
		}
		again, err := ParseArgs(s.Args())
		if err != nil {
			t.Fatalf("re-parse of %q: %v", s.Args(), err)
		}
		if len(again.Sources) != len(s.Sources) || again.BTFPath != s.BTFPath || len(again.DisableAttach) != len(s.DisableAttach) ||
			(again.Allowed == nil) != (s.Allowed == nil) || len(again.Allowed.Digests()) != len(s.Allowed.Digests()) {
			t.Fatalf("round trip %+v -> %+v", s, again)
		}
	})
}

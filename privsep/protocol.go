// SPDX-License-Identifier: Apache-2.0

// Package privsep keeps the few privileged operations the exporter needs
// after start-up in a separate, small helper process, so that the exporter
// itself, which parses HTTP requests, holds only CAP_BPF.
//
// The model: once every config is attached, the exporter drops every
// capability but CAP_BPF (loader.DropAfterAttach). Two things it still
// does later need more: the CPU budget supervisor turns BPF run-time
// statistics on for a window (BPF_ENABLE_STATS, CAP_SYS_ADMIN), and
// re-attaching a config detached over its budget links tracepoint programs
// to tracepoint perf events (perf_event_open, CAP_PERFMON; the event id is
// read from tracefs, mode 0700: CAP_DAC_READ_SEARCH unless root). Before
// the drop, Start re-executes the exporter's own binary (/proc/self/exe)
// with the hidden command Command and one end of a SOCK_SEQPACKET
// socketpair as file descriptor 3. The helper (Main):
//
//   - keeps HelperCapabilities (CAP_DAC_READ_SEARCH, CAP_SYS_ADMIN,
//     CAP_PERFMON), each only if it had it, in the bounding, permitted
//     and effective sets, and drops every other capability, CAP_BPF
//     included; sets no_new_privs; empties the inheritable and ambient
//     sets (loader.DropCapabilitiesTo);
//
//   - asks for SIGKILL when its parent dies (PR_SET_PDEATHSIG) and exits
//     at end of file on the socket (the exporter closed it or died);
//
//   - reads nothing but its socket, and answers one fixed request per
//     message, at most MaxRequest bytes:
//
//     "stats"                     a BPF_ENABLE_STATS(BPF_STATS_RUN_TIME)
//     file descriptor: statistics are on until every copy is closed
//     "tracepoint <group> <event>" a perf event file descriptor for the
//     tracepoint (PERF_TYPE_TRACEPOINT, every process, CPU 0); group and
//     event are [A-Za-z0-9_], 1 to MaxName bytes
//
//     Each reply is one message: "ok" with the descriptor attached
//     (SCM_RIGHTS; the helper closes its own copy), or "error: <text>" (at
//     most MaxReply bytes) for a failure, a malformed or unknown request.
//
// The client (Client) serializes requests and bounds each wait by
// ReplyTimeout. Client.EnableStats fits budget.CPUOptions.EnableStats;
// Client implements loader.TracepointOpener for exporter re-attaches.
package privsep

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Command is the hidden kingpin command that runs the helper (Main).
const Command = "privileged-helper"

// Protocol bounds.
const (
	// MaxRequest bounds a request message: "tracepoint " and two names.
	MaxRequest = 11 + 2*MaxName + 1
	// MaxName bounds a tracepoint group or event name (tracefs names are
	// at most a few dozen bytes).
	MaxName = 128
	// MaxReply bounds a reply message (an error text is cut to fit).
	MaxReply = 512
	// ReplyTimeout bounds the client's wait for a reply.
	ReplyTimeout = 5 * time.Second
)

// Request kinds.
const (
	reqStats      = "stats"
	reqTracepoint = "tracepoint"
	replyOK       = "ok"
	replyErr      = "error: "
)

// request is one parsed request.
type request struct {
	kind         string // reqStats or reqTracepoint
	group, event string
}

// parseRequest parses and validates one request message. Errors say what
// is wrong without quoting more than a bounded, sanitized excerpt.
func parseRequest(msg []byte) (request, error) {
	if len(msg) > MaxRequest {
		return request{}, fmt.Errorf("request of %d bytes: more than %d", len(msg), MaxRequest)
	}
	fields := strings.Split(string(msg), " ")
	switch fields[0] {
	case reqStats:
		if len(fields) != 1 {
			return request{}, errors.New("stats takes no argument")
		}
		return request{kind: reqStats}, nil
	case reqTracepoint:
		if len(fields) != 3 {
			return request{}, errors.New("want: tracepoint <group> <event>")
		}
		for _, n := range fields[1:] {
			if err := checkName(n); err != nil {
				return request{}, err
			}
		}
		return request{kind: reqTracepoint, group: fields[1], event: fields[2]}, nil
	}
	return request{}, fmt.Errorf("unknown request %q", excerpt(fields[0]))
}

// checkName accepts a tracefs group or event name: 1 to MaxName bytes of
// [A-Za-z0-9_].
func checkName(n string) error {
	if n == "" || len(n) > MaxName {
		return fmt.Errorf("tracepoint name of %d bytes: want 1 to %d", len(n), MaxName)
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return fmt.Errorf("tracepoint name %q: only A-Z, a-z, 0-9 and _ allowed", excerpt(n))
		}
	}
	return nil
}

// excerpt is s cut to 32 bytes with bytes outside printable ASCII as '?'.
func excerpt(s string) string {
	if len(s) > 32 {
		s = s[:32] + "..."
	}
	b := []byte(s)
	for i, c := range b {
		if c < 0x20 || c >= 0x7f {
			b[i] = '?'
		}
	}
	return string(b)
}

// errorReply is the reply message for err, cut to MaxReply bytes.
func errorReply(err error) []byte {
	msg := replyErr + err.Error()
	if len(msg) > MaxReply {
		msg = msg[:MaxReply]
	}
	return []byte(msg)
}

// SPDX-License-Identifier: Apache-2.0

// Package privsep keeps the privileged operations the exporter needs
// after start-up in separate, small helper processes, so that the
// exporter itself, which parses HTTP requests, holds only CAP_BPF.
//
// The model: once every config is attached, the exporter drops every
// capability but CAP_BPF (loader.DropAfterAttach). Three things it still
// does later need more: the CPU budget turns BPF run-time statistics on
// for a window (BPF_ENABLE_STATS, CAP_SYS_ADMIN); re-attaching a config
// detached over its budget links tracepoint programs to tracepoint perf
// events (perf_event_open, CAP_PERFMON; the event id is read from tracefs,
// mode 0700: CAP_DAC_READ_SEARCH unless root); and a reload loads and
// attaches the configs whose files changed (BPF_PROG_LOAD of tracing
// programs needs CAP_PERFMON, attaching most kinds perf events, kaddrs
// CAP_SYSLOG). Before the drop, Start re-executes the exporter's own
// binary (/proc/self/exe) with the hidden command Command, the load
// settings (Settings: the configs it was started with) and one end of a
// SOCK_SEQPACKET socketpair as file descriptor 3. Two processes run from
// it:
//
//   - the supervisor: it keeps HelperCapabilities only to pass them on
//     (permitted, inheritable and ambient; none effective: it makes no
//     privileged call), runs the worker, and when the worker exits tells
//     the exporter and runs a new one after a backoff (RestartBackoff,
//     doubling to MaxRestartBackoff, back to the first after a worker
//     that ran StableRun). It reads nothing from the exporter but the
//     end of file of its socket, which makes it kill the worker, reap it
//     and exit. Neither helper exits at SIGINT or SIGTERM, which a stop
//     sends the whole service: they wait for that end of file (StopGrace).
//     It sends the exporter "up <pid>" with the worker's socket (SCM_RIGHTS)
//     and "down <pid> <status>" when the worker exits.
//
//   - the worker: it keeps HelperCapabilities (each only if it was
//     started with it) in the bounding, permitted and effective sets, and
//     nothing else; sets no_new_privs; empties the inheritable and
//     ambient sets (loader.DropCapabilitiesTo); and answers one request
//     per message on its socket (file descriptor 3), at most MaxRequest
//     bytes:
//
//     "stats"                     a BPF_ENABLE_STATS(BPF_STATS_RUN_TIME)
//     file descriptor: statistics are on until every copy is closed
//     "tracepoint <group> <event>" a perf event file descriptor for the
//     tracepoint (PERF_TYPE_TRACEPOINT, every process, CPU 0); group and
//     event are [A-Za-z0-9_], 1 to MaxName bytes
//     "load <config> <digest>"     config is one of the configs of
//     its Settings (a name, never a path), digest the SHA-256 of the
//     YAML and object bytes the exporter parsed (exporter.SourceDigest)
//     or "bundled": it reads the config from its directory or the
//     embedded bundle, checks the digest, loads and attaches it
//     (exporter.LoadObject), and hands over every map, program and BPF
//     link (loader.Handover) before closing its own copies
//     "bpf_objects"               a sealed memfd listing the host's BPF
//     programs, maps, links and their holders (bpflist.go)
//
//     A reply to stats or tracepoint is one message: "ok" with the
//     descriptor attached (SCM_RIGHTS; the helper closes its own copy),
//     or "error: <text>" (at most MaxReply bytes). A reply to load is a
//     sequence of messages (parseLoadMessage): "map <name>", "prog <name>"
//     each with one descriptor, "link <program>" with 1 to MaxFDsPerMessage,
//     "alt <group> <choice>" and "alterr <group> <choice> <text>" for
//     alternatives, then "ok" or "error: <text>".
//
// Both close every descriptor they inherited but their socket and the
// standard streams before anything else (closeInherited), and ask for
// SIGKILL when their parent dies (PR_SET_PDEATHSIG).
//
// The client (Client) serializes requests, bounds each wait (ReplyTimeout;
// a load Options.LoadTimeout), follows the supervisor's up and down
// messages, and is a prometheus.Collector of
// kernel_exporter_privileged_helper_up and _restarts_total.
// Client.EnableStats fits budget.CPUOptions.EnableStats; Client implements
// loader.TracepointOpener for re-attaches and exporter.ObjectLoader for
// reloads.
package privsep

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/kernel-exporter/kernel_exporter/config"
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
	// MaxReply bounds a reply message (an error text is cut to fit) and
	// a supervisor message.
	MaxReply = 512
	// MaxLoadMessage bounds one message of a load's reply (an
	// alternative's error text is cut to fit).
	MaxLoadMessage = 4096
	// MaxFDsPerMessage bounds the descriptors of one message (the kernel
	// allows 253).
	MaxFDsPerMessage = 64
	// MaxLoadFDs and MaxLoadMessages bound a whole load's reply: a config
	// with 256 perf_events entries on 128 CPUs has 32,768 links.
	MaxLoadFDs      = 65536
	MaxLoadMessages = MaxLoadFDs + 4096
	// ReplyTimeout bounds the client's wait for a reply to stats or
	// tracepoint, and for a worker to be running.
	ReplyTimeout = 5 * time.Second
)

// Request kinds and replies.
const (
	reqStats      = "stats"
	reqTracepoint = "tracepoint"
	reqLoad       = "load"
	replyOK       = "ok"
	replyErr      = "error: "
	// Load reply messages.
	msgMap    = "map"
	msgProg   = "prog"
	msgLink   = "link"
	msgAlt    = "alt"
	msgAltErr = "alterr"
	// Supervisor messages.
	msgUp   = "up"
	msgDown = "down"
)

// digestLen is the length of a SHA-256 in hex.
const digestLen = 64

// bundledDigest is exporter's digest of a bundled program.
const bundledDigest = "bundled"

// request is one parsed request.
type request struct {
	kind         string // reqStats, reqTracepoint, reqLoad or reqBPFObjects
	group, event string // tracepoint
	config       string // load
	digest       string // load
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
	case reqLoad:
		if len(fields) != 3 {
			return request{}, errors.New("want: load <config> <digest>")
		}
		if err := config.CheckName(fields[1]); err != nil {
			return request{}, errors.New(string(cut(printable(err.Error()), 160)))
		}
		if err := checkDigest(fields[2]); err != nil {
			return request{}, err
		}
		return request{kind: reqLoad, config: fields[1], digest: fields[2]}, nil
	case reqBPFObjects: // bpflist.go
		if len(fields) != 1 {
			return request{}, errors.New("bpf_objects takes no argument")
		}
		return request{kind: reqBPFObjects}, nil
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

// checkDigest accepts "bundled" or 64 lower-case hex digits.
func checkDigest(d string) error {
	if d == bundledDigest {
		return nil
	}
	if len(d) != digestLen {
		return fmt.Errorf("digest of %d bytes: want %d hex digits or %q", len(d), digestLen, bundledDigest)
	}
	for i := 0; i < len(d); i++ {
		if c := d[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return errors.New("digest: want lower-case hex digits")
		}
	}
	return nil
}

// excerpt is s cut to 32 bytes with bytes outside printable ASCII as '?'.
func excerpt(s string) string {
	if len(s) > 32 {
		s = s[:32] + "..."
	}
	return printable(s)
}

// printable is s with bytes outside printable ASCII as '?'.
func printable(s string) string {
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
	return cut(replyErr+err.Error(), MaxReply)
}

// cut returns s as bytes, at most n of them.
func cut(s string, n int) []byte {
	if len(s) > n {
		s = s[:n]
	}
	return []byte(s)
}

// loadMessage is one parsed message of a load's reply.
type loadMessage struct {
	kind          string // msgMap, msgProg, msgLink, msgAlt, msgAltErr, replyOK, replyErr
	name          string // map or program
	group, choice int    // alternatives (choice -1: none)
	text          string // error text
}

// maxObjectName bounds a map or program name in a load reply (ELF names:
// cilium/ebpf keeps the whole symbol).
const maxObjectName = 256

// parseLoadMessage parses one message of a load's reply that came with
// nfds descriptors, checking that each kind has the descriptors it needs:
// one for map and prog, 1 to MaxFDsPerMessage for link, none otherwise.
// Names are 1 to 256 bytes of [A-Za-z0-9_.]; group and choice indexes 0
// to 63 (choice -1 in alt: none). Errors quote nothing from the message
// but a sanitized excerpt.
func parseLoadMessage(msg []byte, nfds int) (loadMessage, error) {
	if len(msg) > MaxLoadMessage {
		return loadMessage{}, fmt.Errorf("message of %d bytes: more than %d", len(msg), MaxLoadMessage)
	}
	s := string(msg)
	if text, ok := strings.CutPrefix(s, replyErr); ok {
		if nfds != 0 {
			return loadMessage{}, errors.New("error reply with descriptors")
		}
		return loadMessage{kind: replyErr, text: printable(text)}, nil
	}
	kind, rest, _ := strings.Cut(s, " ")
	wantFDs := func(lo, hi int) error {
		if nfds < lo || nfds > hi {
			return fmt.Errorf("%s message with %d descriptors", kind, nfds)
		}
		return nil
	}
	switch kind {
	case replyOK:
		if rest != "" || s != replyOK {
			return loadMessage{}, errors.New("ok takes no argument")
		}
		return loadMessage{kind: replyOK}, wantFDs(0, 0)
	case msgMap, msgProg, msgLink:
		if err := checkObjectName(rest); err != nil {
			return loadMessage{}, err
		}
		hi := 1
		if kind == msgLink {
			hi = MaxFDsPerMessage
		}
		return loadMessage{kind: kind, name: rest}, wantFDs(1, hi)
	case msgAlt:
		f := strings.Split(rest, " ")
		if len(f) != 2 {
			return loadMessage{}, errors.New("want: alt <group> <choice>")
		}
		g, err := index(f[0], 0)
		if err != nil {
			return loadMessage{}, err
		}
		c, err := index(f[1], -1)
		if err != nil {
			return loadMessage{}, err
		}
		return loadMessage{kind: kind, group: g, choice: c}, wantFDs(0, 0)
	case msgAltErr:
		f := strings.SplitN(rest, " ", 3)
		if len(f) != 3 {
			return loadMessage{}, errors.New("want: alterr <group> <choice> <text>")
		}
		g, err := index(f[0], 0)
		if err != nil {
			return loadMessage{}, err
		}
		c, err := index(f[1], 0)
		if err != nil {
			return loadMessage{}, err
		}
		return loadMessage{kind: kind, group: g, choice: c, text: printable(f[2])}, wantFDs(0, 0)
	}
	return loadMessage{}, fmt.Errorf("unknown load reply %q", excerpt(kind))
}

// checkObjectName accepts a map or program name of a load reply.
func checkObjectName(n string) error {
	if n == "" || len(n) > maxObjectName {
		return fmt.Errorf("name of %d bytes: want 1 to %d", len(n), maxObjectName)
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.') {
			return fmt.Errorf("name %q: only A-Z, a-z, 0-9, _ and . allowed", excerpt(n))
		}
	}
	return nil
}

// maxIndex bounds an alternatives group or choice index (config allows 64
// of each).
const maxIndex = 63

// index parses a decimal index from lo to maxIndex.
func index(s string, lo int) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > maxIndex || strconv.Itoa(n) != s {
		return 0, fmt.Errorf("index %q: want %d to %d", excerpt(s), lo, maxIndex)
	}
	return n, nil
}

// supervisorMessage is one parsed message of the supervisor.
type supervisorMessage struct {
	up     bool
	pid    int
	status string // down: how the worker ended
}

// parseSupervisorMessage parses "up <pid>" (with one descriptor, the
// worker's socket) or "down <pid> <status>" (none).
func parseSupervisorMessage(msg []byte, nfds int) (supervisorMessage, error) {
	if len(msg) > MaxReply {
		return supervisorMessage{}, fmt.Errorf("supervisor message of %d bytes: more than %d", len(msg), MaxReply)
	}
	f := strings.SplitN(string(msg), " ", 3)
	pid := 0
	if len(f) >= 2 {
		n, err := strconv.Atoi(f[1])
		if err != nil || n <= 0 || n > 1<<22 || strconv.Itoa(n) != f[1] {
			return supervisorMessage{}, fmt.Errorf("pid %q: want 1 to %d", excerpt(f[1]), 1<<22)
		}
		pid = n
	}
	switch {
	case f[0] == msgUp && len(f) == 2:
		if nfds != 1 {
			return supervisorMessage{}, fmt.Errorf("up with %d descriptors, want 1", nfds)
		}
		return supervisorMessage{up: true, pid: pid}, nil
	case f[0] == msgDown && len(f) == 3:
		if nfds != 0 {
			return supervisorMessage{}, fmt.Errorf("down with %d descriptors", nfds)
		}
		return supervisorMessage{pid: pid, status: printable(f[2])}, nil
	}
	return supervisorMessage{}, fmt.Errorf("unknown supervisor message %q", excerpt(f[0]))
}

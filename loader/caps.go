// SPDX-License-Identifier: Apache-2.0

package loader

import (
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/bounded"
)

// Least privilege after attach.
//
// Loading and attaching needs CAP_BPF and CAP_PERFMON, reading kernel
// addresses from /proc/kallsyms needs CAP_SYSLOG, and reading tracefs (mode
// 0700) needs CAP_DAC_READ_SEARCH. Once every program is attached and the
// decoders have read what they need, serving needs far less: maps are read
// and program stats fetched through file descriptors the process already
// holds. DropCapabilities then reduces the process to ScrapeCapabilities
// plus what the operator asks to keep (--capabilities.keep).
//
// Capabilities are per thread on Linux, and a Go process runs many threads:
// every change is applied to all of them at once with
// syscall.AllThreadsSyscall, which works in binaries built with
// CGO_ENABLED=0 (and returns ENOTSUP otherwise).

// CapSet is a set of Linux capabilities: bit n is capability number n, the
// layout of the CapEff line of /proc/<pid>/status.
type CapSet uint64

// Capability numbers used by the exporter (linux/capability.h).
const (
	CapDacReadSearch = 2
	CapSetpcap       = 8
	CapNetAdmin      = 12
	CapSysPtrace     = 19
	CapSysAdmin      = 21
	CapSysResource   = 24
	CapSyslog        = 34
	CapPerfmon       = 38
	CapBPF           = 39
)

// ScrapeCapabilities is what scraping keeps after attach, whatever
// --capabilities.keep says. Measured on Linux 6.18 as a non-root user after
// the drop: map iteration and batch lookups (BPF_MAP_GET_NEXT_KEY,
// BPF_MAP_LOOKUP_ELEM, BPF_MAP_LOOKUP_BATCH) and program stats
// (BPF_OBJ_GET_INFO_BY_FD) on file descriptors the process holds need no
// capability at all there; the decoders' later reads (sysfs and
// /proc/partitions for majorminor, the cgroup2 tree for cgroup, ioctl
// SIOCGIFNAME for ifname) are world-readable. The set still holds:
//
//   - CAP_BPF: on kernels before 6.5 (Debian 12's 6.1 among them), bpf()
//     refuses every command, map reads included, to a caller without
//     CAP_BPF (or CAP_SYS_ADMIN) when kernel.unprivileged_bpf_disabled is
//     set, which is the default of most distributions. Without it every
//     scrape there would fail with EPERM.
//
// Dropped on purpose: CAP_PERFMON (loading tracing programs and opening
// perf events: done), CAP_SYSLOG (kallsyms is read once, before the drop:
// the decoder Env's Warm must have run), CAP_DAC_READ_SEARCH (tracefs is
// only read to attach), CAP_SYS_ADMIN (mounting tracefs, fentry on old
// kernels: done), CAP_SYS_RESOURCE (raising RLIMIT_MEMLOCK: done).
const ScrapeCapabilities = CapSet(1) << CapBPF

// capNames are the capabilities' names without "cap_", by number, as in
// capabilities(7) and linux/capability.h.
var capNames = [...]string{
	"chown", "dac_override", "dac_read_search", "fowner", "fsetid", "kill",
	"setgid", "setuid", "setpcap", "linux_immutable", "net_bind_service",
	"net_broadcast", "net_admin", "net_raw", "ipc_lock", "ipc_owner",
	"sys_module", "sys_rawio", "sys_chroot", "sys_ptrace", "sys_pacct",
	"sys_admin", "sys_boot", "sys_nice", "sys_resource", "sys_time",
	"sys_tty_config", "mknod", "lease", "audit_write", "audit_control",
	"setfcap", "mac_override", "mac_admin", "syslog", "wake_alarm",
	"block_suspend", "audit_read", "perfmon", "bpf", "checkpoint_restore",
}

// CapName returns the name of capability number n: "CAP_BPF", or "CAP_<n>"
// for a number this build does not know.
func CapName(n int) string {
	if n >= 0 && n < len(capNames) {
		return "CAP_" + strings.ToUpper(capNames[n])
	}
	return fmt.Sprintf("CAP_%d", n)
}

// Has reports whether capability number n is in the set.
func (s CapSet) Has(n int) bool { return n >= 0 && n < 64 && s&(1<<n) != 0 }

// Names returns the set's capabilities by name, in number order.
func (s CapSet) Names() []string {
	var out []string
	for v := uint64(s); v != 0; v &= v - 1 {
		out = append(out, CapName(bits.TrailingZeros64(v)))
	}
	return out
}

// String lists the names comma-separated ("CAP_SYSLOG,CAP_BPF"), or
// "none" for the empty set.
func (s CapSet) String() string {
	if s == 0 {
		return "none"
	}
	return strings.Join(s.Names(), ",")
}

// Hex is the set as /proc/<pid>/status prints it: 16 hex digits.
func (s CapSet) Hex() string { return fmt.Sprintf("%016x", uint64(s)) }

// maxCapToken bounds how much of a bad name an error quotes.
const maxCapToken = 64

// ParseCapability returns the number of a capability named "CAP_BPF",
// "cap_bpf" or "bpf" (any case). An unknown name is an error that quotes
// it (at most 64 bytes).
func ParseCapability(name string) (int, error) {
	n := strings.ToLower(strings.TrimSpace(name))
	n = strings.TrimPrefix(n, "cap_")
	for i, c := range capNames {
		if c == n {
			return i, nil
		}
	}
	tok := name
	if len(tok) > maxCapToken {
		tok = tok[:maxCapToken] + "..."
	}
	return 0, fmt.Errorf("unknown capability %q (names as in capabilities(7): CAP_SYSLOG, cap_sys_admin or syslog)", tok)
}

// ParseKeep parses the value of --capabilities.keep: capability names
// separated by commas (see ParseCapability), "" or "none" for no extra
// capability, or "all" to keep every capability (all is true: do not drop).
// An unknown name is an error naming it.
func ParseKeep(s string) (keep CapSet, all bool, err error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "none":
		return 0, false, nil
	case "all":
		return 0, true, nil
	}
	for _, name := range strings.Split(s, ",") {
		if strings.TrimSpace(name) == "" {
			continue
		}
		n, err := ParseCapability(name)
		if err != nil {
			return 0, false, err
		}
		keep |= 1 << n
	}
	return keep, false, nil
}

// CapState is one thread's five capability sets.
type CapState struct {
	Effective, Permitted, Inheritable, Bounding, Ambient CapSet
}

// CurrentCapabilities returns the calling thread's capability sets (the
// same on every thread of this process unless something changed one thread
// alone). It fails only if capget(2) does.
func CurrentCapabilities() (CapState, error) {
	var st CapState
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return st, fmt.Errorf("capget: %w", err)
	}
	st.Effective = CapSet(data[0].Effective) | CapSet(data[1].Effective)<<32
	st.Permitted = CapSet(data[0].Permitted) | CapSet(data[1].Permitted)<<32
	st.Inheritable = CapSet(data[0].Inheritable) | CapSet(data[1].Inheritable)<<32
	// PR_CAPBSET_READ and PR_CAP_AMBIENT_IS_SET fail with EINVAL past the
	// kernel's last capability.
	for n := range 64 {
		v, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(n), 0, 0, 0)
		if err != nil {
			break
		}
		if v == 1 {
			st.Bounding |= 1 << n
		}
		a, err := unix.PrctlRetInt(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_IS_SET, uintptr(n), 0, 0)
		if err == nil && a == 1 {
			st.Ambient |= 1 << n
		}
	}
	return st, nil
}

// CapDrop reports what DropCapabilities did.
type CapDrop struct {
	// Before and After are the capability sets before and after.
	Before, After CapState
	// Target is what the permitted, effective and bounding sets were
	// reduced to: ScrapeCapabilities plus the capabilities asked to keep
	// (each set keeps only those it had).
	Target CapSet
	// BoundingErr is why the bounding set was left as it was (nil when it
	// was reduced): it needs CAP_SETPCAP, which a unit that grants only
	// the load capabilities does not give. Not fatal: with no_new_privs
	// set and the permitted set reduced, the bounding set only limits
	// what an execve could gain, and the exporter runs no program.
	BoundingErr error
}

// errNoSetpcap is CapDrop.BoundingErr when the process lacks CAP_SETPCAP.
var errNoSetpcap = errors.New("bounding set not reduced: CAP_SETPCAP is not in the effective set")

// DropCapabilities reduces the capabilities of every thread of the process
// to ScrapeCapabilities plus keep, for good: it sets no_new_privs
// (PR_SET_NO_NEW_PRIVS), drops every other capability from the bounding
// set (when CAP_SETPCAP allows it; else see CapDrop.BoundingErr), reduces
// the permitted set to its intersection with that target and makes the
// effective set equal to it, and empties the inheritable set, which also
// empties the ambient set (the exporter runs no other program).
//
// Call it once every config is loaded and attached and the decoders'
// Env.Warm has returned (kallsyms must be read while CAP_SYSLOG is held).
// A later load or attach fails with EPERM unless keep holds what it needs.
//
// Errors: a wrapped syscall.ENOTSUP in a binary built with cgo (threads
// cannot all be reached), or the errno of prctl(2) or capset(2), in which
// case the sets may be partly reduced (never enlarged). A process without
// the capabilities to drop has nothing to do and gets no error.
func DropCapabilities(keep CapSet) (CapDrop, error) {
	return DropCapabilitiesTo(ScrapeCapabilities | keep)
}

// DropCapabilitiesTo is DropCapabilities with the whole target given:
// every thread keeps exactly the capabilities of target that it has (in
// the bounding, permitted and effective sets), and nothing else, not even
// CAP_BPF unless target holds it. The privileged helper (package privsep)
// uses it to keep its own set. Errors as DropCapabilities.
func DropCapabilitiesTo(target CapSet) (CapDrop, error) {
	return reduceCapabilities(target, false)
}

// PassOnCapabilities reduces every thread to the capabilities of target
// it holds, kept only for a program it executes: they stay in the
// permitted, inheritable and ambient sets (and the bounding set, as
// DropCapabilitiesTo leaves it), the effective set is emptied, and
// no_new_privs is set. A child it executes then starts with exactly those
// capabilities, as root (the permitted set bounds it under no_new_privs)
// or not (the ambient set). The privileged helper's supervisor, which
// makes no privileged call itself, uses it. Errors as DropCapabilities.
func PassOnCapabilities(target CapSet) (CapDrop, error) {
	return reduceCapabilities(target, true)
}

// reduceCapabilities is DropCapabilitiesTo, or with passOn
// PassOnCapabilities.
func reduceCapabilities(target CapSet, passOn bool) (CapDrop, error) {
	r := CapDrop{Target: target}
	before, err := CurrentCapabilities()
	if err != nil {
		return r, err
	}
	r.Before, r.After = before, before
	if err := allThreadsPrctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0); err != nil {
		return r, fmt.Errorf("set no_new_privs on all threads: %w", err)
	}
	if extra := before.Bounding &^ r.Target; extra != 0 {
		if !before.Effective.Has(CapSetpcap) {
			r.BoundingErr = errNoSetpcap
		} else {
			for v := uint64(extra); v != 0; v &= v - 1 {
				n := bits.TrailingZeros64(v)
				if err := allThreadsPrctl(unix.PR_CAPBSET_DROP, uintptr(n), 0); err != nil {
					r.BoundingErr = fmt.Errorf("drop %s from the bounding set: %w", CapName(n), err)
					break
				}
			}
		}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	perm := before.Permitted & r.Target
	eff := perm // every capability kept is usable without a capset of its own
	// The exporter runs no program: nothing needs to be inheritable, and
	// an empty inheritable set also empties the ambient set.
	var inh CapSet
	if passOn {
		// Inheritable and ambient for the program executed; nothing
		// effective here.
		eff, inh = 0, perm
	}
	data[0] = unix.CapUserData{Effective: uint32(eff), Permitted: uint32(perm), Inheritable: uint32(inh)}
	data[1] = unix.CapUserData{Effective: uint32(eff >> 32), Permitted: uint32(perm >> 32), Inheritable: uint32(inh >> 32)}
	// AllThreadsSyscall is //go:uintptrescapes: the pointers stay valid
	// through the call.
	if _, _, e := syscall.AllThreadsSyscall(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return r, fmt.Errorf("capset on all threads: %w", e)
	}
	if passOn {
		for v := uint64(perm); v != 0; v &= v - 1 {
			n := bits.TrailingZeros64(v)
			if _, _, e := syscall.AllThreadsSyscall6(unix.SYS_PRCTL, unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_RAISE, uintptr(n), 0, 0, 0); e != 0 {
				return r, fmt.Errorf("raise %s in the ambient set: %w", CapName(n), e)
			}
		}
	}
	after, err := CurrentCapabilities()
	if err != nil {
		return r, err
	}
	r.After = after
	return r, nil
}

// allThreadsPrctl runs prctl(option, a2, a3, 0, 0) on every thread (the
// options used here need the unused arguments zero).
func allThreadsPrctl(option int, a2, a3 uintptr) error {
	if _, _, e := syscall.AllThreadsSyscall6(unix.SYS_PRCTL, uintptr(option), a2, a3, 0, 0, 0); e != 0 {
		return e
	}
	return nil
}

// DropAfterAttach is DropCapabilities with its outcome logged: CapEff before
// and after at INFO (hex as /proc/self/status prints it, and names), a
// bounding set left alone at INFO too (the normal case under the systemd
// unit, which grants no CAP_SETPCAP), a failed drop at WARN. It never fails the
// caller: an exporter that could not drop keeps serving.
func DropAfterAttach(keep CapSet, log *slog.Logger) CapDrop {
	r, err := DropCapabilities(keep)
	if err != nil {
		log.Warn("dropping capabilities failed: the process keeps them", "err", err,
			"cap_eff", r.After.Effective.Hex(), "effective", r.After.Effective.String())
		return r
	}
	log.Info("capabilities dropped after attach",
		"cap_eff_before", r.Before.Effective.Hex(), "cap_eff_after", r.After.Effective.Hex(),
		"before", r.Before.Effective.String(), "after", r.After.Effective.String(),
		"cap_bnd_after", r.After.Bounding.Hex())
	if r.BoundingErr != nil {
		log.Info("capability bounding set kept", "reason", r.BoundingErr, "cap_bnd", r.After.Bounding.Hex())
	}
	return r
}

// StatusCaps reads the capability lines (CapInh, CapPrm, CapEff, CapBnd,
// CapAmb) and NoNewPrivs of a /proc/<pid>/status or
// /proc/<pid>/task/<tid>/status file, as bit sets (NoNewPrivs is 0 or 1).
// The file is read through bounded (64 KiB); a line whose value is not hex
// is an error naming the file and the line's key.
func StatusCaps(path string) (map[string]CapSet, error) {
	b, err := bounded.ReadFile(path, "process status", bounded.MaxSmall)
	if err != nil {
		return nil, err
	}
	out := map[string]CapSet{}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (!strings.HasPrefix(k, "Cap") && k != "NoNewPrivs") {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: not a hex capability set", path, k)
		}
		out[k] = CapSet(n)
	}
	return out, nil
}

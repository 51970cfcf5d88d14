// SPDX-License-Identifier: Apache-2.0

package loader

// The privileges a command needs, checked before it starts. Without them
// the first privileged call fails with EPERM, and its error names that
// call (BPF_PROG_GET_NEXT_ID, cilium/ebpf's memlock probe, a map create)
// rather than what the operator must grant. CheckPrivileges names the
// capabilities missing, what each is for, and how to grant them.
//
// The kernel's checks (kernel/bpf/syscall.c, kernel/events/core.c):
// map_create and bpf_prog_load want bpf_capable() (CAP_BPF or
// CAP_SYS_ADMIN) for every type we load, tracing program types and
// system-wide perf events perfmon_capable() (CAP_PERFMON or
// CAP_SYS_ADMIN), and BPF_PROG_GET_NEXT_ID, BPF_*_GET_FD_BY_ID and
// BPF_ENABLE_STATS CAP_SYS_ADMIN alone.

import (
	"fmt"
	"os"
	"slices"
	"strings"
)

// A Privilege is a capability a command needs, and what for.
type Privilege struct {
	// Cap is the capability's number (CapBPF).
	Cap int
	// For says what needs it: "to create BPF maps and load programs".
	For string
	// Optional: the command runs without it, doing less (names
	// without CAP_SYSLOG). It is named only when a required one is
	// missing too, so that one grant gives the command everything.
	Optional bool
}

// The privileges of the commands, by what they do.
var (
	// PrivLoad is what loading and attaching tracing programs needs: the
	// configs of serve, dump, hist and top, and the profile's program.
	PrivLoad = []Privilege{
		{Cap: CapBPF, For: "to create BPF maps and load programs"},
		{Cap: CapPerfmon, For: "to load tracing programs and open perf events"},
	}
	// PrivConfigs is what the configs' decoders and attaching to
	// tracepoints use besides: without them a program is down or its
	// labels are addresses, and the others run.
	PrivConfigs = []Privilege{
		{Cap: CapSyslog, For: "for kernel function names, from /proc/kallsyms", Optional: true},
		{Cap: CapDacReadSearch, For: "to read tracepoint ids in /sys/kernel/tracing", Optional: true},
	}
	// PrivProfile is what a profile uses besides PrivLoad to name the
	// frames of every process.
	PrivProfile = []Privilege{
		{Cap: CapSyslog, For: "for kernel function names, from /proc/kallsyms", Optional: true},
		{Cap: CapSysPtrace, For: "to read other users' processes' memory maps", Optional: true},
		{Cap: CapDacReadSearch, For: "to read the files they map", Optional: true},
	}
	// PrivListBPF is what listing the host's BPF programs and maps by id
	// (and turning their run-time statistics on) needs.
	PrivListBPF = []Privilege{
		{Cap: CapSysAdmin, For: "to list the host's BPF programs and maps by id and turn on their run-time statistics"},
	}
)

// Optional returns ps marked Optional.
func Optional(ps []Privilege) []Privilege {
	out := make([]Privilege, len(ps))
	for i, p := range ps {
		p.Optional = true
		out[i] = p
	}
	return out
}

// UnitPath is the systemd unit that grants the exporter its capabilities
// without root, in the source tree and the packages' documentation.
const UnitPath = "deploy/kernel_exporter.service"

// PrivilegeError is CheckPrivileges' error: the command, the capabilities
// it lacks, and the process' user and effective set. It matches
// os.ErrPermission with errors.Is.
type PrivilegeError struct {
	Command string
	// Missing are the capabilities the command needs and the process
	// lacks (at least one not Optional).
	Missing []Privilege
	// Grant is every capability the command needs or uses, held or
	// not: what to grant (setcap replaces a file's whole set).
	Grant CapSet
	UID   int
	Have  CapSet
	// Binary is the executable's path, for setcap ("" when unknown).
	Binary string
}

// Error names what is missing and how to grant it, in one line.
func (e *PrivilegeError) Error() string {
	var need, also, setcap, ambient []string
	loadOnly := true
	for _, p := range e.Missing {
		name := CapName(p.Cap)
		if p.Optional {
			also = append(also, fmt.Sprintf("%s (%s)", name, p.For))
		} else {
			need = append(need, fmt.Sprintf("%s (%s)", name, p.For))
			loadOnly = loadOnly && (p.Cap == CapBPF || p.Cap == CapPerfmon)
		}
	}
	for _, name := range e.Grant.Names() {
		setcap = append(setcap, strings.ToLower(name))
		ambient = append(ambient, name)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "kernel_exporter %s needs %s", e.Command, joinAnd(need))
	if loadOnly && len(need) > 1 {
		b.WriteString(" (or CAP_SYS_ADMIN, which stands for both)")
	} else if loadOnly {
		b.WriteString(" (or CAP_SYS_ADMIN, which stands for it)")
	}
	if e.UID == 0 {
		fmt.Fprintf(&b, ", which this process lacks: it runs as root but without them (a container or unit that drops them; effective capabilities: %s)", e.Have)
	} else {
		fmt.Fprintf(&b, ", which this process lacks (uid %d, effective capabilities: %s)", e.UID, e.Have)
	}
	if len(also) > 0 {
		fmt.Fprintf(&b, "; it also uses %s", joinAnd(also))
	}
	bin := e.Binary
	if bin == "" {
		bin = "kernel_exporter"
	}
	b.WriteString(": ")
	if e.UID != 0 {
		b.WriteString("run it as root, or ")
	}
	fmt.Fprintf(&b, "grant them: setcap %s+ep %s, or AmbientCapabilities=%s in its systemd unit, as %s does",
		strings.Join(setcap, ","), bin, strings.Join(ambient, " "), UnitPath)
	return b.String()
}

// Is makes a PrivilegeError match os.ErrPermission.
func (e *PrivilegeError) Is(target error) bool { return target == os.ErrPermission }

// CheckPrivileges returns nil when the process' effective capability set
// holds every capability of need that is not Optional, CAP_SYS_ADMIN
// standing for CAP_BPF and CAP_PERFMON as the kernel lets it; else a
// *PrivilegeError for command (as the user types it: "dump", "top bpf")
// naming every capability of need it lacks. It returns nil too when the
// set cannot be read (capget fails): the command then runs, and the call
// refused says why.
func CheckPrivileges(command string, need []Privilege) error {
	caps, err := CurrentCapabilities()
	if err != nil {
		return nil
	}
	return missingPrivileges(command, need, caps.Effective, os.Geteuid())
}

// missingPrivileges is CheckPrivileges for the effective set have of user
// uid.
func missingPrivileges(command string, need []Privilege, have CapSet, uid int) error {
	eff := have
	if eff.Has(CapSysAdmin) {
		eff |= 1<<CapBPF | 1<<CapPerfmon
	}
	var missing []Privilege
	var grant CapSet
	required := false
	for _, p := range need {
		grant |= 1 << p.Cap
		if !eff.Has(p.Cap) && !slices.ContainsFunc(missing, func(m Privilege) bool { return m.Cap == p.Cap }) {
			missing = append(missing, p)
			required = required || !p.Optional
		}
	}
	if !required {
		return nil
	}
	bin, _ := os.Executable()
	return &PrivilegeError{Command: command, Missing: missing, Grant: grant, UID: uid, Have: have, Binary: bin}
}

// joinAnd joins "a", "a and b", "a, b and c".
func joinAnd(s []string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

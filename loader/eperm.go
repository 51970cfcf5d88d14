// SPDX-License-Identifier: Apache-2.0

package loader

// Naming the cause of "operation not permitted" from a load. cilium/ebpf
// appends "(MEMLOCK may be too low, consider rlimit.RemoveMemlock)" to
// every EPERM of a map create or a program load without a verifier log,
// but RLIMIT_MEMLOCK is the cause only on kernels before 5.11 (since
// then BPF memory is charged to the memory cgroup, kernel commit
// 3ac1f01b43b6 "bpf: eliminate rlimit-based memory accounting for bpf
// progs"), and Load lifts it anyway. What refuses a load on newer kernels
// is a missing capability (kernel/bpf/syscall.c: map_create and
// bpf_prog_load want CAP_BPF, tracing program types CAP_PERFMON, network
// ones CAP_NET_ADMIN; CAP_SYS_ADMIN stands for each) or a security module.

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/config"
)

// memlockHint is what cilium/ebpf appends to an EPERM.
const memlockHint = " (MEMLOCK may be too low, consider rlimit.RemoveMemlock)"

var (
	progLoadOp  = regexp.MustCompile(`program ([A-Za-z0-9_.]+): load program: `)
	mapCreateOp = regexp.MustCompile(`map ([A-Za-z0-9_.]+): map create: `)
)

// memcgSince is the first release that charges BPF memory to the memory
// cgroup instead of RLIMIT_MEMLOCK.
var memcgSince = config.KernelVersion{5, 11, 0}

// perfmonTypes are the program types bpf_prog_load refuses without
// CAP_PERFMON (is_perfmon_prog_type), netAdminTypes those it refuses
// without CAP_NET_ADMIN (is_net_admin_prog_type, the ones we attach).
var (
	perfmonTypes = []ebpf.ProgramType{ebpf.Kprobe, ebpf.TracePoint, ebpf.PerfEvent, ebpf.RawTracepoint,
		ebpf.RawTracepointWritable, ebpf.Tracing, ebpf.LSM, ebpf.StructOps, ebpf.Extension}
	netAdminTypes = []ebpf.ProgramType{ebpf.XDP, ebpf.SchedCLS, ebpf.SchedACT}
)

// permissionError is an EPERM of a load with cilium/ebpf's memlock hint
// replaced by the cause: the capability the operation needs and the
// process lacks, else RLIMIT_MEMLOCK on a kernel that counts it, else a
// security module. It returns nil when err is not such an error; lacking
// reports that a capability is missing.
func permissionError(spec *ebpf.CollectionSpec, err error) (_ error, lacking bool) {
	if !isPermission(err) {
		return nil, false
	}
	msg := strings.Replace(err.Error(), memlockHint, "", 1)
	caps, cerr := CurrentCapabilities()
	if cerr != nil {
		return nil, false
	}
	op, need := "", CapSet(1)<<CapBPF
	if m := progLoadOp.FindStringSubmatch(msg); m != nil && spec != nil && spec.Programs[m[1]] != nil {
		t := spec.Programs[m[1]].Type
		op = fmt.Sprintf("loading %v program %s", t, m[1])
		for _, pt := range perfmonTypes {
			if t == pt {
				need |= 1 << CapPerfmon
			}
		}
		for _, pt := range netAdminTypes {
			if t == pt {
				need |= 1 << CapNetAdmin
			}
		}
	} else if m := mapCreateOp.FindStringSubmatch(msg); m != nil {
		op = "creating map " + m[1]
	} else {
		return nil, false
	}
	have := caps.Effective
	if have.Has(CapSysAdmin) {
		have |= 1<<CapBPF | 1<<CapPerfmon | 1<<CapNetAdmin
	}
	if missing := need &^ have; missing != 0 {
		return &causeError{fmt.Sprintf("load: %s: %s needs %s; this process lacks %s (its effective capabilities: %s)", msg, op, need, missing, caps.Effective), err}, true
	}
	if _, v, verr := KernelRelease(); verr == nil && v.Less(memcgSince) {
		var lim unix.Rlimit
		if unix.Getrlimit(unix.RLIMIT_MEMLOCK, &lim) == nil {
			return &causeError{fmt.Sprintf("load: %s: %s: kernels before 5.11 charge BPF memory to RLIMIT_MEMLOCK, which is %s bytes here (two fixes: raise the hard limit, as LimitMEMLOCK=infinity in a systemd unit or podman --ulimit memlock=-1:-1 do, or grant CAP_SYS_RESOURCE, as the Helm chart does, for the exporter to raise it at start)", msg, op, rlimitText(lim.Cur)), err}, false
		}
	}
	return &causeError{fmt.Sprintf("load: %s: %s was refused although this process holds %s: a security module (SELinux, AppArmor, the BPF LSM) or a seccomp filter forbids it", msg, op, need), err}, false
}

// ExplainPermission returns err, an error of loading spec (with
// ebpf.NewCollection or LoadAndAssign), with cilium/ebpf's memlock hint
// replaced by the cause when it is an EPERM (see Load); any other error
// unchanged. Commands that load outside Load (the profile) use it.
func ExplainPermission(spec *ebpf.CollectionSpec, err error) error {
	if perr, _ := permissionError(spec, err); perr != nil {
		return perr
	}
	return err
}

func rlimitText(v uint64) string {
	if v == unix.RLIM_INFINITY {
		return "unlimited"
	}
	return fmt.Sprint(v)
}

// causeError is an error with an explained text that still matches the
// original with errors.Is and errors.As.
type causeError struct {
	msg string
	err error
}

func (e *causeError) Error() string { return e.msg }
func (e *causeError) Unwrap() error { return e.err }

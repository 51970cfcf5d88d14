// SPDX-License-Identifier: Apache-2.0

package loader

// RLIMIT_MEMLOCK and CAP_SYS_RESOURCE. Kernels before 5.11 charge the
// memory of BPF maps and programs to the RLIMIT_MEMLOCK of the user
// (kernel commit 3ac1f01b43b6 "bpf: eliminate rlimit-based memory
// accounting for bpf progs" moved it to the memory cgroup), whose default
// (64 KiB, or 8 MiB since 5.16's raise of the default) refuses all but the
// smallest program. A host raises the limit for the exporter
// (LimitMEMLOCK=infinity, podman --ulimit memlock=-1:-1); Kubernetes
// cannot set rlimits, so there the exporter raises its own, which needs
// CAP_SYS_RESOURCE when the hard limit is lower. PrepareMemlock does that
// once, at start, and then drops CAP_SYS_RESOURCE: the raised limit is
// inherited by the privileged helper, which needs the capability no more
// than the exporter.

import (
	"errors"
	"fmt"
	"log/slog"
	"syscall"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// ChargesMemlock reports whether the running kernel charges BPF memory to
// RLIMIT_MEMLOCK, detected as cilium/ebpf's rlimit package does: with the
// soft limit lowered to 0 (the hard limit kept), a one-entry array map is
// created; EPERM means the kernel charged it. The limit is restored
// before it returns. Call it while nothing else in the process creates
// BPF objects. Errors: getrlimit's or setrlimit's, or a map create that
// fails otherwise (without CAP_BPF, the kernel's refusal is EPERM too:
// call it with the loading capabilities).
func ChargesMemlock() (bool, error) {
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &old); err != nil {
		return false, fmt.Errorf("getrlimit(RLIMIT_MEMLOCK): %w", err)
	}
	zero := unix.Rlimit{Cur: 0, Max: old.Max}
	if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &zero); err != nil {
		return false, fmt.Errorf("lower RLIMIT_MEMLOCK: %w", err)
	}
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 1})
	if rerr := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &old); rerr != nil {
		if m != nil {
			m.Close()
		}
		return false, fmt.Errorf("restore RLIMIT_MEMLOCK: %w", rerr)
	}
	if err == nil {
		m.Close()
		return false, nil
	}
	if errors.Is(err, unix.EPERM) {
		return true, nil
	}
	return false, fmt.Errorf("create a test map: %w", err)
}

// Memlock is what PrepareMemlock found and did.
type Memlock struct {
	// Charges: the kernel charges BPF memory to RLIMIT_MEMLOCK.
	Charges bool
	// Limit is RLIMIT_MEMLOCK afterwards (unlimited once raised).
	Limit unix.Rlimit
	// RaiseErr is why the limit could not be raised (nil when it was, or
	// had no need to be); every load then fails with it.
	RaiseErr error
	// Dropped: CAP_SYS_RESOURCE was dropped (it was held and drop asked);
	// DropErr is why dropping it failed.
	Dropped bool
	DropErr error
}

// PrepareMemlock readies RLIMIT_MEMLOCK for loading, once, at start, before
// any BPF object is created and before the privileged helper starts (it
// inherits the limit): on a kernel that charges memlock (ChargesMemlock)
// it raises the limit to unlimited, as Load would; then, with drop, it sets
// no_new_privs (as the drop after attach would) and drops CAP_SYS_RESOURCE
// from the effective, permitted and inheritable sets of every thread
// (which empties it from the ambient set) and from the bounding set when
// CAP_SETPCAP allows: nothing else in the exporter uses it, and no program
// it executes regains it. It logs the outcome: INFO, or WARN when the limit could not be raised,
// with the two fixes.
func PrepareMemlock(drop bool, log *slog.Logger) Memlock {
	var r Memlock
	charges, err := ChargesMemlock()
	if err != nil {
		log.Warn("could not tell whether the kernel charges BPF memory to RLIMIT_MEMLOCK", "err", err)
	}
	r.Charges = charges
	if charges {
		r.RaiseErr = raiseMemlock()
	}
	_ = unix.Getrlimit(unix.RLIMIT_MEMLOCK, &r.Limit)
	if drop {
		// no_new_privs first: without CAP_SETPCAP (a pod's set) the
		// bounding set keeps CAP_SYS_RESOURCE, and a root execve (the
		// privileged helper's) would regain it from there.
		if err := allThreadsPrctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0); err != nil {
			r.DropErr = fmt.Errorf("set no_new_privs on all threads: %w", err)
		} else {
			r.Dropped, r.DropErr = dropCapability(CapSysResource)
		}
	}
	args := []any{"charges_memlock", r.Charges, "memlock", rlimitText(r.Limit.Cur), "memlock_max", rlimitText(r.Limit.Max), "cap_sys_resource_dropped", r.Dropped}
	if r.DropErr != nil {
		args = append(args, "drop_err", r.DropErr)
	}
	if r.RaiseErr != nil {
		log.Warn("this kernel charges BPF memory to RLIMIT_MEMLOCK (before 5.11), which could not be raised: every load will fail; raise the hard limit (LimitMEMLOCK=infinity in a systemd unit, podman --ulimit memlock=-1:-1) or grant CAP_SYS_RESOURCE (the Helm chart does)", append(args, "err", r.RaiseErr)...)
		return r
	}
	log.Info("memlock", args...)
	return r
}

// dropCapability drops capability n from every set of every thread: the
// bounding set (when the process holds CAP_SETPCAP), the effective,
// permitted and inheritable sets (capset on all threads), and so the
// ambient set. It reports whether the process held n at all.
func dropCapability(n int) (bool, error) {
	before, err := CurrentCapabilities()
	if err != nil {
		return false, err
	}
	all := before.Effective | before.Permitted | before.Inheritable | before.Bounding | before.Ambient
	if !all.Has(n) {
		return false, nil
	}
	if before.Bounding.Has(n) && before.Effective.Has(CapSetpcap) {
		if err := allThreadsPrctl(unix.PR_CAPBSET_DROP, uintptr(n), 0); err != nil {
			return true, fmt.Errorf("drop %s from the bounding set: %w", CapName(n), err)
		}
	}
	mask := ^(CapSet(1) << n)
	eff, perm, inh := before.Effective&mask, before.Permitted&mask, before.Inheritable&mask
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	data[0] = unix.CapUserData{Effective: uint32(eff), Permitted: uint32(perm), Inheritable: uint32(inh)}
	data[1] = unix.CapUserData{Effective: uint32(eff >> 32), Permitted: uint32(perm >> 32), Inheritable: uint32(inh >> 32)}
	if _, _, e := syscall.AllThreadsSyscall(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return true, fmt.Errorf("capset on all threads: %w", e)
	}
	return true, nil
}

// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

// (The build constraint above keeps the Go tool from treating this BPF C file
// as cgo source of package programs; clang ignores it.)

/*
 * syscalls: system calls completed, by syscall, and failed system calls, by
 * syscall and errno.
 *
 * Why: a sudden rise of one syscall (futex, sendfile, epoll_wait) or of one
 * error (EAGAIN on connect, ENOSPC on write, EMFILE on accept) is the first
 * visible change of many incidents, and procfs has no per-syscall counters.
 *
 * Kernel source: BTF tracepoint (tp_btf, 5.5+) raw_syscalls:sys_exit
 * (include/trace/events/syscalls.h, since 2.6.33), arguments
 * struct pt_regs *regs and long ret. The syscall number is read from the
 * saved registers (x86-64: orig_ax; arm64: syscallno), as the kernel's own
 * syscall_get_nr() does. A tp_btf program runs without the perf buffer
 * copy of a tracefs "tracepoint/" program, which matters on this path, and
 * needs no mounted tracefs.
 *
 * Every syscall exit is counted; it is an error when -4095 <= ret < 0
 * (IS_ERR_VALUE). The errno stored is -ret. Kernel-internal restart codes
 * (ERESTARTSYS 512 and friends) can appear: sys_exit fires before signal
 * handling turns them into EINTR or a restart. exit and exit_group never
 * return and are not counted. Syscalls of 32-bit (ia32) tasks are skipped:
 * their numbers follow another table.
 *
 * Map syscalls_total (PERCPU_ARRAY, 1024 entries), key u32 syscall number
 *   (4 bytes), value u64 per CPU: completed syscalls. The config sets
 *   skip_zero: a syscall never made has no series, as with a hash map.
 * Map syscall_errors_total (PERCPU_HASH), key struct syscall_error_key,
 *   8 bytes:
 *   offset 0  u32 syscall  syscall number
 *   offset 4  u32 errno    positive errno value, 1..4095
 *   value u64 per CPU: failed syscalls.
 *
 * Label bounds: syscall numbers are below 1024 on x86-64 and arm64 (about
 * 460 exist); errno is at most 4095 and in practice a few dozen values
 * appear. The error map is capped at 8192 keys; once full, new keys are not
 * counted.
 *
 * Per-CPU values: sys_exit runs millions of times per second on a busy
 * host; a per-CPU add avoids an atomic and cache-line bouncing. An array
 * indexed by the syscall number, whose lookup the verifier inlines, makes
 * the count one load and one store: with a per-CPU hash (the layout
 * before), sys_exit cost 0.9-1.2× libbpf-tools' syscount (which counts in
 * a shared hash) on the same events, as written 0.6-0.8×
 * (docs/performance.md, make bench-bcc). The array costs 8 KiB per
 * possible CPU, read whole at each scrape. Errors, far rarer, stay in a
 * per-CPU hash: {syscall, errno} pairs are too many for an array.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "kernel_exporter/maps.bpf.h"

#define MAX_ERRNO	4095
#define TS_COMPAT	0x0002	/* arch/x86/include/asm/thread_info.h */

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct syscall_error_key {
	__u32 syscall;
	__u32 errno;
};
_Static_assert(sizeof(struct syscall_error_key) == 8, "syscalls.yaml expects an 8-byte key");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u64);
} syscalls_total SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 8192);
	__type(key, struct syscall_error_key);
	__type(value, __u64);
} syscall_errors_total SEC(".maps");

SEC("tp_btf/sys_exit")
int BPF_PROG(sys_exit, struct pt_regs *regs, long ret)
{
	struct syscall_error_key ekey;
	__u64 *count;
	long nr;

#if defined(__TARGET_ARCH_x86)
	struct task_struct *task = bpf_get_current_task_btf();

	if (task->thread_info.status & TS_COMPAT)
		return 0;
	nr = regs->orig_ax;
#elif defined(__TARGET_ARCH_arm64)
	nr = regs->syscallno;
#else
#error "syscalls.bpf.c: unsupported __TARGET_ARCH"
#endif
	if (nr < 0 || nr >= 1024)
		return 0; /* -1: not a syscall (e.g. a restarted sigreturn) */

	ekey.syscall = nr;
	count = bpf_map_lookup_elem(&syscalls_total, &ekey.syscall);
	if (count)
		*count += 1;

	if (ret < 0 && ret >= -MAX_ERRNO) {
		ekey.errno = -ret;
		ke_add_percpu(&syscall_errors_total, &ekey, 1);
	}
	return 0;
}

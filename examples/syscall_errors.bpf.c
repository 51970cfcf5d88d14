// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

// (The build constraint above keeps the Go tool away from this BPF C file;
// clang ignores it.)
/*
 * syscall_errors: failed system calls, by syscall and error number.
 *
 * A worked example of a user program: a config written with ebpf_exporter v2
 * keys only (syscall_errors.yaml), loaded with --config.dir/--config.names.
 * See README.md in this directory.
 *
 * Why: a process retrying a missing file thousands of times a second, or a
 * daemon hitting EMFILE, is invisible in CPU graphs but obvious as a rate of
 * openat/ENOENT or accept4/EMFILE.
 *
 * Kernel source: tracepoint raw_syscalls:sys_exit (since 3.7), fields
 * "id" (syscall number of the calling task's ABI) and "ret" (return value;
 * -4095..-1 is a negated errno). 32-bit compat tasks report their own
 * numbering, which the syscall decoder reads as x86_64 numbers.
 *
 * Map syscall_errors_total (HASH, up to 4096 pairs), key 8 bytes:
 *   offset 0  u32 nr      syscall number
 *   offset 4  u32 error   errno, positive (2 = ENOENT)
 *   value u64             number of failed calls
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "kernel_exporter/maps.bpf.h"

#define MAX_ERRNO	4095	/* include/linux/err.h */

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct syscall_error {
	__u32 nr;
	__u32 error;
};
_Static_assert(sizeof(struct syscall_error) == 8, "syscall_errors.yaml expects an 8-byte key");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct syscall_error);
	__type(value, __u64);
} syscall_errors_total SEC(".maps");

SEC("tracepoint/raw_syscalls/sys_exit")
int sys_exit(struct trace_event_raw_sys_exit *ctx)
{
	long nr = BPF_CORE_READ(ctx, id), ret = BPF_CORE_READ(ctx, ret);
	struct syscall_error key = {};

	/* Successes, and values that are not errors (addresses from mmap). */
	if (nr < 0 || ret >= 0 || ret < -MAX_ERRNO)
		return 0;
	key.nr = nr;
	key.error = -ret;
	ke_add(&syscall_errors_total, &key, 1);
	return 0;
}

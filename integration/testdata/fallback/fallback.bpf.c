// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

/*
 * fallback: test object for alternatives. The same counter is fed by one
 * of three programs, best first: fentry on vfs_fsync_range, a kprobe on
 * it, or the tracepoint syscalls:sys_enter_fsync. The key says which one
 * ran, so a test can check both the choice and the count.
 *
 * The process id is read from the current task with CO-RE, so loading
 * needs kernel BTF (or --btf.path) even on the tracepoint path.
 *
 * Map fsync_calls_total (HASH): key u32 pid, u32 via (1 fentry, 2 kprobe,
 * 3 tracepoint); value u64 calls.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "kernel_exporter/maps.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct fsync_key {
	__u32 pid;
	__u32 via;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct fsync_key);
	__type(value, __u64);
} fsync_calls_total SEC(".maps");

static __always_inline void count(__u32 via)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct fsync_key k = { .pid = BPF_CORE_READ(task, tgid), .via = via };

	ke_add(&fsync_calls_total, &k, 1);
}

SEC("fentry/vfs_fsync_range")
int BPF_PROG(fsync_fentry)
{
	count(1);
	return 0;
}

SEC("kprobe/vfs_fsync_range")
int fsync_kprobe(struct pt_regs *ctx)
{
	count(2);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_fsync")
int fsync_tracepoint(void *ctx)
{
	count(3);
	return 0;
}

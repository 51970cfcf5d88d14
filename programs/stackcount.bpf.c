// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

// (The build constraint above keeps the Go tool from treating this BPF C file
// as cgo source of package programs; clang ignores it.)
/*
 * stackcount: calls of one kernel function by kernel stack, chosen in the
 * config (attach_to) or with --attach.to=stackcount=<function>;
 * tcp_push_one by default.
 *
 * Why: when TCP offload was switched off, the hottest tcp_push_one stack
 * gained tcp_sendpage -> sock_no_sendpage -> kernel_sendmsg: the stack, not
 * the count, named the cause (no scatter-gather on the VLAN interface).
 *
 * Hooks, chosen by the loader (alternatives): fentry (5.15+), else kprobe
 * (CONFIG_KPROBES, 5.15+). With fentry the innermost frame is the caller of
 * the function (the trampoline is not in the stack); with a kprobe it is
 * the function itself.
 *
 * Maps:
 *   stacks (STACK_TRACE, 1024 stacks of up to 127 frames)
 *   function_stack_calls_total (HASH, up to 1024 keys):
 *     key   u64 function   kernel address of the function (ksym decoder)
 *           s64 stack_id   id in stacks (kstack decoder); negative when the
 *                          stack could not be stored (map full or a hash
 *                          collision), shown as "[no stack]"
 *     value u64            calls
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "kernel_exporter/maps.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct stack_key {
	__u64 function;
	__s64 stack_id;
};

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 1024);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, 127 * sizeof(__u64));
} stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct stack_key);
	__type(value, __u64);
} function_stack_calls_total SEC(".maps");

SEC("fentry/tcp_push_one")
int BPF_PROG(stackcount_fentry)
{
	struct stack_key key = {
		.function = bpf_get_func_ip(ctx),
		.stack_id = bpf_get_stackid(ctx, &stacks, 0),
	};

	ke_add(&function_stack_calls_total, &key, 1);
	return 0;
}

SEC("kprobe/tcp_push_one")
int stackcount_kprobe(struct pt_regs *ctx)
{
	struct stack_key key = {
		.function = bpf_get_func_ip(ctx),
		.stack_id = bpf_get_stackid(ctx, &stacks, 0),
	};

	ke_add(&function_stack_calls_total, &key, 1);
	return 0;
}

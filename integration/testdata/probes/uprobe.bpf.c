// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

/*
 * Test program for uprobes and uretprobes targeted from YAML (bare
 * SEC("uprobe") / SEC("uretprobe") sections): counts calls of a function,
 * sums its first argument, and makes a histogram of its return values.
 *
 * Map uprobe_calls_total (HASH): key u32 what (0 calls, 1 sum of arg 1),
 *   value u64.
 * Map uprobe_return_values (HASH): key u32 bucket (exp2 slot of the return
 *   value; slot 33 holds the sum), value u64.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "kernel_exporter/maps.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, __u64);
} uprobe_calls_total SEC(".maps");

struct ret_key {
	__u32 bucket;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, struct ret_key);
	__type(value, __u64);
} uprobe_return_values SEC(".maps");

SEC("uprobe")
int on_work(struct pt_regs *ctx)
{
	__u32 calls = 0, sum = 1;

	ke_add(&uprobe_calls_total, &calls, 1);
	ke_add(&uprobe_calls_total, &sum, (__u64)PT_REGS_PARM1(ctx));
	return 0;
}

SEC("uretprobe")
int on_work_return(struct pt_regs *ctx)
{
	struct ret_key key = {};
	__u64 ret = (__u64)PT_REGS_RC(ctx);

	ke_observe(ke_add, &uprobe_return_values, key, ke_exp2_slot(ret), ret, 32);
	return 0;
}

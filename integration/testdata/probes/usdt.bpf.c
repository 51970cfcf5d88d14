// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

/*
 * Test program for USDT probes: reads the arguments of the ketest probes of
 * ke_target through kernel_exporter/usdt.bpf.h and adds them up.
 *
 * Map usdt_values_total (HASH): key u32 what, value u64:
 *   0 ketest:args fired     1 sum of its arg 0 (int i)
 *   2 sum of -(arg 1)       (long -1000*i: checks sign extension)
 *   3 sum of arg 2          (unsigned char i+200: checks zero extension)
 *   4 ketest:consts fired   5 sum of arg 0 ($5)   6 sum of -(arg 1) ($-7)
 *   7 ketest:global fired   8 sum of arg 0 (a global, often %rip-relative)
 *   9 ketest:gated fired   10 sum of arg 0
 *  15 argument reads that failed
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "kernel_exporter/maps.bpf.h"
#include "kernel_exporter/usdt.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __u64);
} usdt_values_total SEC(".maps");

static __always_inline void add(__u32 what, __u64 v)
{
	ke_add(&usdt_values_total, &what, v);
}

/* add_arg adds argument n (negated when neg) to what. */
static __always_inline void add_arg(struct pt_regs *ctx, __u32 n, __u32 what, int neg)
{
	long v;

	if (ke_usdt_arg(ctx, n, &v)) {
		add(15, 1);
		return;
	}
	add(what, neg ? -v : v);
}

SEC("usdt")
int on_args(struct pt_regs *ctx)
{
	add(0, 1);
	add_arg(ctx, 0, 1, 0);
	add_arg(ctx, 1, 2, 1);
	add_arg(ctx, 2, 3, 0);
	return 0;
}

SEC("usdt")
int on_consts(struct pt_regs *ctx)
{
	add(4, 1);
	add_arg(ctx, 0, 5, 0);
	add_arg(ctx, 1, 6, 1);
	return 0;
}

SEC("usdt")
int on_global(struct pt_regs *ctx)
{
	add(7, 1);
	add_arg(ctx, 0, 8, 0);
	return 0;
}

SEC("usdt")
int on_gated(struct pt_regs *ctx)
{
	add(9, 1);
	add_arg(ctx, 0, 10, 0);
	if (ke_usdt_arg_count(ctx) != 1)
		add(15, 1);
	return 0;
}

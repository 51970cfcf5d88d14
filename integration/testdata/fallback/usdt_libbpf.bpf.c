// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

/*
 * Test program of TestMatrixUSDTLibbpf: libbpf's <bpf/usdt.bpf.h> and
 * BPF_USDT in a bare SEC("usdt") program, pointed by the test's config at
 * usdt_target's probe ketest_static:tick (i, -1000*i, 42). Committed
 * prebuilt (make bpf) for the kernel matrix guests.
 *
 * Map usdt_libbpf_values_total (ARRAY of 8): index what, value u64:
 *   0 firings   1 sum of i   2 sum of -(arg 1)   3 sum of arg 2
 *   4 sum of bpf_usdt_arg_cnt   5 argument reads that failed
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/usdt.bpf.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 8);
	__type(key, u32);
	__type(value, u64);
} usdt_libbpf_values_total SEC(".maps");

static __always_inline void add(u32 what, u64 v)
{
	u64 *p = bpf_map_lookup_elem(&usdt_libbpf_values_total, &what);

	if (p)
		__sync_fetch_and_add(p, v);
}

SEC("usdt")
int BPF_USDT(on_tick, long i, long neg, int c)
{
	long v;

	add(0, 1);
	add(1, i);
	add(2, -neg);
	add(3, c);
	add(4, bpf_usdt_arg_cnt(ctx));
	if (bpf_usdt_arg(ctx, 2, &v) || v != 42)
		add(5, 1);
	return 0;
}

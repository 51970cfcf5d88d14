// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

/*
 * Test program for map health: counts getpriority(2) calls whose "which"
 * argument is FILL_WHICH (no real caller passes it: the call fails with
 * EINVAL) by their "who" argument, in a hash map of 64 entries. Calls with
 * more than 64 distinct "who" values fill the map; ke_add counts each
 * insert that then fails in ke_map_update_errors.
 *
 * Kernel source: tracepoint syscalls:sys_enter_getpriority (since 2.6.33).
 *
 * Map fill_total (HASH, 64 entries): key u32 who, value u64 calls.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "kernel_exporter/maps.bpf.h"

#define FILL_WHICH 0x4b45

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u64);
} fill_total SEC(".maps");

SEC("tracepoint/syscalls/sys_enter_getpriority")
int on_getpriority(struct trace_event_raw_sys_enter *ctx)
{
	__u32 who;

	if (ctx->args[0] != FILL_WHICH)
		return 0;
	who = (__u32)ctx->args[1];
	ke_add(&fill_total, &who, 1);
	return 0;
}

// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

/*
 * A program that never runs beside one that always does, for the run
 * counts of dump, hist and --config.check --verbose (hints_test.go, which
 * compiles it at test time).
 *
 * busy (raw_syscalls/sys_enter, every system call of the host) counts
 * them in idle_syscalls_total (ARRAY of one u64, key struct idle_key
 * { __u32 zero; }).
 * never (syscalls/sys_enter_acct: acct(2), which nothing on the test
 * machine calls) puts each call in slot 0 of idle_acct_calls (ARRAY of 8
 * u64 buckets, key struct idle_slot { __u32 bucket; }).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct idle_key {
	__u32 zero;
};

struct idle_slot {
	__u32 bucket;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, struct idle_key);
	__type(value, __u64);
} idle_syscalls_total SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 8);
	__type(key, struct idle_slot);
	__type(value, __u64);
} idle_acct_calls SEC(".maps");

SEC("tracepoint/raw_syscalls/sys_enter")
int busy(void *ctx)
{
	struct idle_key key = {};
	__u64 *v = bpf_map_lookup_elem(&idle_syscalls_total, &key);

	if (v)
		__sync_fetch_and_add(v, 1);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_acct")
int never(void *ctx)
{
	struct idle_slot slot = {};
	__u64 *v = bpf_map_lookup_elem(&idle_acct_calls, &slot);

	if (v)
		__sync_fetch_and_add(v, 1);
	return 0;
}

// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

/*
 * Test program for the exporter's self uprobe (selfprobe_test.go): a
 * program on cloudflare/ebpf_exporter's section
 * uprobe//proc/self/exe:post_attach_mark, which the exporter calls once
 * right after attaching the config's programs, counts its calls and
 * stores a known value, as the reference's bpf-jit example initialises
 * its map there.
 *
 * self_mark_calls_total (ARRAY, 1 entry): key u32 0, value u64 calls.
 * self_mark_value (ARRAY, 1 entry): key u32 0, value u64 424242 once
 *   called.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} self_mark_calls_total SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} self_mark_value SEC(".maps");

SEC("uprobe//proc/self/exe:post_attach_mark")
int self_mark(void *ctx)
{
	__u32 zero = 0;
	__u64 known = 424242, *v;

	v = bpf_map_lookup_elem(&self_mark_calls_total, &zero);
	if (v)
		__sync_fetch_and_add(v, 1);
	bpf_map_update_elem(&self_mark_value, &zero, &known, BPF_ANY);
	return 0;
}

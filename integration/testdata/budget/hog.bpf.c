// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

/*
 * Fixture of the memory budget test (budget_memory_test.go): a user program
 * whose one hash map is far too big for the budget the test sets. The
 * exporter must refuse it before the kernel creates the map. Its program
 * is on a hook that practically never fires (an OOM kill): it exists only
 * so that the object has something to attach.
 *
 * Map mem_hog_total (HASH, preallocated), key struct hog_key, 8 bytes:
 *   offset 0   u32 a
 *   offset 4   u32 b
 *   value u64
 * max_entries is HOG_ENTRIES, 4194304 unless -DHOG_ENTRIES=n: about
 * 320 MiB of kernel memory once created (64-byte elements and 16-byte
 * buckets).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "kernel_exporter/maps.bpf.h"

#ifndef HOG_ENTRIES
#define HOG_ENTRIES 4194304
#endif

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct hog_key {
	__u32 a;
	__u32 b;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, HOG_ENTRIES);
	__type(key, struct hog_key);
	__type(value, __u64);
} mem_hog_total SEC(".maps");

SEC("tp_btf/mark_victim")
int BPF_PROG(mem_hog_mark_victim)
{
	struct hog_key key = {};

	ke_add(&mem_hog_total, &key, 1);
	return 0;
}

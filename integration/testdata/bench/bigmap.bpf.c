// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

/*
 * Fixture of the HTTP scrape benchmark (bench_http_test.go): one hash map
 * that the benchmark fills from user space, and one program, on a hook
 * that practically never fires (an OOM kill), that exists only so that
 * both exporters load and attach the object.
 *
 * Map bigmap_total (HASH), key struct bigmap_key, 8 bytes:
 *   offset 0   u32 a
 *   offset 4   u32 b
 *   value u64
 * max_entries is BIGMAP_ENTRIES (the benchmark compiles one object per
 * map size with -DBIGMAP_ENTRIES=n).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "kernel_exporter/maps.bpf.h"

#ifndef BIGMAP_ENTRIES
#define BIGMAP_ENTRIES 1048576
#endif

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct bigmap_key {
	__u32 a;
	__u32 b;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, BIGMAP_ENTRIES);
	__type(key, struct bigmap_key);
	__type(value, __u64);
} bigmap_total SEC(".maps");

SEC("tp_btf/mark_victim")
int BPF_PROG(bigmap_mark_victim)
{
	struct bigmap_key key = {};

	ke_add(&bigmap_total, &key, 1);
	return 0;
}

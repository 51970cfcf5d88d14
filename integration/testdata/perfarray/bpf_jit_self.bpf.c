// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

/*
 * Test program for kaddrs and the self uprobe on kprobes (the kernel
 * matrix: TestMatrixSelfProbeBPFJit), in the shape of cloudflare/
 * ebpf_exporter's bpf-jit example (its config format; this is our own
 * program): the pages the BPF JIT holds, read from the kernel variable
 * bpf_jit_current (kernel/bpf/core.c, atomic_long_t, 4.14+) whose address
 * the exporter writes into kaddr_bpf_jit_current (kaddrs), at every
 * bpf_jit_binary_alloc call (kprobe) and once right after attach (the
 * uprobe on /proc/self/exe:post_attach_mark).
 *
 * bpf_jit_pages (ARRAY, 1 entry): key u32 0, value u64 pages.
 * bpf_jit_reads_total (ARRAY, 1 entry): key u32 0, value u64 reads done
 *   by the post_attach_mark uprobe.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

const volatile __u64 kaddr_bpf_jit_current = 0;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} bpf_jit_pages SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} bpf_jit_reads_total SEC(".maps");

static int read_current(void)
{
	__u32 zero = 0;
	__s64 pages = 0;

	if (!kaddr_bpf_jit_current)
		return 0;
	bpf_probe_read_kernel(&pages, sizeof(pages), (const void *)kaddr_bpf_jit_current);
	bpf_map_update_elem(&bpf_jit_pages, &zero, &pages, BPF_ANY);
	return 0;
}

SEC("kprobe/bpf_jit_binary_alloc")
int jit_alloc(void *ctx)
{
	return read_current();
}

SEC("uprobe//proc/self/exe:post_attach_mark")
int jit_init(void *ctx)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&bpf_jit_reads_total, &zero);

	if (n)
		__sync_fetch_and_add(n, 1);
	return read_current();
}

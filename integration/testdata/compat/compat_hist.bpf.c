// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

/*
 * Test program of the compatibility suite (compat_hist_test.go): every
 * pread64(2) on the magic fd -4242 (which fails with EBADF) is one
 * observation of the value in its count argument, recorded in four
 * histograms laid out as cloudflare/ebpf_exporter's examples lay theirs
 * out (the last key field is the bucket index; the index bucket_max + 1
 * holds the sum), one per bucket_type of compat_hist.yaml. The pos
 * argument is the "kind" label (1 read, 2 write in the config's
 * static_map; others are skipped by the exporter).
 *
 * Kernel source: tracepoint syscalls:sys_enter_pread64 (syscall
 * tracepoints since 2.6.33), fields fd, count, pos.
 *
 * Keys (HASH, 16 bytes): u8 kind, 7 bytes of padding, u64 bucket index;
 * values u64 observations (or the sum, at bucket_max + 1):
 *   compat_exp2_seconds      exp2: index floor(log2(v)), v = 0 in 0; up to 10
 *   compat_exp2zero_bytes    exp2zero: 0 for v = 0, else floor(log2(v)) + 1; up to 6
 *   compat_linear_items      linear: v, up to 5 (the config's bucket_min is 1:
 *                            v = 0 is left out of the histogram)
 *   compat_fixed_seconds     fixed: the first of 1, 10, 100, 1000 that is >= v
 *                            (1000 for larger v)
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define MAGIC_FD -4242

struct hist_key {
	__u8 kind;
	__u8 pad[7];
	__u64 bucket;
};

#define HIST(name)                                                                                 \
	struct {                                                                                   \
		__uint(type, BPF_MAP_TYPE_HASH);                                                   \
		__uint(max_entries, 64);                                                           \
		__type(key, struct hist_key);                                                      \
		__type(value, __u64);                                                              \
	} name SEC(".maps")

HIST(compat_exp2_seconds);
HIST(compat_exp2zero_bytes);
HIST(compat_linear_items);
HIST(compat_fixed_seconds);

static __always_inline void add(void *map, __u8 kind, __u64 bucket, __u64 n)
{
	struct hist_key key = { .kind = kind, .bucket = bucket };
	__u64 *v = bpf_map_lookup_elem(map, &key);

	if (v) {
		__sync_fetch_and_add(v, n);
		return;
	}
	if (bpf_map_update_elem(map, &key, &n, BPF_NOEXIST) == 0)
		return;
	v = bpf_map_lookup_elem(map, &key); /* another CPU inserted it first */
	if (v)
		__sync_fetch_and_add(v, n);
}

static __always_inline __u64 log2_floor(__u64 v)
{
	__u64 r = 0;

	for (int i = 0; i < 63; i++) {
		if (v <= 1)
			break;
		v >>= 1;
		r++;
	}
	return r;
}

static __always_inline __u64 min_u64(__u64 a, __u64 b)
{
	return a < b ? a : b;
}

SEC("tracepoint/syscalls/sys_enter_pread64")
int compat_hist_pread(struct trace_event_raw_sys_enter *ctx)
{
	__u64 v = ctx->args[2];
	__u8 kind = (__u8)ctx->args[3];
	__u64 b;

	if ((int)ctx->args[0] != MAGIC_FD)
		return 0;

	add(&compat_exp2_seconds, kind, min_u64(log2_floor(v), 10), 1);
	add(&compat_exp2_seconds, kind, 11, v);

	add(&compat_exp2zero_bytes, kind, v == 0 ? 0 : min_u64(log2_floor(v) + 1, 6), 1);
	add(&compat_exp2zero_bytes, kind, 7, v);

	add(&compat_linear_items, kind, min_u64(v, 5), 1);
	add(&compat_linear_items, kind, 6, v);

	b = v <= 1 ? 1 : v <= 10 ? 10 : v <= 100 ? 100 : 1000;
	add(&compat_fixed_seconds, kind, b, 1);
	add(&compat_fixed_seconds, kind, 1001, v);
	return 0;
}

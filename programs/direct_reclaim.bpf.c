// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

// (The build constraint above keeps the Go tool from treating this BPF C file
// as cgo source of package programs; clang ignores it.)

/*
 * direct_reclaim: time tasks spend in direct memory reclaim, the stall an
 * allocating task takes when free memory is short and it has to free pages
 * itself, global (zone watermarks) or within its memory cgroup (the cgroup's
 * limit or high boundary). Also the pages each kind reclaimed.
 *
 * Why: Kafka brokers after a distro upgrade logged page allocation stalls of
 * up to 287 s. Direct reclaim is where such stalls go, but procfs only has
 * scan/steal page counts, not how long tasks were held.
 *
 * Kernel source: BTF tracepoints (tp_btf, 5.5+), include/trace/events/vmscan.h:
 *   vmscan:mm_vmscan_direct_reclaim_begin/_end   kind 0, "global" (2.6.36)
 *   vmscan:mm_vmscan_memcg_reclaim_begin/_end    kind 1, "memcg"  (later 2.6
 *                                                or 3.x; in every kernel
 *                                                that has tp_btf)
 * begin has (int order, gfp_t gfp_flags), end has (unsigned long
 * nr_reclaimed). Both are called in the reclaiming task; start times live
 * in a HASH keyed by thread id and kind. The cgroup v1 soft-limit reclaim
 * tracepoints (memcg_softlimit_reclaim_*) run inside kswapd or global
 * reclaim and are not counted.
 *
 * Map direct_reclaim_seconds (HASH), key struct reclaim_key, 8 bytes:
 *   offset 0  u32 kind     0 = global, 1 = memcg
 *   offset 4  u32 bucket   exp2 slot, 0..36; slot 37 holds the sum
 *   value u64: reclaim runs (slot 37: sum of nanoseconds).
 * Bucket unit: nanoseconds (slot k: duration <= 2^k ns; slot 36 ≈ 69 s).
 *
 * Map direct_reclaim_pages_total (HASH), key u32 kind (4 bytes), value u64:
 * pages reclaimed (nr_reclaimed summed).
 *
 * Label bounds: kind has 2 values.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "kernel_exporter/maps.bpf.h"

#define MAX_BUCKET	36
#define KIND_GLOBAL	0
#define KIND_MEMCG	1

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct reclaim_key {
	__u32 kind;
	__u32 bucket;
};
_Static_assert(sizeof(struct reclaim_key) == 8, "direct_reclaim.yaml expects an 8-byte key");

struct start_key {
	__u32 tid;
	__u32 kind;
};

/* When each thread entered reclaim; at most one entry per thread and kind. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 10240);
	__type(key, struct start_key);
	__type(value, __u64);
} reclaim_start SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 2 * (MAX_BUCKET + 2));
	__type(key, struct reclaim_key);
	__type(value, __u64);
} direct_reclaim_seconds SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} direct_reclaim_pages_total SEC(".maps");

static __always_inline void reclaim_begin(__u32 kind)
{
	struct start_key sk = {
		.tid = (__u32)bpf_get_current_pid_tgid(),
		.kind = kind,
	};
	__u64 ts = bpf_ktime_get_ns();

	ke_update(&reclaim_start, &sk, &ts, BPF_ANY);
}

static __always_inline void reclaim_end(__u32 kind, __u64 nr_reclaimed)
{
	struct start_key sk = {
		.tid = (__u32)bpf_get_current_pid_tgid(),
		.kind = kind,
	};
	struct reclaim_key key = {};
	__u64 *start, delta;

	start = bpf_map_lookup_elem(&reclaim_start, &sk);
	if (!start)
		return; /* began before we attached */
	delta = bpf_ktime_get_ns() - *start;
	bpf_map_delete_elem(&reclaim_start, &sk);

	key.kind = kind;
	ke_observe(ke_add, &direct_reclaim_seconds, key,
		   ke_exp2_slot(delta), delta, MAX_BUCKET);
	ke_add(&direct_reclaim_pages_total, &kind, nr_reclaimed);
}

SEC("tp_btf/mm_vmscan_direct_reclaim_begin")
int BPF_PROG(direct_reclaim_begin)
{
	reclaim_begin(KIND_GLOBAL);
	return 0;
}

SEC("tp_btf/mm_vmscan_direct_reclaim_end")
int BPF_PROG(direct_reclaim_end, unsigned long nr_reclaimed)
{
	reclaim_end(KIND_GLOBAL, nr_reclaimed);
	return 0;
}

SEC("tp_btf/mm_vmscan_memcg_reclaim_begin")
int BPF_PROG(memcg_reclaim_begin)
{
	reclaim_begin(KIND_MEMCG);
	return 0;
}

SEC("tp_btf/mm_vmscan_memcg_reclaim_end")
int BPF_PROG(memcg_reclaim_end, unsigned long nr_reclaimed)
{
	reclaim_end(KIND_MEMCG, nr_reclaimed);
	return 0;
}

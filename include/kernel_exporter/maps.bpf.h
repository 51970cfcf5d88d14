/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * kernel_exporter helpers for BPF programs: counters and histograms kept in
 * BPF maps in the layout the exporter reads.
 *
 * Every map value is a u64 (8 bytes); per-CPU maps hold one u64 per CPU and
 * the exporter sums them at scrape time.
 *
 * Histogram keys end with a u32 "bucket" field. Slot numbering:
 *   exp2:     slot k counts values v with 2^(k-1) < v <= 2^k (slot 0: v <= 1),
 *             so the exporter's le=2^k*multiplier is a true upper bound.
 *   exp2zero: slot 0 counts v == 0, slot k>0 counts 2^(k-2) < v <= 2^(k-1).
 *   linear:   slot k counts values v with k-1 < v <= k.
 * Values above the last slot land in the last slot (bucket_max). The slot
 * bucket_max + 1 holds the running sum of all observed values, in the same
 * unit as the buckets; the exporter turns it into the histogram's _sum.
 *
 * Failed inserts: an insert into a full hash map fails (-E2BIG; -ENOMEM when
 * the kernel cannot allocate the element). ke_add, ke_add_percpu and
 * ke_update count such failures in ke_map_update_errors, which this header
 * adds to every object that includes it, and the exporter serves the counts
 * as kernel_exporter_map_update_errors_total{config,map}. Other failures
 * (-EEXIST when another CPU created the key first, -EBUSY...) are not
 * counted. LRU maps evict instead of failing, so they rarely count.
 */
#ifndef __KERNEL_EXPORTER_MAPS_BPF_H
#define __KERNEL_EXPORTER_MAPS_BPF_H

#include <bpf/bpf_helpers.h>

#define KE_E2BIG  7  /* errno.h */
#define KE_ENOMEM 12

/*
 * ke_map_update_errors (PERCPU_HASH): key u32, the kernel's id of the map an
 * insert failed on (bpf_map.id, what BPF_OBJ_GET_INFO_BY_FD reports); value
 * u64 per CPU, the failed inserts on that CPU. The exporter sums the CPUs
 * and names the map. 64 maps at most: more than any object has.
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u64);
} ke_map_update_errors SEC(".maps");

/*
 * The kernel's struct bpf_map (include/linux/bpf.h), reduced to the field
 * read here; CO-RE finds its offset in the running kernel (the ___ke suffix
 * keeps it apart from vmlinux.h's definition). BPF programs may read fields
 * of a map they reference since 5.10 (CAP_PERFMON or CAP_SYS_ADMIN).
 */
struct bpf_map___ke {
	__u32 id;
} __attribute__((preserve_access_index));

/*
 * ke_count_update_error counts err, the result of an insert into map (a map
 * the program references, not one found through a map of maps), when it
 * says the map is full.
 */
static __always_inline void ke_count_update_error(void *map, long err)
{
	__u64 zero = 0, *n;
	__u32 id;

	if (err != -KE_E2BIG && err != -KE_ENOMEM)
		return;
	id = ((struct bpf_map___ke *)map)->id;
	n = bpf_map_lookup_elem(&ke_map_update_errors, &id);
	if (!n) {
		bpf_map_update_elem(&ke_map_update_errors, &id, &zero, BPF_NOEXIST);
		n = bpf_map_lookup_elem(&ke_map_update_errors, &id);
		if (!n)
			return;
	}
	/* Atomic: a perf_event (NMI) program may interrupt one on this CPU. */
	__sync_fetch_and_add(n, 1);
}

/*
 * ke_update is bpf_map_update_elem that counts failures because the map is
 * full (see above). It returns what bpf_map_update_elem returned.
 */
static __always_inline long ke_update(void *map, const void *key, const void *value, __u64 flags)
{
	long err = bpf_map_update_elem(map, key, value, flags);

	if (err)
		ke_count_update_error(map, err);
	return err;
}

/*
 * __ke_add adds inc to the u64 at key in map, creating the entry if needed.
 * atomic must be a constant: true for maps shared by all CPUs, false for
 * per-CPU maps, where a plain add is enough.
 */
static __always_inline void __ke_add(void *map, const void *key, __u64 inc, const bool atomic)
{
	__u64 zero = 0, *val;

	val = bpf_map_lookup_elem(map, key);
	if (!val) {
		/*
		 * BPF_NOEXIST: a concurrent creator wins (-EEXIST, not counted),
		 * then we add to it. A full map fails and is counted.
		 */
		ke_update(map, key, &zero, BPF_NOEXIST);
		val = bpf_map_lookup_elem(map, key);
		if (!val)
			return;
	}
	if (atomic)
		__sync_fetch_and_add(val, inc);
	else
		*val += inc;
}

/* ke_add adds inc to the u64 at key in a map shared by all CPUs. */
static __always_inline void ke_add(void *map, const void *key, __u64 inc)
{
	__ke_add(map, key, inc, true);
}

/* ke_add_percpu is ke_add for per-CPU maps: no atomic needed. */
static __always_inline void ke_add_percpu(void *map, const void *key, __u64 inc)
{
	__ke_add(map, key, inc, false);
}

/* ke_log2 returns floor(log2(v)) for v > 0, and 0 for v == 0. */
static __always_inline __u32 ke_log2(__u64 v)
{
	__u32 r = 0, shift;

	shift = (v > 0xFFFFFFFFULL) << 5; v >>= shift; r |= shift;
	shift = (v > 0xFFFF) << 4; v >>= shift; r |= shift;
	shift = (v > 0xFF) << 3; v >>= shift; r |= shift;
	shift = (v > 0xF) << 2; v >>= shift; r |= shift;
	shift = (v > 0x3) << 1; v >>= shift; r |= shift;
	r |= (v >> 1);
	return r;
}

/* ke_exp2_slot returns ceil(log2(v)): the smallest k with v <= 2^k. */
static __always_inline __u32 ke_exp2_slot(__u64 v)
{
	if (v <= 1)
		return 0;
	return ke_log2(v - 1) + 1;
}

/* ke_exp2zero_slot returns 0 for v == 0, else ke_exp2_slot(v) + 1. */
static __always_inline __u32 ke_exp2zero_slot(__u64 v)
{
	if (v == 0)
		return 0;
	return ke_exp2_slot(v) + 1;
}

/*
 * ke_observe records value v in the histogram map under key, whose u32
 * member "bucket" is overwritten: slot is clamped to max_bucket, and the sum
 * goes to slot max_bucket + 1. add is ke_add or ke_add_percpu.
 */
#define ke_observe(add, map, key, slot, v, max_bucket)                   \
	do {                                                             \
		__u32 __s = (slot);                                      \
		(key).bucket = __s > (max_bucket) ? (max_bucket) : __s;  \
		add(map, &(key), 1);                                     \
		(key).bucket = (max_bucket) + 1;                         \
		add(map, &(key), (v));                                   \
	} while (0)

#endif /* __KERNEL_EXPORTER_MAPS_BPF_H */

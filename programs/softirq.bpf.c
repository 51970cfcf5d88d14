// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

// (The build constraint above keeps the Go tool from treating this BPF C file
// as cgo source of package programs; clang ignores it.)

/*
 * softirq: how long each softirq vector runs (service time), and how long a
 * raised softirq waits before its handler starts (raise-to-entry latency).
 *
 * Why: a CDN edge saw 1.3 s ICMP replies because net_rx_action (NET_RX)
 * sometimes ran for 23 ms while tcp_collapse merged huge receive queues;
 * the whole CPU stalls for as long as a softirq runs. A duration histogram
 * per vector shows that tail directly; the raise latency shows softirqs
 * pushed to ksoftirqd or starved behind other work.
 *
 * Kernel source: BTF tracepoints (tp_btf, 5.5+) irq:softirq_raise,
 * irq:softirq_entry and irq:softirq_exit (include/trace/events/irq.h;
 * entry and exit since about 2.6.30, raise since about 2.6.37), each with
 * one argument, unsigned int vec_nr.
 *
 * Softirqs are per CPU: a vector raised on a CPU runs on that CPU, and
 * softirqs do not nest on one CPU. Start times therefore live in per-CPU
 * arrays indexed by vector, with no locking and no hash lookups:
 *   softirq_raised_at   first raise since the last entry (0: none pending)
 *   softirq_entered_at  last entry
 * A repeated raise before the handler runs keeps the first timestamp, so the
 * latency is that of the oldest pending raise. An entry with no recorded
 * raise (raised before we attached, or by a path that sets the pending bit
 * without the tracepoint) records no latency.
 *
 * Maps softirq_duration_seconds and softirq_latency_seconds (PERCPU_HASH),
 * key struct softirq_key, 8 bytes:
 *   offset 0  u32 vector   softirq vector number, 0..9 (NR_SOFTIRQS = 10)
 *   offset 4  u32 bucket   exp2 slot, 0..36; slot 37 holds the sum
 *   value u64 per CPU      count of events (slot 37: sum of nanoseconds)
 * Bucket unit: nanoseconds (slot k: value <= 2^k ns; slot 36 ≈ 69 s).
 *
 * Label bounds: vector has at most NR_SOFTIRQS (10) values, checked below;
 * each map holds at most 10 * 38 keys.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "kernel_exporter/maps.bpf.h"

#define MAX_BUCKET	36
#define NR_VECTORS	10	/* NR_SOFTIRQS on every kernel with tp_btf */

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct softirq_key {
	__u32 vector;
	__u32 bucket;
};
_Static_assert(sizeof(struct softirq_key) == 8, "softirq.yaml expects an 8-byte key");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NR_VECTORS);
	__type(key, __u32);
	__type(value, __u64);
} softirq_raised_at SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NR_VECTORS);
	__type(key, __u32);
	__type(value, __u64);
} softirq_entered_at SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, NR_VECTORS * (MAX_BUCKET + 2));
	__type(key, struct softirq_key);
	__type(value, __u64);
} softirq_duration_seconds SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, NR_VECTORS * (MAX_BUCKET + 2));
	__type(key, struct softirq_key);
	__type(value, __u64);
} softirq_latency_seconds SEC(".maps");

SEC("tp_btf/softirq_raise")
int BPF_PROG(softirq_raise, unsigned int vec)
{
	__u64 *ts;

	if (vec >= NR_VECTORS)
		return 0;
	ts = bpf_map_lookup_elem(&softirq_raised_at, &vec);
	if (ts && *ts == 0)
		*ts = bpf_ktime_get_ns();
	return 0;
}

SEC("tp_btf/softirq_entry")
int BPF_PROG(softirq_entry, unsigned int vec)
{
	struct softirq_key key = {};
	__u64 now, *raised, *entered, delta;

	if (vec >= NR_VECTORS)
		return 0;
	now = bpf_ktime_get_ns();
	entered = bpf_map_lookup_elem(&softirq_entered_at, &vec);
	if (entered)
		*entered = now;

	raised = bpf_map_lookup_elem(&softirq_raised_at, &vec);
	if (!raised || *raised == 0)
		return 0;
	delta = now - *raised;
	*raised = 0;
	key.vector = vec;
	ke_observe(ke_add_percpu, &softirq_latency_seconds, key,
		   ke_exp2_slot(delta), delta, MAX_BUCKET);
	return 0;
}

SEC("tp_btf/softirq_exit")
int BPF_PROG(softirq_exit, unsigned int vec)
{
	struct softirq_key key = {};
	__u64 *entered, delta;

	if (vec >= NR_VECTORS)
		return 0;
	entered = bpf_map_lookup_elem(&softirq_entered_at, &vec);
	if (!entered || *entered == 0)
		return 0; /* entered before we attached */
	delta = bpf_ktime_get_ns() - *entered;
	*entered = 0;
	key.vector = vec;
	ke_observe(ke_add_percpu, &softirq_duration_seconds, key,
		   ke_exp2_slot(delta), delta, MAX_BUCKET);
	return 0;
}

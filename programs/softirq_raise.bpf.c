// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

// (The build constraint above keeps the Go tool from treating this BPF C file
// as cgo source of package programs; clang ignores it.)

/*
 * softirq_raise: how long a raised softirq waits before its handler starts
 * (raise-to-entry latency), and how often each vector is raised, by vector.
 *
 * Why: a CDN edge saw 1.3 s ICMP replies while net_rx_action (NET_RX) was
 * held up behind tcp_collapse: raised NET_RX work waited, and the whole CPU
 * with it. The raise-to-entry delay shows softirqs deferred to ksoftirqd or
 * starved behind other softirqs. It is opt-in, apart from the softirq
 * program (handler durations): softirq_raise is the most frequent of the
 * three softirq events, and with it softirq cost more per softirq than
 * libbpf-tools' softirqs (issue 28, docs/performance.md).
 *
 * Kernel source: BTF tracepoints (tp_btf, 5.5+) irq:softirq_raise (since
 * about 2.6.37) and irq:softirq_entry (since about 2.6.30), in
 * include/trace/events/irq.h, each with one argument, unsigned int vec_nr.
 * softirq_raise fires in __raise_softirq_irqoff (kernel/softirq.c) when a
 * vector's pending bit is set; raise_softirq_irqoff from an interrupt and
 * the networking paths (____napi_schedule) go through it. softirq_entry
 * fires in handle_softirqs (__do_softirq before 6.7) for each pending vector
 * as its handler starts.
 *
 * A vector raised on a CPU runs on that CPU, and softirqs do not nest on a
 * CPU, so the first raise since the last entry is kept in a per-CPU array
 * indexed by vector (softirq_raise_first, 0: nothing pending). Later raises
 * of a pending vector keep the first timestamp: the latency is that of the
 * oldest pending raise. An entry with no recorded raise (raised before we
 * attached, or a pending bit set by a path without the tracepoint, such as
 * or_softirq_pending from the RCU and timer code on some kernels) records
 * no latency.
 *
 * Map softirq_raises_total (PERCPU_ARRAY), key u32 vector (4 bytes), value
 * u64 per CPU: every raise, including repeats while pending, summed by the
 * exporter.
 *
 * Map softirq_raise_latency_seconds (PERCPU_ARRAY, slots_in_value), key
 * u32 vector (softirq vector number, 0..9, NR_SOFTIRQS = 10), value struct
 * softirq_raise_hist, 304 bytes per CPU: u64 slots[38], slot k (0..36) the
 * count of entries of k's exp2 bucket, slot 37 the sum of nanoseconds; the
 * exporter sums the CPUs. Bucket unit: nanoseconds (slot k: value <= 2^k
 * ns; slot 36 ≈ 69 s). One inlined array lookup finds a vector's bucket
 * and sum (see softirq.bpf.c).
 *
 * Label bounds: vector has at most NR_SOFTIRQS (10) values: the arrays
 * have 10 entries, and a larger vector finds none.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "kernel_exporter/maps.bpf.h"
#include "kernel_exporter/slots.bpf.h"

#define MAX_BUCKET	36
#define NR_VECTORS	10	/* NR_SOFTIRQS on every kernel with tp_btf */

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct softirq_raise_hist {
	__u64 slots[MAX_BUCKET + 2];
};
_Static_assert(sizeof(struct softirq_raise_hist) == 8 * (MAX_BUCKET + 2), "softirq_raise.yaml expects 38 u64 slots");

/* First raise since the last entry, per CPU and vector (0: none pending). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NR_VECTORS);
	__type(key, __u32);
	__type(value, __u64);
} softirq_raise_first SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NR_VECTORS);
	__type(key, __u32);
	__type(value, __u64);
} softirq_raises_total SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NR_VECTORS);
	__type(key, __u32);
	__type(value, struct softirq_raise_hist);
} softirq_raise_latency_seconds SEC(".maps");

SEC("tp_btf/softirq_raise")
int BPF_PROG(softirq_raise, unsigned int vec)
{
	__u64 *ts, *n;

	n = bpf_map_lookup_elem(&softirq_raises_total, &vec);
	if (n)
		*n += 1;
	ts = bpf_map_lookup_elem(&softirq_raise_first, &vec);
	if (ts && *ts == 0)
		*ts = bpf_ktime_get_ns();
	return 0;
}

SEC("tp_btf/softirq_entry")
int BPF_PROG(softirq_entry, unsigned int vec)
{
	struct softirq_raise_hist *h;
	__u64 *raised, delta;

	raised = bpf_map_lookup_elem(&softirq_raise_first, &vec);
	if (!raised || *raised == 0)
		return 0;
	delta = bpf_ktime_get_ns() - *raised;
	*raised = 0;
	h = bpf_map_lookup_elem(&softirq_raise_latency_seconds, &vec);
	if (!h)
		return 0;
	ke_observe_slots(h->slots, ke_exp2_slot(delta), delta, MAX_BUCKET);
	return 0;
}

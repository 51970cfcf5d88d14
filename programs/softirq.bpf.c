// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

// (The build constraint above keeps the Go tool from treating this BPF C file
// as cgo source of package programs; clang ignores it.)

/*
 * softirq: how long each softirq vector runs (service time), by vector.
 *
 * Why: a CDN edge saw 1.3 s ICMP replies because net_rx_action (NET_RX)
 * sometimes ran for 23 ms while tcp_collapse merged huge receive queues;
 * the whole CPU stalls for as long as a softirq runs. A duration histogram
 * per vector shows that tail directly. How long raised softirqs wait before
 * they run (raise-to-entry latency) is the softirq_raise program's, opt-in:
 * it adds a program on softirq_raise, the most frequent of the three
 * events, and work at every entry.
 *
 * Kernel source: BTF tracepoints (tp_btf, 5.5+) irq:softirq_entry and
 * irq:softirq_exit (include/trace/events/irq.h, since about 2.6.30), each
 * with one argument, unsigned int vec_nr, fired in handle_softirqs
 * (__do_softirq before 6.7) around each vector's handler.
 *
 * Softirqs are per CPU and do not nest on one CPU, so the entry time lives
 * in a per-CPU array indexed by vector (softirq_entered_at, 0: not
 * running), with no locking and no hash lookups. An exit with no recorded
 * entry (entered before we attached) records nothing.
 *
 * Map softirq_duration_seconds (PERCPU_ARRAY, slots_in_value), key u32
 * vector (softirq vector number, 0..9, NR_SOFTIRQS = 10), value struct
 * softirq_hist, 304 bytes per CPU: u64 slots[38], slot k (0..36) the count
 * of runs of k's exp2 bucket, slot 37 the sum of nanoseconds; the exporter
 * sums the CPUs. Bucket unit: nanoseconds (slot k: duration <= 2^k ns;
 * slot 36 ≈ 69 s).
 *
 * Why the slots are in the value: one array lookup, which the verifier
 * inlines, finds both the bucket and the sum of a vector, in the CPU's own
 * memory. Keyed by {vector, bucket} in a per-CPU hash (the layout before),
 * each run cost two hash lookups: entry + exit ran at 1.0-1.3× libbpf-tools'
 * softirqs -d on the same events, as written at 0.4-0.9×
 * (docs/performance.md, make bench-bcc).
 *
 * Label bounds: vector has at most NR_SOFTIRQS (10) values: both arrays
 * have 10 entries, and a larger vector finds none. A vector that never ran
 * (all slots zero) has no series.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "kernel_exporter/maps.bpf.h"
#include "kernel_exporter/slots.bpf.h"

#define MAX_BUCKET	36
#define NR_VECTORS	10	/* NR_SOFTIRQS on every kernel with tp_btf */

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct softirq_hist {
	__u64 slots[MAX_BUCKET + 2];
};
_Static_assert(sizeof(struct softirq_hist) == 8 * (MAX_BUCKET + 2), "softirq.yaml expects 38 u64 slots");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NR_VECTORS);
	__type(key, __u32);
	__type(value, __u64);
} softirq_entered_at SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NR_VECTORS);
	__type(key, __u32);
	__type(value, struct softirq_hist);
} softirq_duration_seconds SEC(".maps");

SEC("tp_btf/softirq_entry")
int BPF_PROG(softirq_entry, unsigned int vec)
{
	__u64 *entered = bpf_map_lookup_elem(&softirq_entered_at, &vec);

	if (entered)
		*entered = bpf_ktime_get_ns();
	return 0;
}

SEC("tp_btf/softirq_exit")
int BPF_PROG(softirq_exit, unsigned int vec)
{
	struct softirq_hist *h;
	__u64 *entered, delta;

	entered = bpf_map_lookup_elem(&softirq_entered_at, &vec);
	if (!entered || *entered == 0)
		return 0; /* entered before we attached */
	delta = bpf_ktime_get_ns() - *entered;
	*entered = 0;
	h = bpf_map_lookup_elem(&softirq_duration_seconds, &vec);
	if (!h)
		return 0;
	ke_observe_slots(h->slots, ke_exp2_slot(delta), delta, MAX_BUCKET);
	return 0;
}

// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

/*
 * audit_fallback: test object for the self-audit's fallback fault. One
 * counter of context switches is fed by one of two programs, best first:
 * tp_btf/sched_switch, which fires for every context switch (where the
 * kernel counts rq->nr_switches, summed in /proc/stat's ctxt line), or a
 * fallback on the tracepoint sched:sched_wakeup, which sees fewer events:
 * one per wakeup, where the kernel counts the switch in of the woken task
 * and the switch out of the task it replaces, and switches by preemption
 * or yield that follow no wakeup at all.
 *
 * Map context_switches_total (HASH): key u32 via (1 tp_btf sched_switch,
 * 2 tracepoint sched_wakeup); value u64 events.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "kernel_exporter/maps.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} context_switches_total SEC(".maps");

static __always_inline void count(__u32 via)
{
	ke_add(&context_switches_total, &via, 1);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(switch_btf)
{
	count(1);
	return 0;
}

SEC("tracepoint/sched/sched_wakeup")
int wakeup_tracepoint(void *ctx)
{
	count(2);
	return 0;
}

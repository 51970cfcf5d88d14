// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

/*
 * Test program for perf_event_array counters on kprobes (the kernel
 * matrix: TestMatrixPerfEventArrayOOMKill): OOM kills by memory cgroup,
 * one record per kill written to a perf event array, in the layout of
 * cloudflare/ebpf_exporter's oomkill example (its config format; this is
 * our own program).
 *
 * Kernel source: kprobe on oom_kill_process(struct oom_control *oc, const
 * char *message) (mm/oom_kill.c, 2.6+), called once per OOM kill; oc->memcg
 * is the memory cgroup whose limit was hit (NULL for a global OOM), and its
 * css.cgroup->kn->id the cgroup id the cgroup decoder resolves.
 *
 * oom_kills_total (PERF_EVENT_ARRAY): records of 8 bytes: u64 cgroup id
 *   (0 for a global OOM).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
} oom_kills_total SEC(".maps");

SEC("kprobe/oom_kill_process")
int BPF_KPROBE(oomkill_perf, struct oom_control *oc, const char *message)
{
	__u64 id = 0;
	struct mem_cgroup *memcg = BPF_CORE_READ(oc, memcg);

	if (memcg)
		id = BPF_CORE_READ(memcg, css.cgroup, kn, id);
	bpf_perf_event_output(ctx, &oom_kills_total, BPF_F_CURRENT_CPU, &id, sizeof(id));
	return 0;
}

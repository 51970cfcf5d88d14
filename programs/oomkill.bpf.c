// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

// (The build constraint above keeps the Go tool from treating this BPF C file
// as cgo source of package programs; clang ignores it.)

/*
 * oomkill: OOM kills, by the cgroup of the killed task.
 *
 * Why: an OOM kill is a restart that application metrics often show only as
 * a gap; the kernel log says which process died but not as a time series.
 * By cgroup, the counter says which service or container was killed.
 *
 * Kernel source: BTF tracepoint (tp_btf, 5.5+) oom:mark_victim
 * (include/trace/events/oom.h, a 4.x tracepoint), fired once per victim
 * chosen by the OOM killer (global or memory-cgroup OOM). Recent kernels
 * (6.18 has it) pass struct task_struct *task and uid_t uid; older ones
 * pass only int pid. The victim's cgroup is read from
 * task->cgroups->dfl_cgrp, the task's cgroup in the unified (v2) hierarchy,
 * whose kernfs node id is the cgroup id that bpf_get_current_cgroup_id()
 * and the cgroup decoder use.
 * The task argument is used only when the kernel's mark_victim record has
 * the uid field added with it (CO-RE field check); on older kernels the code
 * is removed at load time and kills are counted under cgroup id 0.
 * The current task is not used: the OOM killer often runs in the context of
 * the task whose allocation failed, not in the victim's.
 *
 * On a cgroup v1 host the dfl_cgrp is the v2 cgroup (the root, "/", unless
 * the unified hierarchy is populated), not the v1 memory cgroup that hit
 * its limit.
 *
 * Map oom_kills_total (HASH), key u64 cgroup id (8 bytes), value u64:
 * OOM kills.
 *
 * Label bounds: one series per cgroup that had an OOM kill; capped at 1024
 * cgroups (further new cgroups are not counted).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "kernel_exporter/maps.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64);
	__type(value, __u64);
} oom_kills_total SEC(".maps");

SEC("tp_btf/mark_victim")
int BPF_PROG(mark_victim)
{
	__u64 cgid = 0;

	if (bpf_core_field_exists(struct trace_event_raw_mark_victim, uid)) {
		struct task_struct *task = (struct task_struct *)ctx[0];

		cgid = BPF_CORE_READ(task, cgroups, dfl_cgrp, kn, id);
	}
	ke_add(&oom_kills_total, &cgid, 1);
	return 0;
}

// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

// (The build constraint above keeps the Go tool from treating this BPF C file
// as cgo source of package programs; clang ignores it.)
/*
 * runqlat_cgroup: run-queue latency by cgroup (v2), for the cgroups of an
 * allow list only: the time a task of such a cgroup spends runnable,
 * waiting for a CPU, from wakeup (or preemption) until it is switched in.
 *
 * Why: keepalives pinned connections to a few busy NGINX workers; their
 * requests queued behind compute-heavy work. Per cgroup (a systemd service,
 * a Kubernetes pod), the run-queue latency shows which workload waits.
 *
 * Kernel source: BTF tracepoints (tp_btf, 5.5+) sched:sched_wakeup,
 * sched:sched_wakeup_new (struct task_struct *p) and sched:sched_switch
 * (bool preempt, struct task_struct *prev, struct task_struct *next, ...),
 * all since 2.6.28, as in runqlat.bpf.c. The task's cgroup is
 * p->cgroups->dfl_cgrp->kn->id, the id bpf_get_current_cgroup_id() returns
 * for current (kernfs_node.id is a u64 since 5.5; task_struct.__state has
 * that name since 5.14). Start times live in task local storage (5.11+).
 *
 * Allow list: runqlat_cgroup_allow (HASH), key u64 cgroup id, value u8
 * (unused). The exporter fills it from this program's cgroup_id_map section
 * (regexps of cgroup paths) and keeps it current as cgroups come and go
 * (package cgroupmap). A task is timed only when its cgroup is in the map
 * at the moment it starts waiting; tasks of other cgroups are ignored (no
 * "other" series: the runqlat program gives the machine-wide histogram),
 * and cost one hash lookup per wakeup and one task storage miss per
 * switch-in.
 *
 * Map cgroup_run_queue_latency_seconds (PERCPU_HASH), key struct
 * runq_cg_key, 16 bytes:
 *   offset 0  u64 cgroup   cgroup v2 id (the cgroup decoder names it)
 *   offset 8  u32 bucket   exp2 slot of the latency, 0..36; 37 holds the sum
 *   offset 12 u32 pad      zero
 *   value u64 per CPU      count of switch-ins (slot 37: sum of latencies)
 * Bucket unit: nanoseconds (slot k: latency <= 2^k ns; 36 ≈ 69 s).
 *
 * Bounds: MAX_CGROUPS (256) allowed cgroups, and MAX_CGROUPS * 38 histogram
 * keys: every key of every allowed cgroup fits. A cgroup whose task waited
 * keeps its series after the cgroup is removed (its id is never reused).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "kernel_exporter/maps.bpf.h"

#define MAX_BUCKET	36
#define MAX_CGROUPS	256
#define TASK_RUNNING	0

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct runq_cg_key {
	__u64 cgroup;
	__u32 bucket;
	__u32 pad;
};
_Static_assert(sizeof(struct runq_cg_key) == 16, "runqlat_cgroup.yaml expects a 16-byte key");

/* When a task of an allowed cgroup started waiting, and its cgroup. */
struct runq_cg_start {
	__u64 ts;	/* bpf_ktime_get_ns(); 0: not waiting */
	__u64 cgroup;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_CGROUPS);
	__type(key, __u64);
	__type(value, __u8);
} runqlat_cgroup_allow SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct runq_cg_start);
} runq_cg_start SEC(".maps");

/*
 * One map shared by all CPUs (atomic adds), not a per-CPU hash: the kernel
 * preallocates a per-CPU hash's values for every entry on every possible
 * CPU, 9728 keys x 8 bytes x 1024 CPUs = 76 MiB on a large host.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_CGROUPS * (MAX_BUCKET + 2));
	__type(key, struct runq_cg_key);
	__type(value, __u64);
} cgroup_run_queue_latency_seconds SEC(".maps");

static __always_inline void enqueued(struct task_struct *p)
{
	struct runq_cg_start *st;
	__u64 cgroup;

	if (!p->pid) /* the idle tasks never wait */
		return;
	cgroup = p->cgroups->dfl_cgrp->kn->id;
	if (!bpf_map_lookup_elem(&runqlat_cgroup_allow, &cgroup))
		return;
	st = bpf_task_storage_get(&runq_cg_start, p, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (st) {
		st->ts = bpf_ktime_get_ns();
		st->cgroup = cgroup;
	}
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(sched_wakeup, struct task_struct *p)
{
	enqueued(p);
	return 0;
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(sched_wakeup_new, struct task_struct *p)
{
	enqueued(p);
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(sched_switch, bool preempt, struct task_struct *prev,
	     struct task_struct *next)
{
	struct runq_cg_key key = {};
	struct runq_cg_start *st;
	__u64 delta_ns;

	/* Switched out while still runnable: it waits in the queue again. */
	if (prev->__state == TASK_RUNNING)
		enqueued(prev);

	st = bpf_task_storage_get(&runq_cg_start, next, 0, 0);
	if (!st || !st->ts)
		return 0; /* not an allowed cgroup's, or woken before we attached */
	delta_ns = bpf_ktime_get_ns() - st->ts;
	st->ts = 0;
	key.cgroup = st->cgroup;
	ke_observe(ke_add, &cgroup_run_queue_latency_seconds, key,
		   ke_exp2_slot(delta_ns), delta_ns, MAX_BUCKET);
	return 0;
}

// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

// (The build constraint above keeps the Go tool from treating this BPF C file
// as cgo source of package programs; clang ignores it.)
/*
 * runqlat: run-queue latency, the time a task spends runnable, waiting for a
 * CPU, from wakeup (or preemption) until it is switched in.
 *
 * Why: keepalives pinned connections to a few busy NGINX workers; their
 * requests queued behind each other, which shows up as run-queue latency.
 *
 * Kernel source: BTF tracepoints (tp_btf, 5.5+) sched:sched_wakeup and
 * sched:sched_wakeup_new (struct task_struct *p), and sched:sched_switch
 * (bool preempt, struct task_struct *prev, struct task_struct *next, ...;
 * preempt since 4.4, a trailing prev_state since 5.18, unused here). All
 * three are tracepoints since 2.6.28. prev->__state has that name since 5.14.
 *
 * A task is timed from wakeup, or from the switch that took it off the CPU
 * while still runnable (preempted: prev->__state == TASK_RUNNING), until a
 * sched_switch picks it as next. Start times live in task local storage
 * (TASK_STORAGE, 5.11+): a field of the task itself, found without a hash
 * lookup, and freed with the task; 0 means not waiting.
 *
 * A new task's first wait (sched_wakeup_new to its first switch-in) is
 * kept apart, in runq_new_start: an ARRAY of NEW_SLOTS {pid, start} slots
 * indexed by the pid's low bits. Creating the task's storage there instead
 * cost an allocation per fork (753-856 ns per sched_wakeup_new, against
 * 542-557 for libbpf-tools' runqlat, which inserts into a preallocated
 * hash); most short-lived tasks never wait again, and a task that does gets
 * its storage at its first wakeup or preemption. A task switched in with
 * no storage is looked up there by pid; a slot is taken over by a new task
 * whose pid has the same low bits, which takes NEW_SLOTS (4096) forks
 * between a task's creation and its first run: its first wait is then not
 * recorded.
 *
 * Map run_queue_latency_seconds (PERCPU_ARRAY), key struct runq_key, 4 bytes:
 *   offset 0  u32 bucket   exp2 slot of the latency, 0..36; 37 holds the sum
 *   value u64 per CPU      count of switch-ins (slot 37: sum of latencies);
 *                          the exporter sums the per-CPU values
 * Bucket unit: nanoseconds (slot k: latency <= 2^k ns; 36 ≈ 69 s).
 *
 * Why PERCPU_ARRAY: sched_switch is one of the hottest paths in the kernel
 * and every CPU hits the same ~20 slots. A shared map would need an atomic
 * add per event and would bounce those cache lines between CPUs; a per-CPU
 * value is a plain add to CPU-local memory. An array lookup is inlined by
 * the verifier and needs no hashing (ke_add_array); unused slots read as 0.
 * Task fields are read directly (tp_btf arguments are BTF pointers), not
 * with bpf_probe_read_kernel. Measured on the 2-CPU development VM with
 * kernel.bpf_stats_enabled=1 (make bench-overhead, runqlat alone): with a
 * pid HASH, a PERCPU_HASH and probe reads, 260-279 ns per sched_switch and
 * 287-290 ns per wakeup; as written, 147-149 and 167-173 ns
 * (docs/performance.md).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "kernel_exporter/maps.bpf.h"

#define MAX_BUCKET	36
#define TASK_RUNNING	0

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct runq_key {
	__u32 bucket;
};
_Static_assert(sizeof(struct runq_key) == 4, "runqlat.yaml expects a 4-byte key");

/* When each runnable task started waiting (bpf_ktime_get_ns); 0: not waiting. */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u64);
} runq_start SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_BUCKET + 2);
	__type(key, struct runq_key);
	__type(value, __u64);
} run_queue_latency_seconds SEC(".maps");

/* A new task's first wait: the start time of pid, in slot pid % NEW_SLOTS. */
#define NEW_SLOTS	4096
struct runq_new {
	__u32 pid;
	__u32 pad;
	__u64 ts;	/* bpf_ktime_get_ns() at sched_wakeup_new; 0: taken */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NEW_SLOTS);
	__type(key, __u32);
	__type(value, struct runq_new);
} runq_new_start SEC(".maps");

/*
 * ke_add_array adds inc to the u64 at key of a PERCPU_ARRAY map, whose keys
 * always exist: one lookup, which the verifier inlines, and an add in place.
 */
static __always_inline void ke_add_array(void *map, const void *key, __u64 inc)
{
	__u64 *val = bpf_map_lookup_elem(map, key);

	if (val)
		*val += inc;
}

static __always_inline void enqueued(struct task_struct *p)
{
	__u64 *ts;

	if (!p->pid) /* the idle tasks never wait */
		return;
	ts = bpf_task_storage_get(&runq_start, p, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (ts)
		*ts = bpf_ktime_get_ns();
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
	__u32 slot = p->pid & (NEW_SLOTS - 1);
	struct runq_new *n = bpf_map_lookup_elem(&runq_new_start, &slot);

	if (n) {
		n->pid = p->pid;
		n->ts = bpf_ktime_get_ns();
	}
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(sched_switch, bool preempt, struct task_struct *prev,
	     struct task_struct *next)
{
	struct runq_key key = {};
	__u64 *start, delta_ns;

	/* Switched out while still runnable: it waits in the queue again. */
	if (prev->__state == TASK_RUNNING)
		enqueued(prev);

	if (!next->pid)
		return 0; /* the idle task */
	start = bpf_task_storage_get(&runq_start, next, 0, 0);
	if (start) {
		if (!*start)
			return 0; /* woken before we were attached */
		delta_ns = bpf_ktime_get_ns() - *start;
		*start = 0;
	} else {
		/* No storage yet: a new task's first run? */
		__u32 slot = next->pid & (NEW_SLOTS - 1);
		struct runq_new *n = bpf_map_lookup_elem(&runq_new_start, &slot);

		if (!n || n->pid != next->pid || !n->ts)
			return 0;
		delta_ns = bpf_ktime_get_ns() - n->ts;
		n->ts = 0;
	}

	ke_observe(ke_add_array, &run_queue_latency_seconds, key,
		   ke_exp2_slot(delta_ns), delta_ns, MAX_BUCKET);
	return 0;
}

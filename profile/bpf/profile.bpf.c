// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

// (The build constraint above keeps the Go tool from treating this BPF C file
// as cgo source; clang ignores it.)
/*
 * profile: the BPF side of package profile. Two programs share one set of
 * maps; a session loads only the one it needs (the Go side assigns only its
 * program and maps, and the loader creates nothing else).
 *
 * on_cpu (perf_event): attached to one perf event per online CPU, sampling
 *   at a frequency (software cpu-clock, or hardware cycles where the machine
 *   has a PMU). Each sample is counted by key: process, comm, cgroup, and
 *   its kernel and user stacks (bpf_get_stack: frame-pointer unwinding in
 *   user space, the kernel's own unwinder in the kernel). As bcc's profile
 *   does, samples are counted in the kernel, never sent one by one.
 *
 * off_cpu (tp_btf/sched_switch, 5.5+): as bcc's offcputime, a task that
 *   leaves a CPU has its time and stacks recorded (in start, by thread id);
 *   when it is switched in again, the time it spent off the CPU is added to
 *   its key if it is at least min_block_ns. The stacks are those of the
 *   switch-out: where the task blocked (or was preempted).
 *
 * Stacks are stored by a 64-bit hash of their frames, not by
 * bpf_get_stackid's id: a STACK_TRACE map is a table of buckets indexed by
 * the hash, and a second stack that lands in a taken bucket is lost
 * (-EEXIST), which at a few hundred distinct stacks per second lost 7% of
 * the stacks of a 1024-bucket map. Here two stacks only clash if their
 * 64-bit hashes are equal. The stacks map is an LRU hash: userspace reads
 * each new hash once (it caches what it resolved) and never deletes; the
 * least recently used stacks make room for new ones.
 *
 * Generations: userspace reads the counts while sampling goes on. Counts
 * live in two maps, _0 and _1; the programs write the map of generation
 * gen & 1. Userspace flips gen, waits for the programs that read the old
 * value to finish (they run with preemption off, for microseconds), then
 * reads and empties the old generation's map.
 *
 * Maps:
 *   counts_0, counts_1 (HASH) key struct sample_key, 48 bytes:
 *     offset  0 u32 pid      thread group id (process); 0: the idle tasks
 *             4 u32 flags    0 (reserved)
 *             8 u64 kstack   hash of the kernel stack in stacks, 0: none
 *                            (the sample was in user mode, or it was lost)
 *            16 u64 ustack   hash of the user stack, 0: none (a kernel
 *                            thread, or lost)
 *            24 u64 cgroup   cgroup v2 id (the cgroup directory's inode)
 *            32 char[16] comm
 *   value struct sample_value, 16 bytes: u64 value (on_cpu: samples;
 *     off_cpu: nanoseconds off the CPU), u64 count (samples; blocks)
 *   stacks (LRU_HASH) key u64 hash, value MAX_DEPTH u64 addresses,
 *     innermost first, zero after the last; sized by the Go side.
 *   scratch (PERCPU_ARRAY) one stack, where bpf_get_stack writes.
 *   start (HASH) key u32 thread id, value struct start_value: switch-out
 *     time (bpf_ktime_get_ns) and stacks of an off-CPU thread.
 *   pids (HASH) u32 pid -> u8, cgroups (HASH) u64 cgroup id -> u8: the
 *     processes and cgroups sampled when filter_pids/filter_cgroups is set.
 *   stats (PERCPU_ARRAY) u64 per CPU, indexed by enum profile_stat.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define MAX_DEPTH	127	/* kernel.perf_event_max_stack's default */
#define TASK_COMM_LEN	16
#define PF_KTHREAD	0x00200000
#define TASK_DEAD	0x00000080
#define EFAULT		14
#define EEXIST		17

struct sample_key {
	__u32 pid;
	__u32 flags;
	__u64 kstack;
	__u64 ustack;
	__u64 cgroup;
	char comm[TASK_COMM_LEN];
};
_Static_assert(sizeof(struct sample_key) == 48, "package profile reads a 48-byte key");

struct sample_value {
	__u64 value;
	__u64 count;
};

struct stack {
	__u64 ips[MAX_DEPTH];
};

struct start_value {
	__u64 ts;
	__u64 kstack;
	__u64 ustack;
	__u64 cgroup;
};

enum profile_stat {
	STAT_SAMPLES,		/* on_cpu samples, off_cpu blocks counted */
	STAT_IDLE,		/* on_cpu samples of the idle tasks */
	STAT_FILTERED,		/* left out by the pid or cgroup filter */
	STAT_KSTACK_LOST,	/* kernel stack not stored (stacks map full) */
	STAT_USTACK_LOST,	/* user stack not stored */
	STAT_COUNTS_FULL,	/* key not counted: counts map full */
	STAT_START_FULL,	/* off_cpu switch-out not recorded: start map full */
	STAT_SHORT,		/* off_cpu blocks under min_block_ns */
	STAT_MAX,
};

/* Set by the Go side before loading. */
const volatile bool skip_idle = true;
const volatile bool kernel_stacks = true;
const volatile bool user_stacks = true;
const volatile bool filter_pids = false;
const volatile bool filter_cgroups = false;
const volatile __u64 min_block_ns = 1000000;

/* Written by the Go side while the programs run (see Generations). */
volatile __u32 gen;

#define COUNTS_MAP(name)				\
	struct {					\
		__uint(type, BPF_MAP_TYPE_HASH);	\
		__uint(max_entries, 4096);		\
		__type(key, struct sample_key);		\
		__type(value, struct sample_value);	\
	} name SEC(".maps")

COUNTS_MAP(counts_0);
COUNTS_MAP(counts_1);

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, struct stack);
} stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct stack);
} scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 32768);
	__type(key, __u32);
	__type(value, struct start_value);
} start SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u8);
} pids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64);
	__type(value, __u8);
} cgroups SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

/*
 * count_stat counts one event of kind i on this CPU. A plain add: the value
 * is this CPU's, and a session runs one program, which the kernel never
 * runs nested in itself on one CPU.
 */
static __always_inline void count_stat(__u32 i)
{
	__u64 *n = bpf_map_lookup_elem(&stats, &i);

	if (n)
		*n += 1;
}

/* wanted reports whether a task passes the pid and cgroup filters. */
static __always_inline bool wanted(__u32 pid, __u64 cgroup)
{
	if (filter_pids && !bpf_map_lookup_elem(&pids, &pid))
		return false;
	if (filter_cgroups && !bpf_map_lookup_elem(&cgroups, &cgroup))
		return false;
	return true;
}

/* add adds value to key's entry of counts (created if needed). */
static __always_inline void add(void *counts, struct sample_key *key, __u64 value)
{
	struct sample_value zero = {}, *v;
	long err;

	v = bpf_map_lookup_elem(counts, key);
	if (!v) {
		err = bpf_map_update_elem(counts, key, &zero, BPF_NOEXIST);
		if (err && err != -EEXIST) {
			count_stat(STAT_COUNTS_FULL);
			return;
		}
		v = bpf_map_lookup_elem(counts, key);
		if (!v)
			return;
	}
	__sync_fetch_and_add(&v->value, value);
	__sync_fetch_and_add(&v->count, 1);
	count_stat(STAT_SAMPLES);
}

/*
 * store_stack walks the current stack (the user stack when flags has
 * BPF_F_USER_STACK), stores it in stacks and returns its hash (FNV-1a over
 * the addresses), or 0 when there is none (-EFAULT: a user-mode sample has
 * no kernel stack, a kernel thread no user stack) or it could not be
 * stored (counted in lost).
 */
static __always_inline __u64 store_stack(void *ctx, __u64 flags, __u32 lost)
{
	__u32 zero = 0;
	struct stack *st = bpf_map_lookup_elem(&scratch, &zero);
	__u64 h = 0xcbf29ce484222325ULL;
	long n, err;

	if (!st)
		return 0;
	n = bpf_get_stack(ctx, st->ips, sizeof(st->ips), flags);
	if (n <= 0) {
		if (n < 0 && n != -EFAULT)
			count_stat(lost);
		return 0;
	}
	n /= sizeof(__u64);
	for (int i = 0; i < MAX_DEPTH; i++) {
		if (i >= n)
			break;
		h ^= st->ips[i];
		h *= 0x100000001b3ULL;
	}
	if (h == 0)
		h = 1;
	/* A lookup first: an LRU insert takes a free element even when the
	 * key exists, and most stacks are seen before. */
	if (bpf_map_lookup_elem(&stacks, &h))
		return h;
	err = bpf_map_update_elem(&stacks, &h, st, BPF_NOEXIST);
	if (err && err != -EEXIST) {
		count_stat(lost);
		return 0;
	}
	return h;
}

static __always_inline int sample(struct bpf_perf_event_data *ctx, void *counts)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct sample_key key = {};

	key.pid = id >> 32;
	if ((__u32)id == 0) {
		count_stat(STAT_IDLE);
		if (skip_idle)
			return 0;
	}
	key.cgroup = bpf_get_current_cgroup_id();
	if (!wanted(key.pid, key.cgroup)) {
		count_stat(STAT_FILTERED);
		return 0;
	}
	bpf_get_current_comm(key.comm, sizeof(key.comm));
	if (kernel_stacks)
		key.kstack = store_stack(ctx, 0, STAT_KSTACK_LOST);
	if (user_stacks)
		key.ustack = store_stack(ctx, BPF_F_USER_STACK, STAT_USTACK_LOST);
	add(counts, &key, 1);
	return 0;
}

SEC("perf_event")
int on_cpu(struct bpf_perf_event_data *ctx)
{
	if (gen & 1)
		return sample(ctx, &counts_1);
	return sample(ctx, &counts_0);
}

/* Before 5.14, task_struct's state was "long state". */
struct task_struct___pre514 {
	long state;
} __attribute__((preserve_access_index));

static __always_inline unsigned int task_state(struct task_struct *t)
{
	if (bpf_core_field_exists(t->__state))
		return BPF_CORE_READ(t, __state);
	return BPF_CORE_READ((struct task_struct___pre514 *)t, state);
}

/*
 * switch_out records when prev (the current task) leaves the CPU, and its
 * stacks. The idle tasks and exiting tasks (which never come back) are
 * left out.
 */
static __always_inline void switch_out(void *ctx, struct task_struct *prev)
{
	struct start_value s = {};
	__u32 tid = prev->pid;

	if (tid == 0 || (task_state(prev) & TASK_DEAD))
		return;
	s.cgroup = bpf_get_current_cgroup_id();
	if (!wanted(prev->tgid, s.cgroup)) {
		count_stat(STAT_FILTERED);
		return;
	}
	if (kernel_stacks)
		s.kstack = store_stack(ctx, 0, STAT_KSTACK_LOST);
	if (user_stacks && !(prev->flags & PF_KTHREAD))
		s.ustack = store_stack(ctx, BPF_F_USER_STACK, STAT_USTACK_LOST);
	s.ts = bpf_ktime_get_ns();
	if (bpf_map_update_elem(&start, &tid, &s, BPF_ANY))
		count_stat(STAT_START_FULL);
}

/* switch_in counts the time next spent off the CPU. */
static __always_inline void switch_in(struct task_struct *next, void *counts)
{
	struct sample_key key = {};
	struct start_value *s;
	__u32 tid = next->pid;
	__u64 delta;

	s = bpf_map_lookup_elem(&start, &tid);
	if (!s)
		return;
	delta = bpf_ktime_get_ns() - s->ts;
	if ((__s64)delta < 0 || delta < min_block_ns) {
		if ((__s64)delta >= 0)
			count_stat(STAT_SHORT);
		bpf_map_delete_elem(&start, &tid);
		return;
	}
	key.pid = next->tgid;
	key.kstack = s->kstack;
	key.ustack = s->ustack;
	key.cgroup = s->cgroup;
	__builtin_memcpy(key.comm, next->comm, sizeof(key.comm));
	bpf_map_delete_elem(&start, &tid);
	add(counts, &key, delta);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(off_cpu, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	switch_out(ctx, prev);
	if (gen & 1)
		switch_in(next, &counts_1);
	else
		switch_in(next, &counts_0);
	return 0;
}

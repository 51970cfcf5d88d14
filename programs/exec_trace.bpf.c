// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

// (The build constraint above keeps the Go tool from treating this BPF C file
// as cgo source of package programs; clang ignores it.)

/*
 * exec_trace: one OpenTelemetry span per process, from its fork to its
 * exit, sent over OTLP by the exporter (tracing: section, package spans).
 * A process's span is a child of its parent's span, so a process tree
 * started after the program loaded is one trace: a shell script's trace
 * shows every command it ran, how long each took, and what it exited with.
 *
 * Why: "the deploy script took 40 s" becomes which command took the 40 s,
 * without changing the script; with the exit codes, which one failed.
 *
 * Kernel source: BTF tracepoints (tp_btf, 5.5+) sched:sched_process_fork
 * (kernel/fork.c, since about 3.4; args parent, child) and
 * sched:sched_process_exit (kernel/exit.c do_exit, since about 2.6.32,
 * fired per exiting thread, the current task, after exit_code is set; its
 * first argument is the task on every kernel, the group_dead argument 6.16
 * added is not read). Ring buffers need 5.8: the program loads on Debian
 * 11's 5.10 as on 6.x (no bpf_get_current_task_btf, a 5.11 helper).
 *
 * At fork of a new process (child pid == tgid; threads are not processes)
 * the child gets random span id and start time bpf_ktime_get_ns(); if its
 * parent has an entry, the child takes the parent's trace id and the
 * parent's span id as parent; otherwise it starts a new trace (random
 * trace id, no parent). Processes that were running when the program
 * loaded have no entry and no span; their children are roots. At exit of
 * a process's leader thread its span is submitted to the ring buffer
 * exec_trace_spans and the entry deleted.
 *
 * Map exec_trace_procs (HASH, at most MAX_PROCS entries): key u32 tgid,
 * value struct proc (40 bytes). When it is full, a new process gets no
 * entry (no span; its children start new traces).
 *
 * Ring buffer exec_trace_spans (256 KiB): struct span_record, 80 bytes:
 * trace_id[16], parent_span_id u64, span_id u64,
 * span_monotonic_timestamp_ns u64 (fork time), span_duration_ns u64
 * (fork to exit), span_name char[16] (comm at exit), pid, ppid (at fork),
 * exit_code ((task->exit_code >> 8) & 0xff) and signal
 * (task->exit_code & 0x7f), u32 each. A full ring buffer drops the span.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#define MAX_PROCS	65536
#define COMM_LEN	16

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct proc {
	__u8 trace_id[16];
	__u64 parent_span_id;
	__u64 span_id;
	__u64 start_ns;
	__u32 ppid;
	__u32 pad;
};

struct span_record {
	__u8 trace_id[16];
	__u64 parent_span_id;
	__u64 span_id;
	__u64 span_monotonic_timestamp_ns;
	__u64 span_duration_ns;
	char span_name[COMM_LEN];
	__u32 pid;
	__u32 ppid;
	__u32 exit_code;
	__u32 signal;
};
_Static_assert(sizeof(struct span_record) == 80, "exec_trace.yaml expects 80-byte records");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_PROCS);
	__type(key, __u32);
	__type(value, struct proc);
} exec_trace_procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} exec_trace_spans SEC(".maps");

static __always_inline __u64 rand64(void)
{
	return ((__u64)bpf_get_prandom_u32() << 32) | bpf_get_prandom_u32();
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(exec_trace_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 pid = BPF_CORE_READ(child, pid), tgid = BPF_CORE_READ(child, tgid);
	__u32 ptgid = BPF_CORE_READ(parent, tgid);
	struct proc p = {}, *pp;

	if (pid != tgid)
		return 0; /* a thread */
	pp = bpf_map_lookup_elem(&exec_trace_procs, &ptgid);
	if (pp) {
		__builtin_memcpy(p.trace_id, pp->trace_id, sizeof(p.trace_id));
		p.parent_span_id = pp->span_id;
	} else {
		__u64 hi = rand64(), lo = rand64();
		__builtin_memcpy(p.trace_id, &hi, 8);
		__builtin_memcpy(p.trace_id + 8, &lo, 8);
	}
	p.span_id = rand64();
	if (!p.span_id)
		p.span_id = 1;
	p.start_ns = bpf_ktime_get_ns();
	p.ppid = ptgid;
	bpf_map_update_elem(&exec_trace_procs, &tgid, &p, BPF_ANY);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(exec_trace_exit, struct task_struct *task)
{
	__u32 pid = task->pid, tgid = task->tgid;
	struct span_record *s;
	struct proc *p;
	int code;

	if (pid != tgid)
		return 0; /* a thread other than the leader */
	p = bpf_map_lookup_elem(&exec_trace_procs, &tgid);
	if (!p)
		return 0;
	s = bpf_ringbuf_reserve(&exec_trace_spans, sizeof(*s), 0);
	if (s) {
		__builtin_memcpy(s->trace_id, p->trace_id, sizeof(s->trace_id));
		s->parent_span_id = p->parent_span_id;
		s->span_id = p->span_id;
		s->span_monotonic_timestamp_ns = p->start_ns;
		s->span_duration_ns = bpf_ktime_get_ns() - p->start_ns;
		bpf_get_current_comm(s->span_name, sizeof(s->span_name));
		s->pid = tgid;
		s->ppid = p->ppid;
		code = task->exit_code;
		s->exit_code = (code >> 8) & 0xff;
		s->signal = code & 0x7f;
		bpf_ringbuf_submit(s, 0);
	}
	bpf_map_delete_elem(&exec_trace_procs, &tgid);
	return 0;
}

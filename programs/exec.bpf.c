// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

// (The build constraint above keeps the Go tool from treating this BPF C file
// as cgo source of package programs; clang ignores it.)

/*
 * exec: successful execve/execveat calls, by the command name of the new
 * program.
 *
 * Why: fork/exec storms (a health check that shells out, a cron job gone
 * wild, a crash-looping sidecar) burn CPU that no single long-lived process
 * accounts for; the rate by command name shows who is doing it.
 *
 * Kernel source: BTF tracepoint (tp_btf, 5.5+) sched:sched_process_exec
 * (include/trace/events/sched.h, since about 3.4), fired after a new
 * program has been loaded, in the context of the task that exec'd. The
 * command name is bpf_get_current_comm(), which is already the new
 * program's (the basename of the file, truncated to 15 bytes).
 *
 * Map process_execs_total (HASH), key char comm[16] (16 bytes, NUL padded),
 * value u64: execs.
 *
 * Label bounds: command names are chosen by whoever runs programs, so they
 * are bounded here, in BPF: the map holds at most MAX_COMMS (512) keys. The
 * key of 16 NUL bytes is reserved for "other" and is created before any
 * other key, so once the map is full every exec of a new name is counted
 * under "other". The sum over all series is the exact total of execs. The
 * first 511 distinct names seen since the program was loaded get their own
 * series.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "kernel_exporter/maps.bpf.h"

#define MAX_COMMS	512
#define COMM_LEN	16

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct comm_key {
	char comm[COMM_LEN];
};
_Static_assert(sizeof(struct comm_key) == 16, "exec.yaml expects a 16-byte key");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_COMMS);
	__type(key, struct comm_key);
	__type(value, __u64);
} process_execs_total SEC(".maps");

SEC("tp_btf/sched_process_exec")
int BPF_PROG(sched_process_exec)
{
	struct comm_key other = {}, key = {};
	__u64 zero = 0, *val;

	/* Reserve the "other" key first, so that it exists once the map is full. */
	if (!bpf_map_lookup_elem(&process_execs_total, &other))
		ke_update(&process_execs_total, &other, &zero, BPF_NOEXIST);

	bpf_get_current_comm(key.comm, sizeof(key.comm));
	val = bpf_map_lookup_elem(&process_execs_total, &key);
	if (!val) {
		/* Fails with -E2BIG when full, -EEXIST if another CPU won. */
		ke_update(&process_execs_total, &key, &zero, BPF_NOEXIST);
		val = bpf_map_lookup_elem(&process_execs_total, &key);
		if (!val)
			val = bpf_map_lookup_elem(&process_execs_total, &other);
		if (!val)
			return 0;
	}
	__sync_fetch_and_add(val, 1);
	return 0;
}

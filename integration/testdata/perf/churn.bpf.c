// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

/*
 * Test program for the soak test (perf_soak_test.go): counts execs by the
 * cgroup and the pid of the new program. Both labels churn: every process
 * the test spawns is a new pid, in a new cgroup, so the map keeps gaining
 * keys; it is an LRU map, so the kernel evicts the oldest. The exporter's
 * decode cache must follow the map instead of growing.
 *
 * Map soak_execs_total (LRU_HASH), key struct churn_key, 16 bytes:
 *   offset 0   u64 cgroup  bpf_get_current_cgroup_id() at exec
 *   offset 8   u32 pid     tgid of the new program
 *   offset 12  u32 pad     always zero
 *   value u64              execs
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "kernel_exporter/maps.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct churn_key {
	__u64 cgroup;
	__u32 pid;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 2048);
	__type(key, struct churn_key);
	__type(value, __u64);
} soak_execs_total SEC(".maps");

SEC("tp_btf/sched_process_exec")
int BPF_PROG(soak_exec, struct task_struct *p)
{
	struct churn_key key = {};

	key.cgroup = bpf_get_current_cgroup_id();
	key.pid = p->tgid;
	ke_add(&soak_execs_total, &key, 1);
	return 0;
}

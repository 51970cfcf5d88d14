// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

/*
 * Test program for cgroup_id_map with type cgrp_storage
 * (programs_cgrp_storage_test.go): getppid() calls per cgroup, counted in
 * one map when the exporter marked the caller's cgroup (value 1 in the
 * cgrp_storage map), in another when not. Laid out as
 * cloudflare/ebpf_exporter's cgroup_id_map_cgrp_storage example, which
 * counts sched_migrate_task events the same way. Precompiled (make bpf):
 * the kernel matrix guests have no compiler.
 *
 * Kernel source: raw tracepoint sys_enter with BTF (tp_btf/sys_enter,
 * arguments struct pt_regs *regs, long id; since 5.5), the caller's
 * task->cgroups->dfl_cgrp, and BPF_MAP_TYPE_CGRP_STORAGE with the helper
 * bpf_cgrp_storage_get (Linux 6.2).
 *
 * cgrp_storage_getppid_total, cgrp_storage_getppid_not_match_total
 *   (HASH, up to 1024 cgroups): key u64 cgroup id (kernfs node id), value
 *   u64 calls.
 * cgrp_storage_match (CGRP_STORAGE): key the cgroup (an fd of its
 *   directory from userspace), value u64, 1 for the cgroups the exporter
 *   marked; created as 0 here for the others.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#if defined(__TARGET_ARCH_x86)
#define NR_getppid 110
#elif defined(__TARGET_ARCH_arm64)
#define NR_getppid 173
#else
#error "cgroup_id_map_cgrp_storage.bpf.c: unsupported __TARGET_ARCH"
#endif

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64);
	__type(value, __u64);
} cgrp_storage_getppid_total SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64);
	__type(value, __u64);
} cgrp_storage_getppid_not_match_total SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_CGRP_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u64);
} cgrp_storage_match SEC(".maps");

static void count(void *map, __u64 *id)
{
	__u64 one = 1, *v = bpf_map_lookup_elem(map, id);

	if (v) {
		__sync_fetch_and_add(v, 1);
		return;
	}
	bpf_map_update_elem(map, id, &one, BPF_NOEXIST);
}

SEC("tp_btf/sys_enter")
int BPF_PROG(cgrp_storage_sys_enter, struct pt_regs *regs, long id)
{
	struct task_struct *task;
	struct cgroup *cgrp;
	__u64 *match, cgroup_id;

	if (id != NR_getppid)
		return 0;
	task = bpf_get_current_task_btf();
	cgrp = task->cgroups->dfl_cgrp;
	match = bpf_cgrp_storage_get(&cgrp_storage_match, cgrp, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!match)
		return 0;
	cgroup_id = BPF_CORE_READ(cgrp, kn, id);
	if (*match)
		count(&cgrp_storage_getppid_total, &cgroup_id);
	else
		count(&cgrp_storage_getppid_not_match_total, &cgroup_id);
	return 0;
}

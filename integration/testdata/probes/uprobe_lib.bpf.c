// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

/*
 * Test program for uprobes on a bare library name: libc's getppid, found
 * through /etc/ld.so.cache, by a section (as ebpf_exporter configs write
 * it) and by a config uprobes entry.
 *
 * Map libc_getppid_calls_total (HASH): key u32 how (0: the section
 *   uprobe/libc.so.6:getppid, counting only tasks named ke_target; 1: the
 *   bare SEC("uprobe") program, which the config limits to one pid),
 *   value u64.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "kernel_exporter/maps.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} libc_getppid_calls_total SEC(".maps");

static const char target_comm[16] = "ke_target";

SEC("uprobe/libc.so.6:getppid")
int on_getppid_section(struct pt_regs *ctx)
{
	char comm[16] = {};
	__u32 how = 0;

	bpf_get_current_comm(comm, sizeof(comm));
	for (int i = 0; i < sizeof(comm); i++) {
		if (comm[i] != target_comm[i])
			return 0;
		if (!comm[i])
			break;
	}
	ke_add(&libc_getppid_calls_total, &how, 1);
	return 0;
}

SEC("uprobe")
int on_getppid_config(struct pt_regs *ctx)
{
	__u32 how = 1;

	ke_add(&libc_getppid_calls_total, &how, 1);
	return 0;
}

// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

/*
 * Test program for the --compat.ebpf-exporter test
 * (core_compat_switch_test.go): the syscalls entered by threads named
 * "ke_compat", by syscall number, per CPU, in a map laid out as
 * cloudflare/ebpf_exporter's per-CPU examples are (its config lists a
 * "cpu" label past the key).
 *
 * Kernel source: tracepoint raw_syscalls:sys_enter (since 3.7), field
 * "id", the syscall number of the caller's ABI.
 *
 * compat_syscalls_total (PERCPU_HASH, up to 1024 numbers): key u32 id,
 *   value u64 calls, one per CPU.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u64);
} compat_syscalls_total SEC(".maps");

static const char want_comm[] = "ke_compat";

SEC("tracepoint/raw_syscalls/sys_enter")
int compat_sys_enter(struct trace_event_raw_sys_enter *ctx)
{
	char comm[16] = {};
	__u32 id = (__u32)ctx->id;
	__u64 one = 1, *v;

	bpf_get_current_comm(comm, sizeof(comm));
	for (int i = 0; i < (int)sizeof(want_comm); i++) {
		if (comm[i] != want_comm[i])
			return 0;
	}
	v = bpf_map_lookup_elem(&compat_syscalls_total, &id);
	if (v) {
		__sync_fetch_and_add(v, 1);
		return 0;
	}
	bpf_map_update_elem(&compat_syscalls_total, &id, &one, BPF_NOEXIST);
	return 0;
}

// SPDX-License-Identifier: GPL-2.0
//go:build ignore

/*
 * Test program for the CPU budget test (budget_cpu_test.go): at every
 * syscall entry of a thread named "kx-budget-spin" (the test's child sets
 * that name on the thread that makes the syscalls), it spins for SPIN_NS
 * nanoseconds of bpf_ktime_get_ns(), in a loop bounded to MAX_SPINS
 * iterations for the verifier. Other threads cost a comm read and a
 * compare.
 *
 * Map budget_spins_total (ARRAY, 1 entry), key u32 0, value u64: syscalls
 * spun on.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#ifndef SPIN_NS
#define SPIN_NS 5000
#endif
#define MAX_SPINS 100000

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} budget_spins_total SEC(".maps");

static const char target[] = "kx-budget-spin";

SEC("tp_btf/sys_enter")
int BPF_PROG(budget_spin, struct pt_regs *regs, long id)
{
	char comm[16];
	__u32 zero = 0;
	__u64 *v, t0;
	int i;

	bpf_get_current_comm(comm, sizeof(comm));
	for (i = 0; i < sizeof(target); i++) {
		if (comm[i] != target[i])
			return 0;
	}
	t0 = bpf_ktime_get_ns();
	for (i = 0; i < MAX_SPINS; i++) {
		if (bpf_ktime_get_ns() - t0 >= SPIN_NS)
			break;
	}
	v = bpf_map_lookup_elem(&budget_spins_total, &zero);
	if (v)
		__sync_fetch_and_add(v, 1);
	return 0;
}

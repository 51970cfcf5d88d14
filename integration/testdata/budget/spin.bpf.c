// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

/*
 * Test program for the CPU budget test (budget_cpu_test.go): at every
 * syscall entry of a thread named "kx-budget-spin" (the test's child sets
 * that name on the thread that makes the syscalls), it spins for SPIN_NS
 * nanoseconds of bpf_ktime_get_ns(), in bpf_loop (5.17+) bounded to
 * MAX_SPINS iterations. Other threads cost a comm read and a
 * compare.
 *
 * Map budget_spins_total (ARRAY, 1 entry), key u32 0, value u64: syscalls
 * spun on.
 *
 * A second program, a tracepoint one (so that re-attaching it after the
 * capability drop goes through the privileged helper), counts getpid()
 * calls of threads whose name starts with "kx-budget-" (the spinner's and
 * the test's ticker, which does not spin) in budget_getpids_total.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#ifndef SPIN_NS
#define SPIN_NS 5000
#endif
#define MAX_SPINS 1000000

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} budget_spins_total SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} budget_getpids_total SEC(".maps");

static const char target[] = "kx-budget-spin";
static const char prefix[] = "kx-budget-";

/* spin_until is bpf_loop's callback: it ends the loop at *end. */
static long spin_until(__u64 index, void *end)
{
	return bpf_ktime_get_ns() >= *(__u64 *)end;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(budget_spin, struct pt_regs *regs, long id)
{
	char comm[16];
	__u32 zero = 0;
	__u64 *v, end;
	int i;

	bpf_get_current_comm(comm, sizeof(comm));
	for (i = 0; i < sizeof(target); i++) {
		if (comm[i] != target[i])
			return 0;
	}
	end = bpf_ktime_get_ns() + SPIN_NS;
	bpf_loop(MAX_SPINS, spin_until, &end, 0);
	v = bpf_map_lookup_elem(&budget_spins_total, &zero);
	if (v)
		__sync_fetch_and_add(v, 1);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_getpid")
int budget_getpid(void *ctx)
{
	char comm[16];
	__u32 zero = 0;
	__u64 *v;
	int i;

	bpf_get_current_comm(comm, sizeof(comm));
	for (i = 0; i < sizeof(prefix) - 1; i++) {
		if (comm[i] != prefix[i])
			return 0;
	}
	v = bpf_map_lookup_elem(&budget_getpids_total, &zero);
	if (v)
		__sync_fetch_and_add(v, 1);
	return 0;
}

// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

/*
 * bpfstats_spin: a "foreign" program for the host BPF collector's tests
 * (integration/bpfstats_test.go), loaded by a separate process
 * (integration/testdata/bpfspin), not by the exporter.
 *
 * At every ioprio_get(2) of process target_tgid it spins for spin_ns
 * (bpf_loop, 5.17+, over bpf_ktime_get_ns), so that its run time per run
 * is known. ioprio_get is a syscall almost nothing calls; calls counts
 * every run (any process), spun the runs that spun, so that a test can
 * tell its own from others'. It looks up ke_spin_big, a hash map of known
 * size, so that the map is one of the program's.
 */

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

const volatile __u32 target_tgid = 0;
const volatile __u64 spin_ns = 20000;

__u64 calls = 0;
__u64 spun = 0;

struct big {
	char b[64];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, struct big);
} ke_spin_big SEC(".maps");

static long spin_cb(__u64 i, void *ctx)
{
	__u64 *end = ctx;

	return bpf_ktime_get_ns() >= *end;
}

SEC("tracepoint/syscalls/sys_enter_ioprio_get")
int bpfstats_spin(void *ctx)
{
	__u64 key = 0, end;

	__sync_fetch_and_add(&calls, 1);
	if ((bpf_get_current_pid_tgid() >> 32) != target_tgid)
		return 0;
	end = bpf_ktime_get_ns() + spin_ns;
	bpf_loop(1 << 23, spin_cb, &end, 0);
	bpf_map_lookup_elem(&ke_spin_big, &key);
	__sync_fetch_and_add(&spun, 1);
	return 0;
}

// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

/*
 * Test program for the series lifetime test (series_ttl_test.go): counts
 * getppid(2) calls per process. Every short-lived process the test starts
 * is a new key; the test's own process is a key that keeps moving.
 * getppid is made by nothing but the test's own calls (the Go runtime never
 * calls it), so counts are exact.
 *
 * Map ttl_calls_total (HASH), key u32 tgid (4 bytes), value u64: getppid
 * calls.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "kernel_exporter/maps.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define NR_GETPPID 110 /* x86_64 */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u64);
} ttl_calls_total SEC(".maps");

SEC("tracepoint/raw_syscalls/sys_enter")
int ttl_sys_enter(struct trace_event_raw_sys_enter *ctx)
{
	__u32 tgid;

	if (ctx->id != NR_GETPPID)
		return 0;
	tgid = bpf_get_current_pid_tgid() >> 32;
	ke_add(&ttl_calls_total, &tgid, 1);
	return 0;
}

// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

/*
 * Test program for perf_event_array counters (perfarray_test.go): one
 * record per getpgid(2) call of a thread named "ke_perfarray", written to
 * a perf event array with bpf_perf_event_output, as cloudflare/
 * ebpf_exporter's oomkill example writes its records.
 *
 * Kernel source: tracepoint syscalls:sys_enter_getpgid (syscall
 * tracepoints since 2.6.33, CONFIG_FTRACE_SYSCALLS), args[0] the pid asked
 * about.
 *
 * getpgid_calls_total (PERF_EVENT_ARRAY): records of 24 bytes: u32 pid
 *   argument, 4 bytes of padding, char comm[16].
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
} getpgid_calls_total SEC(".maps");

struct record {
	__u32 pid;
	__u32 pad;
	char comm[16];
};

static const char want_comm[] = "ke_perfarray";

SEC("tracepoint/syscalls/sys_enter_getpgid")
int perf_getpgid(struct trace_event_raw_sys_enter *ctx)
{
	struct record r = {};

	bpf_get_current_comm(r.comm, sizeof(r.comm));
	for (int i = 0; i < (int)sizeof(want_comm); i++) {
		if (r.comm[i] != want_comm[i])
			return 0;
	}
	r.pid = (__u32)ctx->args[0];
	bpf_perf_event_output(ctx, &getpgid_calls_total, BPF_F_CURRENT_CPU, &r, sizeof(r));
	return 0;
}

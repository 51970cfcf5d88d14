// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

// (The build constraint above keeps the Go tool from treating this BPF C file
// as cgo source of package programs; clang ignores it.)
/*
 * funccount: calls of one kernel function, chosen in the config
 * (attach_to) or with --attach.to=funccount=<function>; tcp_push_one by
 * default.
 *
 * Why: when TCP offload was switched off by a distro upgrade, tcp_push_one
 * went from about 500 to 65,000 calls per second. A call counter on the
 * right function shows such a change the moment it starts.
 *
 * Hooks, chosen by the loader (alternatives): fentry (5.15+), else kprobe
 * (CONFIG_KPROBES, 5.15+). Both need bpf_get_func_ip.
 *
 * Map function_calls_total (PERCPU_HASH, up to 64 functions):
 *   key   u64 function   kernel address of the function (ksym decoder)
 *   value u64            calls, per CPU (summed by the exporter)
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "kernel_exporter/maps.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 64);
	__type(key, __u64);
	__type(value, __u64);
} function_calls_total SEC(".maps");

SEC("fentry/tcp_push_one")
int BPF_PROG(funccount_fentry)
{
	__u64 ip = bpf_get_func_ip(ctx);

	ke_add_percpu(&function_calls_total, &ip, 1);
	return 0;
}

SEC("kprobe/tcp_push_one")
int funccount_kprobe(struct pt_regs *ctx)
{
	__u64 ip = bpf_get_func_ip(ctx);

	ke_add_percpu(&function_calls_total, &ip, 1);
	return 0;
}

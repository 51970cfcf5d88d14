// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

// (The build constraint above keeps the Go tool from treating this BPF C file
// as cgo source of package programs; clang ignores it.)
/*
 * funclatency: latency histogram of one kernel function, chosen in the
 * config (attach_to) or with --attach.to=funclatency=<function>.
 *
 * Why: a distro upgrade that switched off TCP offload moved do_sendfile
 * from 8-31 us to 128-511 us, with a tail to 16 ms; only a latency
 * histogram of that one function showed it.
 *
 * Two ways to hook the function, chosen by the loader (alternatives):
 *   fentry + fexit     BPF trampolines, 5.15+ (bpf_get_func_ip)
 *   kprobe + kretprobe CONFIG_KPROBES, 5.15+ (bpf_get_func_ip)
 * Entry stores (time, function address) by thread; return looks it up and
 * records the elapsed time. A recursive call overwrites the outer call's
 * start, so recursive functions are measured from the innermost call.
 *
 * Map function_latency_seconds (HASH, up to 64 functions x 38 slots):
 *   key   u64 function   kernel address of the function (ksym decoder)
 *         u32 bucket     exp2 slot of the latency in nanoseconds, 0..36;
 *                        slot 37 holds the sum in nanoseconds
 *   value u64            calls
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "kernel_exporter/maps.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define MAX_SLOT 36

struct start {
	__u64 ts;
	__u64 ip;
};

struct lat_key {
	__u64 function;
	__u32 bucket;
} __attribute__((packed));

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 10240);
	__type(key, __u64);
	__type(value, struct start);
} starts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64 * (MAX_SLOT + 2));
	__type(key, struct lat_key);
	__type(value, __u64);
} function_latency_seconds SEC(".maps");

static __always_inline void enter(__u64 ip)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct start s = { .ts = bpf_ktime_get_ns(), .ip = ip };

	ke_update(&starts, &id, &s, BPF_ANY);
}

static __always_inline void leave(void)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct start *s = bpf_map_lookup_elem(&starts, &id);
	struct lat_key key = {};
	__u64 ns;

	if (!s)
		return;
	ns = bpf_ktime_get_ns() - s->ts;
	key.function = s->ip;
	bpf_map_delete_elem(&starts, &id);
	ke_observe(ke_add, &function_latency_seconds, key, ke_exp2_slot(ns), ns, MAX_SLOT);
}

SEC("fentry/do_sendfile")
int BPF_PROG(funclatency_fentry)
{
	enter(bpf_get_func_ip(ctx));
	return 0;
}

SEC("fexit/do_sendfile")
int BPF_PROG(funclatency_fexit)
{
	leave();
	return 0;
}

SEC("kprobe/do_sendfile")
int funclatency_kprobe(struct pt_regs *ctx)
{
	enter(bpf_get_func_ip(ctx));
	return 0;
}

SEC("kretprobe/do_sendfile")
int funclatency_kretprobe(struct pt_regs *ctx)
{
	leave();
	return 0;
}

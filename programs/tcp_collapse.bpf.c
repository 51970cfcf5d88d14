// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

// (The build constraint above keeps the Go tool from treating this BPF C file
// as cgo source of package programs; clang ignores it.)
/*
 * tcp_collapse: latency of tcp_collapse and tcp_prune_queue, the receive
 * queue "garbage collection" TCP runs when a socket's receive buffers are
 * full of small skbs.
 *
 * Why: with net.ipv4.tcp_rmem allowing 32 MiB per socket, sockets full of
 * small packets made the kernel collapse their queues for up to 21 ms,
 * stalling packet processing for the whole CPU: requests took 1 s or 30 s
 * while pings to the box took 1.8 s. tcp_collapse ran about 1,500 times in
 * 300 s, 3 ms on average.
 *
 * Kernel functions (static in net/ipv4/tcp_input.c):
 *   tcp_collapse(sk, list, root, head, tail, start, end)  merges runs of
 *       skbs of the receive or out-of-order queue into fewer, fuller ones
 *   tcp_prune_queue(sk, in_skb)    called when a socket is over its receive
 *       buffer: collapses, then drops the out-of-order queue if needed.
 *       Compilers often inline it (Debian 6.1 does): the "prune" group is
 *       optional and shows on the landing page as "none works" there.
 * Hooks, chosen by the loader (alternatives): fentry/fexit, else
 * kprobe/kretprobe. Call counts are the histogram's _count.
 *
 * Map tcp_collapse_latency_seconds (HASH):
 *   key   u32 function   0 tcp_collapse, 1 tcp_prune_queue
 *         u32 bucket     exp2 slot of the latency in nanoseconds, 0..36;
 *                        37 holds the sum in nanoseconds
 *   value u64            calls
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "kernel_exporter/maps.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define MAX_SLOT 36
#define FN_COLLAPSE 0
#define FN_PRUNE 1

struct start_key {
	__u32 tid;
	__u32 function;
};

struct lat_key {
	__u32 function;
	__u32 bucket;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct start_key);
	__type(value, __u64);
} starts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 2 * (MAX_SLOT + 2));
	__type(key, struct lat_key);
	__type(value, __u64);
} tcp_collapse_latency_seconds SEC(".maps");

static __always_inline void enter(__u32 fn)
{
	struct start_key k = { .tid = (__u32)bpf_get_current_pid_tgid(), .function = fn };
	__u64 now = bpf_ktime_get_ns();

	ke_update(&starts, &k, &now, BPF_ANY);
}

static __always_inline void leave(__u32 fn)
{
	struct start_key k = { .tid = (__u32)bpf_get_current_pid_tgid(), .function = fn };
	struct lat_key key = { .function = fn };
	__u64 *ts = bpf_map_lookup_elem(&starts, &k), ns;

	if (!ts)
		return;
	ns = bpf_ktime_get_ns() - *ts;
	bpf_map_delete_elem(&starts, &k);
	ke_observe(ke_add, &tcp_collapse_latency_seconds, key, ke_exp2_slot(ns), ns, MAX_SLOT);
}

SEC("fentry/tcp_collapse")
int BPF_PROG(collapse_fentry) { enter(FN_COLLAPSE); return 0; }

SEC("fexit/tcp_collapse")
int BPF_PROG(collapse_fexit) { leave(FN_COLLAPSE); return 0; }

SEC("kprobe/tcp_collapse")
int collapse_kprobe(struct pt_regs *ctx) { enter(FN_COLLAPSE); return 0; }

SEC("kretprobe/tcp_collapse")
int collapse_kretprobe(struct pt_regs *ctx) { leave(FN_COLLAPSE); return 0; }

SEC("fentry/tcp_prune_queue")
int BPF_PROG(prune_fentry) { enter(FN_PRUNE); return 0; }

SEC("fexit/tcp_prune_queue")
int BPF_PROG(prune_fexit) { leave(FN_PRUNE); return 0; }

SEC("kprobe/tcp_prune_queue")
int prune_kprobe(struct pt_regs *ctx) { enter(FN_PRUNE); return 0; }

SEC("kretprobe/tcp_prune_queue")
int prune_kretprobe(struct pt_regs *ctx) { leave(FN_PRUNE); return 0; }

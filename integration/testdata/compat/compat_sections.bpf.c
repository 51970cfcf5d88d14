// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

/*
 * Test program of the compatibility suite (compat_sections_test.go): the
 * attach types whose target cloudflare/ebpf_exporter reads from the
 * section name, in one object.
 *
 *   SEC(UPROBE_SECTION), "uprobe/<path of ke_target>:ke_work" (given
 *     with -DUPROBE_SECTION at build time): calls of ke_work(x) and the
 *     sum of x, in compat_uprobe_calls_total (HASH, key u32: 0 calls,
 *     1 argument sum).
 *   SEC("perf_event/type=1,config=0,frequency=1000"): cpu-clock samples at
 *     1000 Hz on every CPU, by the sampled task's command, in
 *     compat_perf_samples_total (HASH, key char[16] comm).
 *   SEC(XDP_SECTION), "xdp/lo" by default: packets arriving on the
 *     interface, in compat_xdp_packets_total (HASH, key u32: 0 IPv4 UDP
 *     to port 31337, 1 anything else); every packet passes.
 *
 * Values u64.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_tracing.h>
#include "kernel_exporter/maps.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#ifndef UPROBE_SECTION
#define UPROBE_SECTION "uprobe/ke_target:ke_work"
#endif
#ifndef XDP_SECTION
#define XDP_SECTION "xdp/lo"
#endif
#define XDP_TEST_PORT 31337

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} compat_uprobe_calls_total SEC(".maps");

struct comm_key {
	char comm[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct comm_key);
	__type(value, __u64);
} compat_perf_samples_total SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} compat_xdp_packets_total SEC(".maps");

SEC(UPROBE_SECTION)
int compat_on_work(struct pt_regs *ctx)
{
	__u32 calls = 0, sum = 1;

	ke_add(&compat_uprobe_calls_total, &calls, 1);
	ke_add(&compat_uprobe_calls_total, &sum, (__u64)PT_REGS_PARM1(ctx));
	return 0;
}

SEC("perf_event/type=1,config=0,frequency=1000")
int compat_on_sample(void *ctx)
{
	struct comm_key key = {};

	bpf_get_current_comm(key.comm, sizeof(key.comm));
	ke_add(&compat_perf_samples_total, &key, 1);
	return 0;
}

SEC(XDP_SECTION)
int compat_on_packet(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct udphdr *udp = (void *)(ip + 1);
	__u32 kind = 1;

	if ((void *)(udp + 1) <= end && eth->h_proto == bpf_htons(0x0800) && ip->ihl == 5 &&
	    ip->protocol == 17 && udp->dest == bpf_htons(XDP_TEST_PORT))
		kind = 0;
	ke_add(&compat_xdp_packets_total, &kind, 1);
	return XDP_PASS;
}

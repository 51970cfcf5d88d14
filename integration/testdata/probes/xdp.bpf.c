// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

/*
 * Test program for xdp/<interface> sections: counts the packets arriving on
 * the interface, passing every one.
 *
 * Map xdp_packets_total (HASH): key u32 kind (0: IPv4 UDP to port
 *   XDP_TEST_PORT, 1: anything else), value u64.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "kernel_exporter/maps.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#ifndef XDP_SECTION
#define XDP_SECTION "xdp/lo"
#endif
#define XDP_TEST_PORT 31337
#define ETH_P_IPV4 0x0800
#define PROTO_UDP 17

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} xdp_packets_total SEC(".maps");

static __always_inline __u32 classify(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip;
	struct udphdr *udp;

	if ((void *)(eth + 1) > end || eth->h_proto != bpf_htons(ETH_P_IPV4))
		return 1;
	ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > end || ip->ihl != 5 || ip->protocol != PROTO_UDP)
		return 1;
	udp = (void *)(ip + 1);
	if ((void *)(udp + 1) > end || udp->dest != bpf_htons(XDP_TEST_PORT))
		return 1;
	return 0;
}

SEC(XDP_SECTION)
int count_packets(struct xdp_md *ctx)
{
	__u32 kind = classify(ctx);

	ke_add(&xdp_packets_total, &kind, 1);
	return XDP_PASS;
}

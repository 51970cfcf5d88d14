// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

// (The build constraint above keeps the Go tool from treating this BPF C file
// as cgo source of package programs; clang ignores it.)

/*
 * packet_drops: packets the kernel dropped, by drop reason and protocol.
 *
 * Why: DNS lookups failed with NXDOMAIN after packet loss ate the first
 * query and its retry; SYN-queue overflows during a reconnect storm dropped
 * SYNs. Both are drops with a reason the kernel knows (NO_SOCKET,
 * SOCKET_RCVBUFF, TCP_LISTEN_OVERFLOW, NETFILTER_DROP, ...) but only
 * partly counts in /proc/net/snmp.
 *
 * Kernel source: BTF tracepoint (tp_btf, 5.5+) skb:kfree_skb
 * (include/trace/events/skb.h, since 2.6.30). Its reason argument
 * (enum skb_drop_reason) exists since 5.17; about 6.11 added a fourth, rx_sk,
 * unused here. Arguments: struct sk_buff *skb, void *location,
 * enum skb_drop_reason reason.
 *
 * The freeing of consumed (not dropped) packets goes to skb:consume_skb, but
 * the reasons "not dropped yet" and "consumed" are skipped here anyway,
 * looked up by name through CO-RE so that their numbers may change.
 * Some losses are not kfree_skb drops and are not counted: a SYN refused
 * because the listener's accept queue is full is consumed, not dropped
 * (ListenOverflows in /proc/net/netstat grows without an event on 6.18).
 *
 * Map packet_drops_total (HASH), key struct drop_key, 8 bytes:
 *   offset 0  u32 reason    enum skb_drop_reason value of the running kernel
 *   offset 4  u32 protocol  EtherType of skb->protocol, host byte order;
 *                           0 when unset; 0xffff for any EtherType not
 *                           listed below
 *   value u64: dropped packets.
 *
 * The numbering of enum skb_drop_reason changes between kernel versions
 * (reasons are inserted in the middle). packet_drops.yaml names them for
 * 6.18; on another kernel, regenerate its static_map from that kernel's BTF.
 *
 * Label bounds: reason has one value per enum entry (128 on 6.18), plus
 * subsystem reasons (high 16 bits set) shown as numbers; protocol is folded
 * in BPF to the eight values below. The map is capped at 2048 keys.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "kernel_exporter/maps.bpf.h"

#define ETH_P_IP	0x0800
#define ETH_P_ARP	0x0806
#define ETH_P_8021Q	0x8100
#define ETH_P_IPV6	0x86DD
#define ETH_P_MPLS_UC	0x8847
#define ETH_P_8021AD	0x88A8
#define ETH_P_OTHER	0xFFFF	/* ours: any other EtherType */

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct drop_key {
	__u32 reason;
	__u32 protocol;
};
_Static_assert(sizeof(struct drop_key) == 8, "packet_drops.yaml expects an 8-byte key");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 2048);
	__type(key, struct drop_key);
	__type(value, __u64);
} packet_drops_total SEC(".maps");

static __always_inline __u32 fold_protocol(__u16 proto)
{
	switch (proto) {
	case 0:
	case ETH_P_IP:
	case ETH_P_ARP:
	case ETH_P_8021Q:
	case ETH_P_IPV6:
	case ETH_P_MPLS_UC:
	case ETH_P_8021AD:
		return proto;
	}
	return ETH_P_OTHER;
}

SEC("tp_btf/kfree_skb")
int BPF_PROG(kfree_skb, struct sk_buff *skb, void *location,
	     enum skb_drop_reason reason)
{
	struct drop_key key;

	if (bpf_core_enum_value_exists(enum skb_drop_reason, SKB_NOT_DROPPED_YET) &&
	    reason == bpf_core_enum_value(enum skb_drop_reason, SKB_NOT_DROPPED_YET))
		return 0;
	if (bpf_core_enum_value_exists(enum skb_drop_reason, SKB_CONSUMED) &&
	    reason == bpf_core_enum_value(enum skb_drop_reason, SKB_CONSUMED))
		return 0;

	key.reason = reason;
	key.protocol = fold_protocol(bpf_ntohs(skb->protocol));
	ke_add(&packet_drops_total, &key, 1);
	return 0;
}

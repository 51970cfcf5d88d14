// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

// (The build constraint above keeps the Go tool from treating this BPF C file
// as cgo source of package programs; clang ignores it.)

/*
 * net_tx_size: size of the packets (skbs) handed to each network device for
 * transmission, and the number of GSO segments in each.
 *
 * Why: a distro upgrade left scatter-gather, checksum offload, TSO and GSO
 * off on the VLAN interfaces of Kafka brokers; system CPU went up 5 times.
 * With offload on, a TCP sender hands the device skbs of tens of kilobytes
 * that the NIC (or GSO, late) cuts into MTU-sized segments; with it off, no
 * skb is larger than the MTU. The size histogram answers "is offload really
 * on?" for every interface in the stack (VLAN, bond, NIC), each of which
 * sees the skb once.
 *
 * Kernel source: BTF tracepoint (tp_btf, 5.5+) net:net_dev_start_xmit
 * (include/trace/events/net.h, since about 3.19), arguments
 * const struct sk_buff *skb, const struct net_device *dev, fired for each
 * skb a driver's ndo_start_xmit is about to get. The size is skb->len (all
 * bytes including the link-layer header); the segment count is
 * skb_shinfo(skb)->gso_segs, where the shared info sits at skb->head +
 * skb->end (skb->end is an offset on 64-bit kernels).
 *
 * Map net_tx_packet_size_bytes (PERCPU_HASH), key struct tx_key, 8 bytes:
 *   offset 0  u32 device    dev->ifindex (the device label, named after
 *                           this field: labels come from the key's BTF)
 *   offset 4  u32 bucket    exp2 slot of skb->len, 0..20; 21 holds the sum
 *   value u64 per CPU: skbs (slot 21: sum of bytes).
 * Bucket unit: bytes (slot k: len <= 2^k; slot 20 = 1 MiB and above, BIG TCP
 * skbs can exceed 64 KiB).
 *
 * Map net_tx_gso_segments (PERCPU_HASH), same key, 8 bytes:
 *   offset 4  u32 bucket    exp2zero slot of gso_segs, 0..17; 18 holds the
 *                           sum. An skb that leaves as one packet has
 *                           gso_segs 0 or 1 (slot 0 or 1: TCP sets 1 on
 *                           some paths, most others leave 0); a GSO/TSO skb
 *                           of n segments has n.
 *   value u64 per CPU: skbs (slot 18: sum of segments).
 *
 * Label bounds: one device label per interface that transmitted. Hosts that
 * create and destroy interfaces (container veths) add a series per new
 * ifindex; the maps are capped at 256 interfaces' worth of keys.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "kernel_exporter/maps.bpf.h"

#define SIZE_MAX_BUCKET	20
#define SEGS_MAX_BUCKET	17
#define MAX_IFACES	256

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct tx_key {
	__u32 device;
	__u32 bucket;
};
_Static_assert(sizeof(struct tx_key) == 8, "net_tx_size.yaml expects an 8-byte key");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, MAX_IFACES * (SIZE_MAX_BUCKET + 2));
	__type(key, struct tx_key);
	__type(value, __u64);
} net_tx_packet_size_bytes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, MAX_IFACES * (SEGS_MAX_BUCKET + 2));
	__type(key, struct tx_key);
	__type(value, __u64);
} net_tx_gso_segments SEC(".maps");

SEC("tp_btf/net_dev_start_xmit")
int BPF_PROG(net_dev_start_xmit, const struct sk_buff *skb,
	     const struct net_device *dev)
{
	struct skb_shared_info *shinfo;
	struct tx_key key = {};
	__u64 len, segs;

	key.device = dev->ifindex;
	len = skb->len;
	ke_observe(ke_add_percpu, &net_tx_packet_size_bytes, key,
		   ke_exp2_slot(len), len, SIZE_MAX_BUCKET);

	/* skb_shinfo(): sk_buff_data_t end is an offset from head on 64-bit. */
	shinfo = (struct skb_shared_info *)(skb->head + skb->end);
	segs = BPF_CORE_READ(shinfo, gso_segs);
	ke_observe(ke_add_percpu, &net_tx_gso_segments, key,
		   ke_exp2zero_slot(segs), segs, SEGS_MAX_BUCKET);
	return 0;
}

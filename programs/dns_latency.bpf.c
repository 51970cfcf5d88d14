// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

// (The build constraint above keeps the Go tool from treating this BPF C file
// as cgo source of package programs; clang ignores it.)
/*
 * dns_latency: DNS over UDP sent by this host: the time from a query
 * leaving for port 53 to its response (same client port and id) arriving,
 * by response code; and queries sent, by address family.
 *
 * Why: in a Mesos cluster, existing names sometimes failed with "no such
 * host": packet loss ate the first query and its 5-second retry, and the
 * resolver then tried the search domain and got a genuine NXDOMAIN, about
 * 10 s after the lookup started. Latency by response code shows both the
 * 5 s steps and the NXDOMAIN rise at once.
 *
 * Kernel sources (BTF tracepoints, tp_btf, 5.5+):
 *   net:net_dev_queue(skb)      every packet handed to a device
 *       (__dev_queue_xmit, since 3.x), loopback included. A query is a
 *       UDP packet sent by a local socket (skb->sk set) to port 53 whose
 *       DNS header has QR = 0.
 *   net:netif_receive_skb(skb)  every packet entering the stack
 *       (__netif_receive_skb_core, since 3.x), loopback included; skb->data
 *       is at the IP header. A response is a UDP packet from port 53 with
 *       QR = 1 that matches a pending query.
 * Only the IP header's protocol and length, the 8-byte UDP header and the
 * first 4 bytes of the DNS header (id, flags; the rcode is the low 4 bits
 * of the second flags byte) are read, from the skb's linear data: no name
 * or record is parsed.
 *
 * Why not the socket's receive: skb:skb_copy_datagram_iovec, the only
 * tracepoint with the skb in recvmsg, does not fire for UDP on 6.18 (UDP
 * copies with checksum verification there); sock:sock_recv_length has no
 * data. So the latency ends when the response reaches the host, before
 * the application is woken: network round trip plus the server's time.
 *
 * A query is matched to its response by (client port, DNS id): the send
 * time is kept in an LRU hash (16384 entries) until the response arrives.
 * A retry with the same id keeps the first send time (a lost query shows
 * as the retry interval plus the answer's time), unless that time is
 * older than 30 s, which is taken as a stale entry (a query never
 * answered, whose port and id came round again). A response that matches
 * nothing (its query was sent before the program started, or forwarded
 * through this host) is not counted.
 *
 * Misses: DNS over TCP, DoT and DoH; servers on ports other than 53
 * (mDNS, Consul's 8600); IPv6 with extension headers; packets whose
 * headers are not in the skb's linear data; packets that bypass the
 * kernel's stack (AF_XDP, DPDK). Responses dropped after they reached the
 * host (a full socket buffer) still count as answered: see packet_drops.
 *
 * Maps:
 *   dns_query_latency_seconds (HASH) key u32 rcode (0..15), u32 bucket
 *       (exp2 slot of the latency in ns, 0..36; 37 holds the sum)
 *   dns_queries_total (HASH) key u32 family (2 inet, 10 inet6)
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "kernel_exporter/maps.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define ETH_P_IP	0x0800
#define ETH_P_IPV6	0x86DD
#define AF_INET		2
#define AF_INET6	10
#define IPPROTO_UDP_	17
#define DNS_PORT	53
#define MAX_SLOT	36
#define STALE_NS	(30ULL * 1000000000ULL)

/* UDP header and the first 4 bytes of the DNS header. */
struct udp_dns {
	__be16 sport;
	__be16 dport;
	__be16 len;
	__be16 check;
	__u16 id;
	__u8 flags1; /* QR(1) opcode(4) AA TC RD */
	__u8 flags2; /* RA Z AD CD rcode(4) */
};

struct pending_key {
	__be16 port; /* client port, as on the wire */
	__u16 id;
};

struct latency_key {
	__u32 rcode;
	__u32 bucket;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct pending_key);
	__type(value, __u64);
} pending SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16 * (MAX_SLOT + 2));
	__type(key, struct latency_key);
	__type(value, __u64);
} dns_query_latency_seconds SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} dns_queries_total SEC(".maps");

/*
 * read_tx_udp_dns reads the UDP and DNS headers of a sent skb into h and
 * returns 1 when skb is a query: UDP over IPv4 or IPv6 to port 53, QR = 0,
 * with 12 bytes of linear data after the transport header. IPv6
 * extension headers are not followed. skb fields are read directly (a BTF
 * pointer: plain loads, relocated by CO-RE); packet bytes are read only
 * for the header, and the IP header only for a packet to port 53.
 */
static __always_inline int read_tx_udp_dns(const struct sk_buff *skb, struct udp_dns *h, __u32 *family)
{
	unsigned char *head = skb->head;
	__u16 nh = skb->network_header;
	__u16 th = skb->transport_header;
	__u16 proto = skb->protocol;
	__u8 l4 = 0;

	if (nh == 0xffff || th == 0xffff || th + sizeof(*h) > skb->tail)
		return 0;
	if (proto == bpf_htons(ETH_P_IP))
		*family = AF_INET;
	else if (proto == bpf_htons(ETH_P_IPV6))
		*family = AF_INET6;
	else
		return 0;
	if (bpf_probe_read_kernel(h, sizeof(*h), head + th))
		return 0;
	if (h->dport != bpf_htons(DNS_PORT) || (h->flags1 & 0x80))
		return 0;
	/* iphdr.protocol, ipv6hdr.nexthdr: a TCP header also has its
	 * destination port at offset 2. */
	bpf_probe_read_kernel(&l4, 1, head + nh + (*family == AF_INET ? 9 : 6));
	return l4 == IPPROTO_UDP_;
}

SEC("tp_btf/net_dev_queue")
int BPF_PROG(dns_query, struct sk_buff *skb)
{
	struct pending_key key;
	struct udp_dns h;
	__u64 now, *ts;
	__u32 family;

	if (!skb->sk)
		return 0; /* forwarded, not sent by this host */
	if (!read_tx_udp_dns(skb, &h, &family))
		return 0;
	key.port = h.sport;
	key.id = h.id;
	now = bpf_ktime_get_ns();
	ts = bpf_map_lookup_elem(&pending, &key);
	if (!ts || now - *ts > STALE_NS)
		ke_update(&pending, &key, &now, BPF_ANY);
	ke_add(&dns_queries_total, &family, 1);
	return 0;
}

/*
 * read_rx_udp_dns reads the UDP and DNS headers of a received skb, whose
 * data starts at the IP header, into h. It returns 1 when skb is a
 * response: an unfragmented (or first fragment) UDP packet over IPv4 or
 * IPv6 from port 53 with QR = 1 and its headers in the linear data. One
 * read covers an IPv4 header without options and the UDP and DNS headers.
 */
static __always_inline int read_rx_udp_dns(const struct sk_buff *skb, struct udp_dns *h)
{
	unsigned char *data = skb->data;
	__u32 linear = skb->len - skb->data_len;
	__u16 proto = skb->protocol;
	struct {
		__u8 ip[20];
		struct udp_dns h;
	} p;
	__u32 off;

	if (proto == bpf_htons(ETH_P_IP)) {
		if (linear < sizeof(p) || bpf_probe_read_kernel(&p, sizeof(p), data))
			return 0;
		/* ip[6..7]: flags and fragment offset; ip[9]: protocol */
		if (p.ip[9] != IPPROTO_UDP_ || ((p.ip[6] & 0x1f) | p.ip[7]))
			return 0;
		off = (p.ip[0] & 0x0f) * 4;
		if (off == 20) {
			*h = p.h;
		} else {
			if (off < 20 || off + sizeof(*h) > linear ||
			    bpf_probe_read_kernel(h, sizeof(*h), data + off))
				return 0;
		}
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		if (linear < 40 + sizeof(*h) || bpf_probe_read_kernel(&p.ip[6], 1, data + 6) ||
		    p.ip[6] != IPPROTO_UDP_ || bpf_probe_read_kernel(h, sizeof(*h), data + 40))
			return 0;
	} else {
		return 0;
	}
	return h->sport == bpf_htons(DNS_PORT) && (h->flags1 & 0x80);
}

SEC("tp_btf/netif_receive_skb")
int BPF_PROG(dns_response, struct sk_buff *skb)
{
	struct latency_key lkey = {};
	struct pending_key key;
	struct udp_dns h;
	__u64 *ts, ns;

	if (!read_rx_udp_dns(skb, &h))
		return 0;
	key.port = h.dport;
	key.id = h.id;
	ts = bpf_map_lookup_elem(&pending, &key);
	if (!ts)
		return 0;
	ns = bpf_ktime_get_ns() - *ts;
	bpf_map_delete_elem(&pending, &key);
	lkey.rcode = h.flags2 & 0x0f;
	ke_observe(ke_add, &dns_query_latency_seconds, lkey, ke_exp2_slot(ns), ns, MAX_SLOT);
	return 0;
}

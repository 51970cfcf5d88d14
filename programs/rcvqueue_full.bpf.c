// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

// (The build constraint above keeps the Go tool from treating this BPF C file
// as cgo source of package programs; clang ignores it.)

/*
 * rcvqueue_full: packets refused because a socket's receive queue was full,
 * and allocations refused because a protocol's memory limit was exceeded.
 *
 * Why: with net.ipv4.tcp_rmem too large, sockets full of small skbs made the
 * kernel collapse receive queues and stall a CPU for 20 ms; DNS queries
 * vanished in a full UDP receive buffer and came back 10 s later as
 * NXDOMAIN. These counters say which protocol, and for UDP which service
 * port, is refusing data.
 *
 * Kernel sources, all BTF tracepoints (tp_btf, 5.5+):
 *   sock:sock_rcvqueue_full (include/trace/events/sock.h, since about 3.0;
 *     struct sock *sk, struct sk_buff *skb): fired by __sock_queue_rcv_skb
 *     when sk_rmem_alloc >= sk_rcvbuf. That generic path serves ICMP ping
 *     sockets and some non-IP families (CAN, Bluetooth, ...). UDP (since
 *     4.10) and TCP queue packets through their own code and never fire it
 *     (see udp_receive_errors_total and packet_drops); on 6.18 raw IP
 *     sockets drop before this point too (their /proc/net/raw drop count
 *     grows without an event).
 *   sock:sock_exceed_buf_limit (same file and version; struct sock *sk,
 *     struct proto *prot, long allocated, int kind; kind added in 4.x):
 *     fired when a protocol's memory (tcp_mem, udp_mem, sctp_mem) is above
 *     its hard limit, or above the pressure threshold with the socket over
 *     its share, and an allocation is refused. kind: SK_MEM_SEND (0) or
 *     SK_MEM_RECV (1), defines in include/net/sock.h.
 *   udp:udp_fail_queue_rcv_skb (include/trace/events/udp.h, since 3.x;
 *     int rc, struct sock *sk, and since 6.x struct sk_buff *skb): fired
 *     when UDP cannot queue a received datagram, rc = -ENOMEM for a full
 *     receive buffer (RcvbufErrors), -ENOBUFS for udp_mem (MemErrors).
 *     Since "udp: remove busylock and add per NUMA queues" (6.18) udp_mem
 *     drops happen after the datagram was accepted into a per-NUMA queue,
 *     without this event (and without MemErrors): they show only as
 *     socket_buffer_limit_exceeded_total{protocol="udp",kind="receive"}
 *     and packet_drops_total{reason="PROTO_MEM"}.
 *
 * Map socket_rcvqueue_full_total (HASH), key struct rcvq_key, 4 bytes:
 *   offset 0  u16 family    sk->sk_family (AF_*)
 *   offset 2  u16 protocol  sk->sk_protocol for AF_INET/AF_INET6 (IPPROTO_*),
 *                           0xffff for other families
 *   value u64: packets refused.
 * Map socket_buffer_limit_exceeded_total (HASH), key struct limit_key,
 * 4 bytes:
 *   offset 0  u16 protocol  as above
 *   offset 2  u16 kind      0 = send, 1 = receive
 *   value u64: allocations refused.
 * Map udp_receive_errors_total (HASH), key struct udp_key, 4 bytes:
 *   offset 0  u16 port      service port: the smaller of the local and the
 *                           remote port if below 32768, else 0 (ephemeral)
 *   offset 2  u16 errno     -rc (12 ENOMEM, 105 ENOBUFS)
 *   value u64: datagrams dropped.
 *
 * Label bounds: family < 64 values, protocol one per IPPROTO in use (and
 * 0xffff), kind 2, errno a handful; port is only ever a port below 32768,
 * and in practice the few UDP services of the host. No addresses, no
 * ephemeral ports. Maps are capped at 1024 keys.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_endian.h>
#include "kernel_exporter/maps.bpf.h"

#define AF_INET		2
#define AF_INET6	10
#define PROTO_OTHER	0xffff
#define EPHEMERAL_MIN	32768

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct rcvq_key {
	__u16 family;
	__u16 protocol;
};
_Static_assert(sizeof(struct rcvq_key) == 4, "rcvqueue_full.yaml expects a 4-byte key");

struct limit_key {
	__u16 protocol;
	__u16 kind;
};
_Static_assert(sizeof(struct limit_key) == 4, "rcvqueue_full.yaml expects a 4-byte key");

struct udp_key {
	__u16 port;
	__u16 errno;
};
_Static_assert(sizeof(struct udp_key) == 4, "rcvqueue_full.yaml expects a 4-byte key");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct rcvq_key);
	__type(value, __u64);
} socket_rcvqueue_full_total SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct limit_key);
	__type(value, __u64);
} socket_buffer_limit_exceeded_total SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct udp_key);
	__type(value, __u64);
} udp_receive_errors_total SEC(".maps");

static __always_inline __u16 inet_protocol(const struct sock *sk)
{
	__u16 family = sk->__sk_common.skc_family;

	if (family != AF_INET && family != AF_INET6)
		return PROTO_OTHER;
	return sk->sk_protocol;
}

SEC("tp_btf/sock_rcvqueue_full")
int BPF_PROG(sock_rcvqueue_full, struct sock *sk)
{
	struct rcvq_key key;

	key.family = sk->__sk_common.skc_family;
	key.protocol = inet_protocol(sk);
	ke_add(&socket_rcvqueue_full_total, &key, 1);
	return 0;
}

SEC("tp_btf/sock_exceed_buf_limit")
int BPF_PROG(sock_exceed_buf_limit, struct sock *sk, struct proto *prot,
	     long allocated, int kind)
{
	struct limit_key key;

	key.protocol = inet_protocol(sk);
	key.kind = kind ? 1 : 0;
	ke_add(&socket_buffer_limit_exceeded_total, &key, 1);
	return 0;
}

SEC("tp_btf/udp_fail_queue_rcv_skb")
int BPF_PROG(udp_fail_queue_rcv_skb, int rc, struct sock *sk)
{
	struct udp_key key;
	__u16 local, remote, port;

	local = sk->__sk_common.skc_num;
	remote = bpf_ntohs(sk->__sk_common.skc_dport);
	port = local;
	if (remote && remote < port)
		port = remote;
	key.port = port < EPHEMERAL_MIN ? port : 0;
	key.errno = rc < 0 && rc >= -4095 ? -rc : 0;
	ke_add(&udp_receive_errors_total, &key, 1);
	return 0;
}

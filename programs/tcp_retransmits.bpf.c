// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

// (The build constraint above keeps the Go tool from treating this BPF C file
// as cgo source of package programs; clang ignores it.)

/*
 * tcp_retransmits: TCP segment retransmissions, by service port, TCP state
 * and result.
 *
 * Why: retransmits are the first symptom of loss (drops on a NIC, a full
 * qdisc, a peer whose window collapsed). The netstat counter RetransSegs is
 * host-wide; per service port and state it tells which service suffers and
 * whether it is the handshake (SYN_SENT, SYN_RECV) or data (ESTABLISHED)
 * that is retransmitted.
 *
 * Kernel source: BTF tracepoint (tp_btf, 5.5+) tcp:tcp_retransmit_skb
 * (include/trace/events/tcp.h, since 4.15), arguments const struct sock *sk
 * and const struct sk_buff *skb. Recent kernels (6.18 has it) add a third
 * argument, int err, and fire the tracepoint for failed attempts too (for
 * example -EBUSY when the qdisc or TSQ holds the packet back); older kernels
 * fire it only for retransmits that were sent. The third argument is read
 * only when the kernel's BTF has the tracepoint's own record type
 * trace_event_raw_tcp_retransmit_skb, which appeared with it; on older
 * kernels that code is removed at load time and every event is "sent".
 *
 * Map tcp_retransmits_total (HASH), key struct retrans_key, 8 bytes:
 *   offset 0  u16 port    service port, see below; 0 = ephemeral
 *   offset 2  u8  state   TCP state of the socket (1..13)
 *   offset 3  u8  result  0 = sent, 1 = failed (err != 0)
 *   offset 4  u32 pad     always 0
 *   value u64: retransmit attempts.
 *
 * Label bounds: no addresses and no ephemeral ports. port is the smaller of
 * the local and the remote port, if it is below 32768 (the start of the
 * default ip_local_port_range), else 0; for a server socket that is its
 * listening port, for a client socket the port it connected to. state has
 * at most 13 values, result 2.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "kernel_exporter/maps.bpf.h"

#define EPHEMERAL_MIN	32768

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct retrans_key {
	__u16 port;
	__u8 state;
	__u8 result;
	__u32 pad;
};
_Static_assert(sizeof(struct retrans_key) == 8, "tcp_retransmits.yaml expects an 8-byte key");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct retrans_key);
	__type(value, __u64);
} tcp_retransmits_total SEC(".maps");

static __always_inline __u16 service_port(const struct sock *sk)
{
	__u16 local = sk->__sk_common.skc_num;
	__u16 remote = bpf_ntohs(sk->__sk_common.skc_dport);
	__u16 port = local;

	if (remote && remote < port)
		port = remote;
	return port < EPHEMERAL_MIN ? port : 0;
}

SEC("tp_btf/tcp_retransmit_skb")
int BPF_PROG(tcp_retransmit_skb, const struct sock *sk, const struct sk_buff *skb)
{
	struct retrans_key key = {};

	key.port = service_port(sk);
	key.state = sk->__sk_common.skc_state;
	if (bpf_core_type_exists(struct trace_event_raw_tcp_retransmit_skb)) {
		/* Third argument, int err: only on kernels that have it. */
		int err = (int)ctx[2];

		key.result = err != 0;
	}
	ke_add(&tcp_retransmits_total, &key, 1);
	return 0;
}

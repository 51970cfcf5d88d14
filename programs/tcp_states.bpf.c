// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

// (The build constraint above keeps the Go tool from treating this BPF C file
// as cgo source of package programs; clang ignores it.)

/*
 * tcp_states: TCP state transitions, and how long sockets stay in the two
 * handshake states.
 *
 * Why: during a reconnect storm 18,000 clients hit a listen backlog of 50;
 * SYNs were dropped or answered with SYN cookies. Transition counts show the
 * storm (LISTEN→SYN_RECV, SYN_SENT→CLOSE for failed connects) and the time
 * in SYN_SENT is the client's connect latency: SYN retransmits put it at
 * 1 s, 3 s, 7 s, ... instead of one round trip.
 *
 * Kernel source: BTF tracepoint (tp_btf, 5.5+) sock:inet_sock_set_state
 * (include/trace/events/sock.h, since 4.16), arguments const struct sock *sk,
 * int oldstate, int newstate. It fires for every protocol using inet
 * states; only sk->sk_protocol == IPPROTO_TCP is counted (MPTCP subflows
 * are TCP sockets and are counted).
 *
 * Time in a state is kept per socket: entering SYN_SENT or SYN_RECV stores
 * bpf_ktime_get_ns() in an LRU hash keyed by the socket's address; leaving
 * it (to any state: ESTABLISHED, or CLOSE on failure) records the time.
 * A passive open creates the full socket in SYN_RECV only when the final
 * ACK of the handshake arrives (before that the connection is a request
 * socket, which this tracepoint does not see) and moves it to ESTABLISHED
 * straight away, so tcp_syn_recv_seconds is microseconds except for TCP
 * Fast Open, where the socket waits in SYN_RECV for the client's ACK.
 *
 * Map tcp_state_transitions_total (HASH), key struct transition_key, 2 bytes:
 *   offset 0  u8 from   old state (TCP_ESTABLISHED 1 .. TCP_BOUND_INACTIVE 13)
 *   offset 1  u8 to     new state
 *   value u64: transitions.
 * Maps tcp_syn_sent_seconds and tcp_syn_recv_seconds (HASH), key struct
 * duration_key, 8 bytes:
 *   offset 0  u8  to       state the socket left SYN_SENT/SYN_RECV for
 *   offset 1  3 bytes of padding, zeroed with the whole key
 *   offset 4  u32 bucket   exp2 slot, 0..36; slot 37 holds the sum
 *   value u64: sockets (slot 37: sum of nanoseconds).
 * Bucket unit: nanoseconds (slot k: time <= 2^k ns; slot 36 ≈ 69 s).
 *
 * A socket entering TIME_WAIT is replaced by a timewait socket and closed:
 * the tracepoint shows FIN_WAIT2 -> CLOSE (or CLOSING -> CLOSE), never
 * -> TIME_WAIT.
 *
 * Label bounds: from and to are TCP states, 13 values each (at most 169
 * pairs, about 25 occur). No addresses or ports.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "kernel_exporter/maps.bpf.h"

#define MAX_BUCKET	36
#define NR_STATES	14	/* 0 .. TCP_BOUND_INACTIVE (13) */
#define IPPROTO_TCP_	6

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct transition_key {
	__u8 from;
	__u8 to;
};
_Static_assert(sizeof(struct transition_key) == 2, "tcp_states.yaml expects a 2-byte key");

struct duration_key {
	__u8 to;
	__u32 bucket;
};
_Static_assert(sizeof(struct duration_key) == 8, "tcp_states.yaml expects an 8-byte key");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NR_STATES * NR_STATES);
	__type(key, struct transition_key);
	__type(value, __u64);
} tcp_state_transitions_total SEC(".maps");

/*
 * When a socket entered SYN_SENT or SYN_RECV. LRU: sockets destroyed
 * without leaving the state through this tracepoint are evicted.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, __u64);
} tcp_handshake_start SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NR_STATES * (MAX_BUCKET + 2));
	__type(key, struct duration_key);
	__type(value, __u64);
} tcp_syn_sent_seconds SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NR_STATES * (MAX_BUCKET + 2));
	__type(key, struct duration_key);
	__type(value, __u64);
} tcp_syn_recv_seconds SEC(".maps");

SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(inet_sock_set_state, const struct sock *sk, int oldstate,
	     int newstate)
{
	struct transition_key tkey;
	struct duration_key dkey;
	__u64 skaddr = (__u64)sk, now, *start, delta;

	__builtin_memset(&dkey, 0, sizeof(dkey)); /* padding included */
	if (sk->sk_protocol != IPPROTO_TCP_)
		return 0;
	if (oldstate < 0 || oldstate >= NR_STATES || newstate < 0 ||
	    newstate >= NR_STATES)
		return 0;

	tkey.from = oldstate;
	tkey.to = newstate;
	ke_add(&tcp_state_transitions_total, &tkey, 1);

	if (oldstate == TCP_SYN_SENT || oldstate == TCP_SYN_RECV) {
		start = bpf_map_lookup_elem(&tcp_handshake_start, &skaddr);
		if (start) {
			delta = bpf_ktime_get_ns() - *start;
			bpf_map_delete_elem(&tcp_handshake_start, &skaddr);
			dkey.to = newstate;
			if (oldstate == TCP_SYN_SENT)
				ke_observe(ke_add, &tcp_syn_sent_seconds, dkey,
					   ke_exp2_slot(delta), delta, MAX_BUCKET);
			else
				ke_observe(ke_add, &tcp_syn_recv_seconds, dkey,
					   ke_exp2_slot(delta), delta, MAX_BUCKET);
		}
	}
	if (newstate == TCP_SYN_SENT || newstate == TCP_SYN_RECV) {
		now = bpf_ktime_get_ns();
		ke_update(&tcp_handshake_start, &skaddr, &now, BPF_ANY);
	}
	return 0;
}

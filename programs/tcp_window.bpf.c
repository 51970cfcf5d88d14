// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

// (The build constraint above keeps the Go tool from treating this BPF C file
// as cgo source of package programs; clang ignores it.)
/*
 * tcp_window: receive window that established TCP sockets advertise, and
 * window-scale mismatches: a connection whose socket scales its window by a
 * different shift than the one it announced in its SYN+ACK.
 *
 * Why: a kernel bug on the SYN-cookie path (fixed in 5.10) announced window
 * scale 1 in the SYN+ACK and then used 7, so a window of 789 meant 101 KB
 * to the broker and 1578 bytes to its clients: producers stalled for
 * 500 ms. It was found with ss -i, tcpdump and a kprobe on
 * tcp_select_window. This program keeps that check running.
 *
 * Kernel functions:
 *   tcp_make_synack(sk, dst, req, ...)   every SYN+ACK, cookie or not;
 *       records the announced scale inet_rsk(req)->rcv_wscale (0 when the
 *       peer did not offer window scaling) by connection 4-tuple
 *   tcp_select_window(sk) -> u16         the window field of each outgoing
 *       segment, already shifted right by tp->rx_opt.rcv_wscale. It is a
 *       static function that compilers inline (Debian 6.1 does), so:
 *   __tcp_select_window(sk) -> u32       is the fallback: the window in
 *       bytes computed for each outgoing segment and for window updates
 *       after reads (so it is sampled a little more often)
 * On the first window of a connection that has an announced scale on
 * record, the scale in use (tp->rx_opt.rcv_wscale) is compared with it:
 * every such connection counts as a check, and a difference as a mismatch.
 * Hooks, chosen by the loader (alternatives): fexit on tcp_select_window,
 * fexit on __tcp_select_window, then kretprobe on each.
 *
 * Labels are bounded: port is the local port of the socket when it is
 * below 32768 (the listening port of a server-side socket), and 0 for
 * higher ports (client sides use ephemeral ports).
 *
 * Maps:
 *   tcp_receive_window_bytes (HASH)  key u16 port, u16 pad, u32 bucket
 *       (exp2 slot of the window in bytes, 0..30; 31 holds the sum)
 *   tcp_window_scale_checks_total (HASH)      key u16 port
 *   tcp_window_scale_mismatches_total (HASH)  key u16 port, u8 announced,
 *       u8 used
 *   announced (LRU_HASH)  4-tuple -> announced scale, until checked
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "kernel_exporter/maps.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define MAX_SLOT 30
#define MAX_PORTS 1024
#define AF_INET 2
#define AF_INET6 10
#define TCP_ESTABLISHED 1
#define EPHEMERAL_MIN 32768

struct tuple {
	__u8 saddr[16];
	__u8 daddr[16];
	__u16 family;
	__u16 sport; /* host order */
	__u16 dport; /* network order */
	__u16 pad;
};

struct window_key {
	__u16 port;
	__u16 pad;
	__u32 bucket;
};

struct mismatch_key {
	__u16 port;
	__u8 announced;
	__u8 used;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct tuple);
	__type(value, __u8);
} announced SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_PORTS * (MAX_SLOT + 2));
	__type(key, struct window_key);
	__type(value, __u64);
} tcp_receive_window_bytes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_PORTS);
	__type(key, __u16);
	__type(value, __u64);
} tcp_window_scale_checks_total SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_PORTS);
	__type(key, struct mismatch_key);
	__type(value, __u64);
} tcp_window_scale_mismatches_total SEC(".maps");

/* Socket of a tcp_select_window call in progress, for kretprobes. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, struct sock *);
} selecting SEC(".maps");

/* tuple_of fills t from the sock_common at the head of a sock or a
 * request_sock (their ir_* / skc_* fields are the same members). */
static __always_inline int tuple_of(struct sock_common *c, struct tuple *t)
{
	t->family = BPF_CORE_READ(c, skc_family);
	t->sport = BPF_CORE_READ(c, skc_num);
	t->dport = BPF_CORE_READ(c, skc_dport);
	if (t->family == AF_INET) {
		BPF_CORE_READ_INTO(t->saddr, c, skc_rcv_saddr);
		BPF_CORE_READ_INTO(t->daddr, c, skc_daddr);
		return 0;
	}
	if (t->family == AF_INET6) {
		BPF_CORE_READ_INTO(t->saddr, c, skc_v6_rcv_saddr.in6_u.u6_addr8);
		BPF_CORE_READ_INTO(t->daddr, c, skc_v6_daddr.in6_u.u6_addr8);
		return 0;
	}
	return -1;
}

static __always_inline void on_synack(struct request_sock *req)
{
	struct inet_request_sock *ireq = (struct inet_request_sock *)req;
	struct tuple t = {};
	__u8 scale = 0;

	if (tuple_of(&req->__req_common, &t))
		return;
	if (BPF_CORE_READ_BITFIELD_PROBED(ireq, wscale_ok))
		scale = BPF_CORE_READ_BITFIELD_PROBED(ireq, rcv_wscale);
	ke_update(&announced, &t, &scale, BPF_ANY);
}

static __always_inline __u16 label_port(__u16 port)
{
	return port < EPHEMERAL_MIN ? port : 0;
}

/* on_window records a window of bytes (scaled: the value is the window
 * field, to be shifted by the socket's rcv_wscale) and checks the scale. */
static __always_inline void on_window(struct sock *sk, __u64 win, int scaled)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct window_key key = {};
	struct tuple t = {};
	__u8 used, *ann;

	if (BPF_CORE_READ(sk, __sk_common.skc_state) != TCP_ESTABLISHED)
		return;
	used = BPF_CORE_READ_BITFIELD_PROBED(tp, rx_opt.rcv_wscale);
	if (scaled)
		win <<= used;
	key.port = label_port(BPF_CORE_READ(sk, __sk_common.skc_num));
	ke_observe(ke_add, &tcp_receive_window_bytes, key, ke_exp2_slot(win), win, MAX_SLOT);

	if (tuple_of(&sk->__sk_common, &t))
		return;
	ann = bpf_map_lookup_elem(&announced, &t);
	if (!ann)
		return;
	ke_add(&tcp_window_scale_checks_total, &key.port, 1);
	if (*ann != used) {
		struct mismatch_key mk = { .port = key.port, .announced = *ann, .used = used };

		ke_add(&tcp_window_scale_mismatches_total, &mk, 1);
	}
	bpf_map_delete_elem(&announced, &t);
}

static __always_inline void select_enter(struct sock *sk)
{
	__u64 id = bpf_get_current_pid_tgid();

	ke_update(&selecting, &id, &sk, BPF_ANY);
}

static __always_inline void select_exit(__u64 win, int scaled)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct sock **sk = bpf_map_lookup_elem(&selecting, &id);

	if (!sk)
		return;
	on_window(*sk, win, scaled);
	bpf_map_delete_elem(&selecting, &id);
}

SEC("fentry/tcp_make_synack")
int BPF_PROG(synack_fentry, const struct sock *sk, struct dst_entry *dst, struct request_sock *req)
{
	on_synack(req);
	return 0;
}

SEC("kprobe/tcp_make_synack")
int BPF_KPROBE(synack_kprobe, const struct sock *sk, struct dst_entry *dst, struct request_sock *req)
{
	on_synack(req);
	return 0;
}

SEC("fexit/tcp_select_window")
int BPF_PROG(select_window_fexit, struct sock *sk, u16 ret)
{
	on_window(sk, ret, 1);
	return 0;
}

SEC("fexit/__tcp_select_window")
int BPF_PROG(__select_window_fexit, struct sock *sk, u32 ret)
{
	on_window(sk, ret, 0);
	return 0;
}

SEC("kprobe/tcp_select_window")
int BPF_KPROBE(select_window_kprobe, struct sock *sk)
{
	select_enter(sk);
	return 0;
}

SEC("kretprobe/tcp_select_window")
int BPF_KRETPROBE(select_window_kretprobe, u16 ret)
{
	select_exit(ret, 1);
	return 0;
}

SEC("kprobe/__tcp_select_window")
int BPF_KPROBE(__select_window_kprobe, struct sock *sk)
{
	select_enter(sk);
	return 0;
}

SEC("kretprobe/__tcp_select_window")
int BPF_KRETPROBE(__select_window_kretprobe, u32 ret)
{
	select_exit(ret, 0);
	return 0;
}

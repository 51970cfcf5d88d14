// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

// (The build constraint above keeps the Go tool from treating this BPF C file
// as cgo source of package programs; clang ignores it.)
/*
 * tcp_syn_backlog: SYN backlog length of a listener at the moment each SYN
 * arrives, and SYN cookies sent and validated, per listening port.
 *
 * Why: after a rolling restart 18,000 clients reconnected at once to
 * brokers whose listen backlog was hard-coded to 50. The SYN queue filled,
 * the kernel answered with SYN cookies, and a kernel bug on that path
 * (fixed in 5.10) left some connections with a 64 times smaller window.
 * Backlog length and cookie counts per port show the first two steps;
 * tcp_window shows the last.
 *
 * Kernel functions (all out of line on 4.x-6.x):
 *   tcp_conn_request(rsk_ops, af_ops, sk, skb)   every SYN to a listener;
 *       backlog = inet_csk(sk)->icsk_accept_queue.qlen (request socks in
 *       SYN_RECV), port = sk->skc_num
 *   cookie_v4_init_sequence(skb, mssp)           a SYN answered with a
 *       cookie (called through tcp_request_sock_ops); port from the TCP
 *       header of skb
 *   cookie_v4_check(sk, skb) -> struct sock *     an ACK checked against
 *       a cookie; validated when it returns a new socket (not NULL, not sk)
 *   cookie_v6_init_sequence, cookie_v6_check     the same for IPv6
 *       (optional group: absent when IPv6 is a module that is not loaded)
 * Hooks, chosen by the loader (alternatives): fentry/fexit, else
 * kprobe/kretprobe.
 *
 * Maps (ports are host order):
 *   tcp_syn_backlog (HASH)             key u16 port, u16 pad, u32 bucket
 *       (exp2zero slot of the backlog length, 0..17; 18 holds the sum)
 *   tcp_syncookies_sent_total (HASH)      key u16 port
 *   tcp_syncookies_validated_total (HASH) key u16 port
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "kernel_exporter/maps.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define MAX_SLOT 17
#define MAX_PORTS 1024

struct backlog_key {
	__u16 port;
	__u16 pad;
	__u32 bucket;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_PORTS * (MAX_SLOT + 2));
	__type(key, struct backlog_key);
	__type(value, __u64);
} tcp_syn_backlog SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_PORTS);
	__type(key, __u16);
	__type(value, __u64);
} tcp_syncookies_sent_total SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_PORTS);
	__type(key, __u16);
	__type(value, __u64);
} tcp_syncookies_validated_total SEC(".maps");

/* Listener of a cookie_v*_check call in progress, for kretprobes. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, struct sock *);
} checking SEC(".maps");

static __always_inline void on_syn(struct sock *sk)
{
	struct inet_connection_sock *icsk = (struct inet_connection_sock *)sk;
	struct backlog_key key = {};
	__u32 qlen;

	key.port = BPF_CORE_READ(sk, __sk_common.skc_num);
	qlen = BPF_CORE_READ(icsk, icsk_accept_queue.qlen.counter);
	ke_observe(ke_add, &tcp_syn_backlog, key, ke_exp2zero_slot(qlen), qlen, MAX_SLOT);
}

static __always_inline void on_cookie_sent(struct sk_buff *skb)
{
	unsigned char *head = BPF_CORE_READ(skb, head);
	__u16 off = BPF_CORE_READ(skb, transport_header);
	struct tcphdr th;
	__u16 port;

	if (bpf_probe_read_kernel(&th, sizeof(th), head + off))
		return;
	port = bpf_ntohs(th.dest);
	ke_add(&tcp_syncookies_sent_total, &port, 1);
}

static __always_inline void on_cookie_checked(struct sock *sk, struct sock *ret)
{
	__u16 port;

	if (!ret || ret == sk)
		return;
	port = BPF_CORE_READ(sk, __sk_common.skc_num);
	ke_add(&tcp_syncookies_validated_total, &port, 1);
}

static __always_inline void check_enter(struct sock *sk)
{
	__u64 id = bpf_get_current_pid_tgid();

	ke_update(&checking, &id, &sk, BPF_ANY);
}

static __always_inline void check_exit(struct sock *ret)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct sock **sk = bpf_map_lookup_elem(&checking, &id);

	if (!sk)
		return;
	on_cookie_checked(*sk, ret);
	bpf_map_delete_elem(&checking, &id);
}

/* fentry/fexit */

SEC("fentry/tcp_conn_request")
int BPF_PROG(syn_fentry, struct request_sock_ops *rsk_ops, const struct tcp_request_sock_ops *af_ops, struct sock *sk)
{
	on_syn(sk);
	return 0;
}

SEC("fentry/cookie_v4_init_sequence")
int BPF_PROG(cookie4_sent_fentry, struct sk_buff *skb)
{
	on_cookie_sent(skb);
	return 0;
}

SEC("fexit/cookie_v4_check")
int BPF_PROG(cookie4_check_fexit, struct sock *sk, struct sk_buff *skb, struct sock *ret)
{
	on_cookie_checked(sk, ret);
	return 0;
}

SEC("fentry/cookie_v6_init_sequence")
int BPF_PROG(cookie6_sent_fentry, struct sk_buff *skb)
{
	on_cookie_sent(skb);
	return 0;
}

SEC("fexit/cookie_v6_check")
int BPF_PROG(cookie6_check_fexit, struct sock *sk, struct sk_buff *skb, struct sock *ret)
{
	on_cookie_checked(sk, ret);
	return 0;
}

/* kprobe/kretprobe */

SEC("kprobe/tcp_conn_request")
int BPF_KPROBE(syn_kprobe, struct request_sock_ops *rsk_ops, const struct tcp_request_sock_ops *af_ops, struct sock *sk)
{
	on_syn(sk);
	return 0;
}

SEC("kprobe/cookie_v4_init_sequence")
int BPF_KPROBE(cookie4_sent_kprobe, struct sk_buff *skb)
{
	on_cookie_sent(skb);
	return 0;
}

SEC("kprobe/cookie_v4_check")
int BPF_KPROBE(cookie4_check_kprobe, struct sock *sk)
{
	check_enter(sk);
	return 0;
}

SEC("kretprobe/cookie_v4_check")
int BPF_KRETPROBE(cookie4_check_kretprobe, struct sock *ret)
{
	check_exit(ret);
	return 0;
}

SEC("kprobe/cookie_v6_init_sequence")
int BPF_KPROBE(cookie6_sent_kprobe, struct sk_buff *skb)
{
	on_cookie_sent(skb);
	return 0;
}

SEC("kprobe/cookie_v6_check")
int BPF_KPROBE(cookie6_check_kprobe, struct sock *sk)
{
	check_enter(sk);
	return 0;
}

SEC("kretprobe/cookie_v6_check")
int BPF_KRETPROBE(cookie6_check_kretprobe, struct sock *ret)
{
	check_exit(ret);
	return 0;
}

// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

// (The build constraint above keeps the Go tool from treating this BPF C file
// as cgo source of package programs; clang ignores it.)
/*
 * accept_latency: time a connection waits in a listener's accept queue,
 * from the moment the kernel has it ready to the accept() that takes it,
 * per listening port, for TCP and Unix stream sockets.
 *
 * Why: with keepalives and a few busy NGINX workers, new connections
 * waited behind compute-heavy work while other workers sat idle; p99.9
 * latency was 4 times what it became with round-robin accept. Nothing in
 * procfs shows how long connections wait to be accepted.
 *
 * Kernel functions:
 *   tcp_v4_syn_recv_sock, tcp_v6_syn_recv_sock -> child   the handshake
 *       completed and the child socket is created; the kernel queues it
 *       right after (called through icsk_af_ops, so never inlined). Also
 *       the SYN-cookie and fast-open paths.
 *   inet_csk_accept(sk, ...) -> child                     TCP accept()
 *   unix_stream_connect(sock, ...) -> 0                   a Unix
 *       connection is queued; the server side socket is unix_peer(sock->sk)
 *   unix_accept(sock, newsock, ...) -> 0                  Unix accept();
 *       the server side socket is newsock->sk
 * The fexit programs read return values with bpf_get_func_ret (5.17+), as
 * the argument lists of inet_csk_accept and unix_accept changed in 6.10.
 * Hooks, chosen by the loader (alternatives): fexit, else kprobe/kretprobe.
 * A child that is never accepted (listener closed) leaves its start time
 * in an LRU map, which drops the oldest.
 *
 * Map accept_queue_wait_seconds (HASH):
 *   key   u16 port     listening port (0 for Unix sockets)
 *         u8 protocol  1 tcp, 2 unix
 *         u8 pad
 *         u32 bucket   exp2 slot of the wait in microseconds, 0..26;
 *                      27 holds the sum in microseconds
 *   value u64          connections accepted
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "kernel_exporter/maps.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define MAX_SLOT 26
#define MAX_PORTS 1024
#define PROTO_TCP 1
#define PROTO_UNIX 2

struct wait_key {
	__u16 port;
	__u8 protocol;
	__u8 pad;
	__u32 bucket;
};

/* Queued children: server-side sock -> time it was queued (ns). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct sock *);
	__type(value, __u64);
} queued SEC(".maps");

/* Argument of a call in progress, for kretprobes: thread -> pointer. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, void *);
} args SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_PORTS * (MAX_SLOT + 2));
	__type(key, struct wait_key);
	__type(value, __u64);
} accept_queue_wait_seconds SEC(".maps");

static __always_inline void on_queued(struct sock *child)
{
	__u64 now = bpf_ktime_get_ns();

	if (child)
		ke_update(&queued, &child, &now, BPF_ANY);
}

static __always_inline void on_accepted(struct sock *child, __u8 protocol)
{
	struct wait_key key = { .protocol = protocol };
	__u64 *ts, us;

	if (!child)
		return;
	ts = bpf_map_lookup_elem(&queued, &child);
	if (!ts)
		return;
	us = (bpf_ktime_get_ns() - *ts) / 1000;
	bpf_map_delete_elem(&queued, &child);
	if (protocol == PROTO_TCP)
		key.port = BPF_CORE_READ(child, __sk_common.skc_num);
	ke_observe(ke_add, &accept_queue_wait_seconds, key, ke_exp2_slot(us), us, MAX_SLOT);
}

/* The server side of a Unix connection just queued by sock. */
static __always_inline void on_unix_connected(struct socket *sock)
{
	struct unix_sock *u = (struct unix_sock *)BPF_CORE_READ(sock, sk);

	if (u)
		on_queued(BPF_CORE_READ(u, peer));
}

static __always_inline void save_arg(void *p)
{
	__u64 id = bpf_get_current_pid_tgid();

	ke_update(&args, &id, &p, BPF_ANY);
}

static __always_inline void *take_arg(void)
{
	__u64 id = bpf_get_current_pid_tgid();
	void **p = bpf_map_lookup_elem(&args, &id), *v;

	if (!p)
		return 0;
	v = *p;
	bpf_map_delete_elem(&args, &id);
	return v;
}

/* fexit */

SEC("fexit/tcp_v4_syn_recv_sock")
int BPF_PROG(tcp4_queued_fexit)
{
	__u64 ret = 0;

	bpf_get_func_ret(ctx, &ret);
	on_queued((struct sock *)ret);
	return 0;
}

SEC("fexit/tcp_v6_syn_recv_sock")
int BPF_PROG(tcp6_queued_fexit)
{
	__u64 ret = 0;

	bpf_get_func_ret(ctx, &ret);
	on_queued((struct sock *)ret);
	return 0;
}

SEC("fexit/inet_csk_accept")
int BPF_PROG(tcp_accept_fexit)
{
	__u64 ret = 0;

	bpf_get_func_ret(ctx, &ret);
	on_accepted((struct sock *)ret, PROTO_TCP);
	return 0;
}

SEC("fexit/unix_stream_connect")
int BPF_PROG(unix_queued_fexit, struct socket *sock)
{
	__u64 ret = 1;

	bpf_get_func_ret(ctx, &ret);
	if ((int)ret == 0)
		on_unix_connected(sock);
	return 0;
}

SEC("fexit/unix_accept")
int BPF_PROG(unix_accept_fexit, struct socket *sock, struct socket *newsock)
{
	__u64 ret = 1;

	bpf_get_func_ret(ctx, &ret);
	if ((int)ret == 0)
		on_accepted(BPF_CORE_READ(newsock, sk), PROTO_UNIX);
	return 0;
}

/* kprobe/kretprobe */

SEC("kretprobe/tcp_v4_syn_recv_sock")
int BPF_KRETPROBE(tcp4_queued_kretprobe, struct sock *child)
{
	on_queued(child);
	return 0;
}

SEC("kretprobe/tcp_v6_syn_recv_sock")
int BPF_KRETPROBE(tcp6_queued_kretprobe, struct sock *child)
{
	on_queued(child);
	return 0;
}

SEC("kretprobe/inet_csk_accept")
int BPF_KRETPROBE(tcp_accept_kretprobe, struct sock *child)
{
	on_accepted(child, PROTO_TCP);
	return 0;
}

SEC("kprobe/unix_stream_connect")
int BPF_KPROBE(unix_queued_kprobe, struct socket *sock)
{
	save_arg(sock);
	return 0;
}

SEC("kretprobe/unix_stream_connect")
int BPF_KRETPROBE(unix_queued_kretprobe, int ret)
{
	struct socket *sock = take_arg();

	if (sock && ret == 0)
		on_unix_connected(sock);
	return 0;
}

SEC("kprobe/unix_accept")
int BPF_KPROBE(unix_accept_kprobe, struct socket *sock, struct socket *newsock)
{
	save_arg(newsock);
	return 0;
}

SEC("kretprobe/unix_accept")
int BPF_KRETPROBE(unix_accept_kretprobe, int ret)
{
	struct socket *newsock = take_arg();

	if (newsock && ret == 0)
		on_accepted(BPF_CORE_READ(newsock, sk), PROTO_UNIX);
	return 0;
}

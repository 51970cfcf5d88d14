// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

// (The build constraint above keeps the Go tool from treating this BPF C file
// as cgo source of package programs; clang ignores it.)
/*
 * port_exhaustion: connect() calls that failed with EADDRNOTAVAIL (no free
 * local port for the destination), by network namespace, destination port
 * range and address family; and, where kprobes or fentry exist, how many
 * ports inet_hash_connect checked before it found one or gave up.
 *
 * Why: ephemeral port exhaustion (a client opening short connections to
 * one service faster than TIME_WAIT frees them, or a proxy with a narrow
 * ip_local_port_range) makes connect() fail with EADDRNOTAVAIL, and long
 * before that makes each connect() walk more and more ports. procfs has no
 * counter for either; the network namespace tells which container it is.
 *
 * Kernel sources:
 *   syscalls:sys_exit_connect (tracefs tracepoint, CONFIG_FTRACE_SYSCALLS,
 *       since 2.6.33): a return of -EADDRNOTAVAIL (-99) is counted in the
 *       caller's network namespace (current->nsproxy->net_ns->ns.inum, what
 *       /proc/<pid>/ns/net shows), with the destination's family and port
 *       read from the user's sockaddr (4 bytes). Where bpf_task_pt_regs
 *       exists (5.15+) the sockaddr pointer is taken from the registers
 *       saved at syscall entry, and a successful connect costs one
 *       comparison; else (alternatives, group "connect") sys_enter_connect
 *       reads the destination of every connect and keeps it per thread
 *       until the exit. Non-blocking connects fail synchronously too.
 *   __inet_hash_connect (net/ipv4/inet_hashtables.c, called for IPv4 and
 *       IPv6 since 4.x), __inet_check_established and
 *       __inet6_check_established (its check_established callbacks, called
 *       through a pointer so never inlined): the number of callback calls
 *       during one __inet_hash_connect is the number of ports that were in
 *       use by connections and had to be checked for a 4-tuple collision
 *       (ports with no bind bucket are taken at once, ports bound by bind()
 *       are skipped without a check). From 6.13 a lockless pre-check may
 *       call the callback twice for one port. Hooks, chosen by the loader
 *       (alternatives, optional group): fentry/fexit (the fexit reads the
 *       return value with bpf_get_func_ret, 5.17+), else kprobe/kretprobe;
 *       on a kernel with neither the connect counts still run.
 *
 * Misses: connects through io_uring (IORING_OP_CONNECT), 32-bit tasks'
 * syscalls, and EADDRNOTAVAIL from sendmsg() with MSG_FASTOPEN or on an
 * unconnected UDP socket.
 *
 * Map connect_addr_not_avail_total (HASH), key struct fail_key, 12 bytes:
 *   offset 0  u32 netns     network namespace inode number
 *   offset 4  u16 port_min  destination port range, host order: a port
 *   offset 6  u16 port_max  below 1024 is its own range (min = max), the
 *                           others fall in blocks of 1024 (1024-2047 ...
 *                           64512-65535)
 *   offset 8  u32 family    AF_INET 2, AF_INET6 10
 *   value u64: failed connects.
 * Map inet_hash_connect_ports_checked (HASH), key u32 result (0 a port
 *   was found, 1 EADDRNOTAVAIL, 2 another error), u32 bucket (exp2zero
 *   slot of the ports checked, 0..16; 17 holds the sum), value u64.
 *
 * Label bounds: 1087 port ranges at most, in practice the few services a
 * host connects to; network namespaces are those that run out of ports.
 * The failure map holds 4096 keys.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "kernel_exporter/maps.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define AF_INET		2
#define AF_INET6	10
#define EADDRNOTAVAIL	99
#define MAX_SLOT	16
#define MAX_KEYS	4096

struct fail_key {
	__u32 netns;
	__u16 port_min;
	__u16 port_max;
	__u32 family;
};
_Static_assert(sizeof(struct fail_key) == 12, "port_exhaustion.yaml expects a 12-byte key");

struct search_key {
	__u32 result;
	__u32 bucket;
};

/* Destination of a connect() in progress: thread -> family, port. */
struct dest {
	__u16 family;
	__u16 port; /* network order */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct dest);
} connecting SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_KEYS);
	__type(key, struct fail_key);
	__type(value, __u64);
} connect_addr_not_avail_total SEC(".maps");

/* Ports checked so far by an __inet_hash_connect in progress, per thread. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, __u32);
} searching SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 3 * (MAX_SLOT + 2));
	__type(key, struct search_key);
	__type(value, __u64);
} inet_hash_connect_ports_checked SEC(".maps");

static __always_inline void count_failure(struct dest *d)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct fail_key key = {};
	__u16 port = bpf_ntohs(d->port);

	key.family = d->family;
	if (port < 1024) {
		key.port_min = key.port_max = port;
	} else {
		key.port_min = port & ~1023;
		key.port_max = key.port_min + 1023;
	}
	key.netns = BPF_CORE_READ(task, nsproxy, net_ns, ns.inum);
	ke_add(&connect_addr_not_avail_total, &key, 1);
}

/*
 * Exit only (5.15+: bpf_task_pt_regs): nothing runs at entry, and at exit
 * only a failed connect reads its arguments, from the user registers saved
 * at syscall entry (x86-64: si = uservaddr, dx = addrlen; arm64: regs[1],
 * regs[2]), which the syscall does not change. 32-bit tasks' syscalls
 * never reach the syscalls: tracepoints.
 */
SEC("tracepoint/syscalls/sys_exit_connect")
int connect_exit_regs(struct trace_event_raw_sys_exit *ctx)
{
	struct pt_regs *regs;
	const void *uaddr;
	struct dest d;
	long len;

	if (ctx->ret != -EADDRNOTAVAIL)
		return 0;
	regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	if (!regs)
		return 0;
#if defined(__TARGET_ARCH_x86)
	uaddr = (const void *)BPF_CORE_READ(regs, si);
	len = BPF_CORE_READ(regs, dx);
#elif defined(__TARGET_ARCH_arm64)
	uaddr = (const void *)BPF_CORE_READ(regs, regs[1]);
	len = BPF_CORE_READ(regs, regs[2]);
#else
#error "port_exhaustion.bpf.c: unsupported __TARGET_ARCH"
#endif
	if ((int)len < 4 || bpf_probe_read_user(&d, sizeof(d), uaddr))
		return 0;
	if (d.family == AF_INET || d.family == AF_INET6)
		count_failure(&d);
	return 0;
}

/* Entry and exit (any kernel): the destination is kept per thread. */
SEC("tracepoint/syscalls/sys_enter_connect")
int connect_enter(struct trace_event_raw_sys_enter *ctx)
{
	const void *uaddr = (const void *)ctx->args[1];
	__u64 id = bpf_get_current_pid_tgid();
	struct dest d;

	if ((long)ctx->args[2] < 4 || bpf_probe_read_user(&d, sizeof(d), uaddr))
		return 0;
	if (d.family != AF_INET && d.family != AF_INET6)
		return 0;
	ke_update(&connecting, &id, &d, BPF_ANY);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_connect")
int connect_exit(struct trace_event_raw_sys_exit *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct dest *d;

	d = bpf_map_lookup_elem(&connecting, &id);
	if (!d)
		return 0;
	if (ctx->ret == -EADDRNOTAVAIL)
		count_failure(d);
	bpf_map_delete_elem(&connecting, &id);
	return 0;
}

static __always_inline void search_start(void)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 zero = 0;

	ke_update(&searching, &id, &zero, BPF_ANY);
}

static __always_inline void port_checked(void)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 *n = bpf_map_lookup_elem(&searching, &id);

	if (n)
		*n += 1; /* only this thread touches its entry */
}

static __always_inline void search_end(int ret)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct search_key key = {};
	__u32 *n = bpf_map_lookup_elem(&searching, &id), v;

	if (!n)
		return;
	v = *n;
	bpf_map_delete_elem(&searching, &id);
	key.result = ret == 0 ? 0 : ret == -EADDRNOTAVAIL ? 1 : 2;
	ke_observe(ke_add, &inet_hash_connect_ports_checked, key, ke_exp2zero_slot(v), v, MAX_SLOT);
}

/* fentry/fexit */

SEC("fentry/__inet_hash_connect")
int BPF_PROG(hash_connect_fentry)
{
	search_start();
	return 0;
}

SEC("fexit/__inet_hash_connect")
int BPF_PROG(hash_connect_fexit)
{
	__u64 ret = 0;

	bpf_get_func_ret(ctx, &ret);
	search_end((int)ret);
	return 0;
}

SEC("fentry/__inet_check_established")
int BPF_PROG(check4_fentry)
{
	port_checked();
	return 0;
}

SEC("fentry/__inet6_check_established")
int BPF_PROG(check6_fentry)
{
	port_checked();
	return 0;
}

/* kprobe/kretprobe */

SEC("kprobe/__inet_hash_connect")
int BPF_KPROBE(hash_connect_kprobe)
{
	search_start();
	return 0;
}

SEC("kretprobe/__inet_hash_connect")
int BPF_KRETPROBE(hash_connect_kretprobe, int ret)
{
	search_end(ret);
	return 0;
}

SEC("kprobe/__inet_check_established")
int BPF_KPROBE(check4_kprobe)
{
	port_checked();
	return 0;
}

SEC("kprobe/__inet6_check_established")
int BPF_KPROBE(check6_kprobe)
{
	port_checked();
	return 0;
}

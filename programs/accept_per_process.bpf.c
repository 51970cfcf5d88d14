// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

// (The build constraint above keeps the Go tool from treating this BPF C file
// as cgo source of package programs; clang ignores it.)
/*
 * accept_per_process: connections accepted, by listening port, address
 * family and the accepting process (pid and command name).
 *
 * Why: with keepalives, connections went mostly to a few NGINX workers,
 * which ran at 51% CPU while others ran at 16% (open sockets per worker
 * from 867 to 2357). All workers are called "nginx": only counts per
 * process show that one worker accepts far more than its siblings.
 *
 * Kernel source: tracefs tracepoints syscalls:sys_exit_accept4 and
 * syscalls:sys_exit_accept (CONFIG_FTRACE_SYSCALLS, since 2.6.33), which
 * fire only for those two syscalls, with ret the new file descriptor. The
 * accepted socket is found through the task's file table
 * (current->files->fdt->fd[ret]->private_data, read with CO-RE); its local
 * port is the listener's port, its family the listener's. On 5.11+
 * (bpf_get_current_task_btf) the task's fields are plain loads; older
 * kernels read them with helpers (alternatives, group "accept"). Unix sockets
 * have no port (0). The new fd cannot have been closed yet: the syscall
 * has not returned to user space.
 *
 * Misses: accepts through io_uring (IORING_OP_ACCEPT does not go through
 * the syscall), and accepts by 32-bit (ia32) tasks, whose syscalls are
 * other tracepoints.
 *
 * Map accepted_connections_total (LRU_HASH), key struct accept_key,
 * 24 bytes:
 *   offset 0  u32 pid      thread group id (the process) that accepted
 *   offset 4  u16 port     listening port, host order (0 for Unix)
 *   offset 6  u8 family    AF_UNIX 1, AF_INET 2, AF_INET6 10
 *   offset 7  u8 pad
 *   offset 8  char comm[16] command name of the accepting thread
 *   value u64: connections accepted.
 *
 * Label bounds: pids come and go, so the map is an LRU hash of MAX_KEYS
 * (4096) keys: when full, the key least recently accepted on is evicted
 * (its counter starts again from 0 if that process accepts again, a
 * counter reset that rate() handles). The exporter drops series not seen
 * for the config's ttl.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "kernel_exporter/maps.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define MAX_KEYS	4096
#define AF_UNIX		1
#define AF_INET		2
#define AF_INET6	10

struct accept_key {
	__u32 pid;
	__u16 port;
	__u8 family;
	__u8 pad;
	char comm[16];
};
_Static_assert(sizeof(struct accept_key) == 24, "accept_per_process.yaml expects a 24-byte key");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, MAX_KEYS);
	__type(key, struct accept_key);
	__type(value, __u64);
} accepted_connections_total SEC(".maps");

static __always_inline void count(struct sock *sk)
{
	struct accept_key key = {};

	key.family = BPF_CORE_READ(sk, __sk_common.skc_family);
	if (key.family == AF_INET || key.family == AF_INET6)
		key.port = BPF_CORE_READ(sk, __sk_common.skc_num);
	key.pid = bpf_get_current_pid_tgid() >> 32;
	bpf_get_current_comm(key.comm, sizeof(key.comm));
	ke_add(&accepted_connections_total, &key, 1);
}

/* Any kernel: every pointer read with bpf_probe_read_kernel (CO-RE). */
static __always_inline void on_accepted(long fd)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct fdtable *fdt;
	struct file **fds, *file = 0;
	struct socket *sock;
	struct sock *sk;
	unsigned int max;

	if (fd < 0)
		return;
	fdt = BPF_CORE_READ(task, files, fdt);
	max = BPF_CORE_READ(fdt, max_fds);
	if (fd >= max)
		return;
	fds = BPF_CORE_READ(fdt, fd);
	if (bpf_probe_read_kernel(&file, sizeof(file), &fds[fd]) || !file)
		return;
	sock = BPF_CORE_READ(file, private_data);
	sk = BPF_CORE_READ(sock, sk);
	if (sk)
		count(sk);
}

/*
 * 5.11+ (bpf_get_current_task_btf): the task's fields are plain loads
 * through its BTF pointer; only the fd array slot (a variable index) and
 * the socket behind the file are read with helpers.
 */
static __always_inline void on_accepted_btf(long fd)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct fdtable *fdt = task->files->fdt;
	struct file **fds = fdt->fd, *file = 0;
	struct socket *sock;
	struct sock *sk;

	if (fd < 0 || fd >= fdt->max_fds)
		return;
	if (bpf_probe_read_kernel(&file, sizeof(file), &fds[fd]) || !file)
		return;
	sock = BPF_CORE_READ(file, private_data);
	sk = BPF_CORE_READ(sock, sk);
	if (sk)
		count(sk);
}

SEC("tracepoint/syscalls/sys_exit_accept4")
int accept4_exit_btf(struct trace_event_raw_sys_exit *ctx)
{
	on_accepted_btf(ctx->ret);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_accept")
int accept_exit_btf(struct trace_event_raw_sys_exit *ctx)
{
	on_accepted_btf(ctx->ret);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_accept4")
int accept4_exit(struct trace_event_raw_sys_exit *ctx)
{
	on_accepted(ctx->ret);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_accept")
int accept_exit(struct trace_event_raw_sys_exit *ctx)
{
	on_accepted(ctx->ret);
	return 0;
}

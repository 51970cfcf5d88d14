// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

/*
 * Test program of the compatibility suite (compat_labels_test.go): the
 * label decoders, padding, kaddrs and cgroup_id_map of
 * cloudflare/ebpf_exporter v2, with keys laid out as its examples lay
 * theirs out. Each pread64(2) on the magic fd -4243 (which fails with
 * EBADF) is one event: its buf argument points to a struct compat_input
 * the test filled, its count argument is the "code" label.
 *
 * Kernel source: raw tracepoint sys_enter (raw_tp/, since 4.17; args: the
 * caller's pt_regs and the syscall number) stashes the arguments by
 * thread; BTF tracepoint sys_exit (tp_btf/, since 5.5; args: pt_regs and
 * the return value) counts the event. x86_64 register names.
 *
 * Maps (HASH; values u64 events):
 *   compat_calls_total (28-byte key): comm[16] (string, regexp), u8 code +
 *     3 bytes of padding (static_map, allow_unknown), u32 syscall number
 *     (syscall), u32 errno (errno: the negated return value).
 *   compat_bytes_total (88-byte key): the struct compat_input copied
 *     (inet_ip 4 and 16 bytes, dname 32, hex 4, majorminor u32, ifname
 *     u32), comm[16] (string, regexp with a capture group), u64 the
 *     address of the kaddrs symbol do_syscall_64 (ksym).
 *   compat_cgroup_calls_total (8-byte key): u64 cgroup id (cgroup), only
 *     for cgroups in compat_cgroup_ids, the config's cgroup_id_map.
 *   compat_kstack_total (64-byte key): u64[8] kernel stack at sys_exit
 *     (kstack).
 *   compat_cgroup_ids: the cgroup_id_map (HASH, u64 id → u64 1).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define MAGIC_FD -4243
#define NR_PREAD64 17 /* x86_64 */

/* Filled by the exporter from kaddrs (the symbol's kallsyms address). */
const volatile __u64 kaddr_do_syscall_64 = 0;

struct compat_input {
	__u8 ip4[4];
	__u8 ip6[16];
	__u8 dname[32];
	__u8 hex[4];
	__u32 dev;
	__u32 ifindex;
};

struct calls_key {
	char comm[16];
	__u8 code;
	__u8 pad[3];
	__u32 syscall;
	__u32 err;
};

struct bytes_key {
	struct compat_input in;
	char comm[16];
	__u64 kaddr;
};

struct stack_key {
	__u64 stack[8];
};

struct stash {
	__u64 buf;
	__u64 code;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, struct calls_key);
	__type(value, __u64);
} compat_calls_total SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, struct bytes_key);
	__type(value, __u64);
} compat_bytes_total SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u64);
	__type(value, __u64);
} compat_cgroup_calls_total SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, struct stack_key);
	__type(value, __u64);
} compat_kstack_total SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u64);
	__type(value, __u64);
} compat_cgroup_ids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct stash);
} compat_stash SEC(".maps");

/* One scratch key per CPU: bytes_key is too large for the stack budget
 * together with the others. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct bytes_key);
} compat_scratch SEC(".maps");

static __always_inline void incr(void *map, void *key)
{
	__u64 one = 1, *v = bpf_map_lookup_elem(map, key);

	if (v) {
		__sync_fetch_and_add(v, 1);
		return;
	}
	if (bpf_map_update_elem(map, key, &one, BPF_NOEXIST) != 0) {
		v = bpf_map_lookup_elem(map, key);
		if (v)
			__sync_fetch_and_add(v, 1);
	}
}

SEC("raw_tp/sys_enter")
int compat_labels_enter(struct bpf_raw_tracepoint_args *ctx)
{
	struct pt_regs *regs = (struct pt_regs *)ctx->args[0];
	struct stash s = {};
	__u32 tid = (__u32)bpf_get_current_pid_tgid();

	if (ctx->args[1] != NR_PREAD64 || (int)BPF_CORE_READ(regs, di) != MAGIC_FD)
		return 0;
	s.buf = BPF_CORE_READ(regs, si);
	s.code = BPF_CORE_READ(regs, dx);
	bpf_map_update_elem(&compat_stash, &tid, &s, BPF_ANY);
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(compat_labels_exit, struct pt_regs *regs, long ret)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid(), zero = 0;
	struct calls_key ck = {};
	struct stack_key sk = {};
	struct bytes_key *bk;
	struct stash *s;
	__u64 cg;

	s = bpf_map_lookup_elem(&compat_stash, &tid);
	if (!s)
		return 0;

	bpf_get_current_comm(ck.comm, sizeof(ck.comm));
	ck.code = (__u8)s->code;
	ck.syscall = NR_PREAD64;
	ck.err = ret < 0 ? (__u32)-ret : 0;
	incr(&compat_calls_total, &ck);

	bk = bpf_map_lookup_elem(&compat_scratch, &zero);
	if (bk) {
		__builtin_memset(bk, 0, sizeof(*bk));
		bpf_probe_read_user(&bk->in, sizeof(bk->in), (void *)s->buf);
		__builtin_memcpy(bk->comm, ck.comm, sizeof(bk->comm));
		bk->kaddr = kaddr_do_syscall_64;
		incr(&compat_bytes_total, bk);
	}

	cg = bpf_get_current_cgroup_id();
	if (bpf_map_lookup_elem(&compat_cgroup_ids, &cg))
		incr(&compat_cgroup_calls_total, &cg);

	if (bpf_get_stack(ctx, sk.stack, sizeof(sk.stack), 0) > 0)
		incr(&compat_kstack_total, &sk);

	bpf_map_delete_elem(&compat_stash, &tid);
	return 0;
}

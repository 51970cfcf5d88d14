// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

/*
 * Test program for the value kinds test (values_test.go): a gauge, a
 * two-field struct value and a per-CPU histogram, each set from the
 * arguments of a syscall that the test makes on a bad file descriptor
 * (-1: the call fails with EBADF before it touches anything), keyed by
 * the caller's tgid so that other processes never mix in. The Go runtime
 * makes none of these calls on fd -1.
 *
 * values_offset (HASH): key u32 tgid, value s64: the offset of the
 *   caller's last lseek(-1, offset, whence), a gauge.
 * values_io (HASH): key u32 tgid, value struct io { u64 bytes; u32 calls;
 *   u32 pad; }: pwrite64(-1, buf, count, pos) calls and their counts.
 * values_count (PERCPU_HASH): key { u32 tgid; u32 bucket }, value u64:
 *   pread64(-1, buf, count, pos) calls by exp2 slot of count (the
 *   smallest k with count <= 2^k), per CPU.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* x86_64 syscall numbers */
#define NR_LSEEK 8
#define NR_PREAD64 17
#define NR_PWRITE64 18

struct io {
	__u64 bytes;
	__u32 calls;
	__u32 pad;
};

struct count_key {
	__u32 tgid;
	__u32 bucket;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __s64);
} values_offset SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct io);
} values_io SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 1024);
	__type(key, struct count_key);
	__type(value, __u64);
} values_count SEC(".maps");

SEC("tracepoint/raw_syscalls/sys_enter")
int values_sys_enter(struct trace_event_raw_sys_enter *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	long id = ctx->id;

	if ((int)ctx->args[0] != -1)
		return 0;
	if (id == NR_LSEEK) {
		__s64 off = (__s64)ctx->args[1];

		bpf_map_update_elem(&values_offset, &tgid, &off, BPF_ANY);
	} else if (id == NR_PWRITE64) {
		struct io zero = {}, *io;

		io = bpf_map_lookup_elem(&values_io, &tgid);
		if (!io) {
			bpf_map_update_elem(&values_io, &tgid, &zero, BPF_NOEXIST);
			io = bpf_map_lookup_elem(&values_io, &tgid);
			if (!io)
				return 0;
		}
		__sync_fetch_and_add(&io->bytes, ctx->args[2]);
		__sync_fetch_and_add(&io->calls, 1);
	} else if (id == NR_PREAD64) {
		struct count_key key = { .tgid = tgid };
		__u64 count = ctx->args[2], one = 1, *v;
		__u32 k;

		for (k = 0; k < 63; k++)
			if (count <= (1ULL << k))
				break;
		key.bucket = k;
		v = bpf_map_lookup_elem(&values_count, &key);
		if (v)
			*v += 1; /* this CPU's value: no other CPU writes it */
		else
			bpf_map_update_elem(&values_count, &key, &one, BPF_NOEXIST);
	}
	return 0;
}

// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

/*
 * The common mistakes of a program's author, one per -D flag, for the
 * loader's messages (hints_test.go, which compiles it at test time). Each
 * variant counts getppid(2) calls by process in hints_calls_total (HASH,
 * key struct hints_key { __u32 pid; }, value u64 calls):
 *
 *   -DNO_LICENSE    no license section; calls no GPL-only helper, so it
 *                   loads (--config.check warns)
 *   -DGPL_HELPER    no license section, and reads the command name with
 *                   bpf_probe_read_kernel_str, GPL-only: refused
 *   -DCTX_LOOP      a loop over a stack array bounded by a syscall
 *                   argument: the index runs past the array
 *   -DNO_NULL_CHECK the map value is used without a NULL check
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#if !defined(NO_LICENSE) && !defined(GPL_HELPER)
char LICENSE[] SEC("license") = "Dual BSD/GPL";
#endif

struct hints_key {
	__u32 pid;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct hints_key);
	__type(value, __u64);
} hints_calls_total SEC(".maps");

SEC("tracepoint/syscalls/sys_enter_getppid")
int count_getppid(struct trace_event_raw_sys_enter *ctx)
{
	struct hints_key key = { .pid = bpf_get_current_pid_tgid() >> 32 };
	__u64 *v;

#ifdef GPL_HELPER
	char comm[16];
	bpf_probe_read_kernel_str(comm, sizeof(comm), (void *)ctx);
	key.pid ^= comm[0];
#endif
#ifdef CTX_LOOP
	char buf[16] = {};
	long n = ctx->args[0];
	for (long i = 0; i < n; i++)
		key.pid += buf[i & 0xff];
#endif
	v = bpf_map_lookup_elem(&hints_calls_total, &key);
#ifdef NO_NULL_CHECK
	__sync_fetch_and_add(v, 1);
#else
	if (v) {
		__sync_fetch_and_add(v, 1);
	} else {
		__u64 one = 1;

		bpf_map_update_elem(&hints_calls_total, &key, &one, BPF_NOEXIST);
	}
#endif
	return 0;
}

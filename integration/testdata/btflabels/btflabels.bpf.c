// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

/*
 * Test program for labels inferred from BTF (btf_labels_test.go): its YAML
 * gives no labels, so the exporter takes them from the key structs below.
 * Counts getppid(2), getpgrp(2), getsid(2) and getpriority(2) calls by
 * process, command name and call; the Go runtime makes none of them, so the
 * test's counts are exact.
 *
 * Map btfl_calls_total (HASH), key struct btfl_key (24 bytes: comm at 0,
 * pid at 16, call at 20, 3 bytes of tail padding), value u64 calls.
 * Map btfl_call_slots (HASH), key struct btfl_slot_key (12 bytes: pid at 0,
 * call at 4, 3 bytes padding, bucket at 8), value u64: every call in slot 3.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "kernel_exporter/maps.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* x86_64 syscall numbers */
#define NR_GETPPID     110
#define NR_GETPGRP     111
#define NR_GETSID      124
#define NR_GETPRIORITY 140

/* One byte wide: the key structs get padding after it. */
enum btfl_call {
	BTFL_GETPPID = 1,
	BTFL_GETPGRP = 2,
	BTFL_GETSID = 5,
} __attribute__((packed));

/* getpriority is counted with a value the enum does not name. */
#define BTFL_UNNAMED 9

struct btfl_key {
	char comm[16];
	__u32 pid;
	enum btfl_call call;
};

struct btfl_slot_key {
	__u32 pid;
	enum btfl_call call;
	__u32 bucket;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 10240);
	__type(key, struct btfl_key);
	__type(value, __u64);
} btfl_calls_total SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 10240);
	__type(key, struct btfl_slot_key);
	__type(value, __u64);
} btfl_call_slots SEC(".maps");

SEC("tracepoint/raw_syscalls/sys_enter")
int btfl_sys_enter(struct trace_event_raw_sys_enter *ctx)
{
	struct btfl_key key;
	struct btfl_slot_key skey;
	__u8 call;

	switch (ctx->id) {
	case NR_GETPPID:
		call = BTFL_GETPPID;
		break;
	case NR_GETPGRP:
		call = BTFL_GETPGRP;
		break;
	case NR_GETSID:
		call = BTFL_GETSID;
		break;
	case NR_GETPRIORITY:
		call = BTFL_UNNAMED;
		break;
	default:
		return 0;
	}
	__builtin_memset(&key, 0, sizeof(key));
	bpf_get_current_comm(key.comm, sizeof(key.comm));
	key.pid = bpf_get_current_pid_tgid() >> 32;
	key.call = call;
	ke_add(&btfl_calls_total, &key, 1);

	__builtin_memset(&skey, 0, sizeof(skey));
	skey.pid = key.pid;
	skey.call = call;
	skey.bucket = 3;
	ke_add(&btfl_call_slots, &skey, 1);
	return 0;
}

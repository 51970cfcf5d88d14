// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

/*
 * Test program for labels checked against the key's BTF
 * (key_labels_test.go): issue 32's signal counter. Counts signals
 * generated (signal:signal_generate) by signal number and the sender's
 * command name.
 *
 * Map kl_signals_total (HASH), key struct kl_key (20 bytes: sig at 0,
 * comm at 4), value u64 signals.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct kl_key {
	__u32 sig;
	char comm[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct kl_key);
	__type(value, __u64);
} kl_signals_total SEC(".maps");

SEC("tracepoint/signal/signal_generate")
int kl_signal_generate(struct trace_event_raw_signal_generate *ctx)
{
	struct kl_key key;
	__u64 one = 1, *v;

	__builtin_memset(&key, 0, sizeof(key));
	key.sig = ctx->sig;
	bpf_get_current_comm(key.comm, sizeof(key.comm));
	v = bpf_map_lookup_elem(&kl_signals_total, &key);
	if (v)
		__sync_fetch_and_add(v, 1);
	else
		bpf_map_update_elem(&kl_signals_total, &key, &one, BPF_NOEXIST);
	return 0;
}

// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

/*
 * Test program for perf_event programs: counts samples by CPU and by the
 * command name of the task that was running.
 *
 * Map perf_samples_total (HASH): key {u32 cpu; char comm[16]}, value u64.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "kernel_exporter/maps.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct sample_key {
	__u32 cpu;
	char comm[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct sample_key);
	__type(value, __u64);
} perf_samples_total SEC(".maps");

/* PERF_SECTION lets a test carry the event in the section name, as in
 * -DPERF_SECTION='"perf_event/type=1,config=0,frequency=1000"'. */
#ifndef PERF_SECTION
#define PERF_SECTION "perf_event"
#endif

SEC(PERF_SECTION)
int on_sample(struct bpf_perf_event_data *ctx)
{
	struct sample_key key = {};

	key.cpu = bpf_get_smp_processor_id();
	bpf_get_current_comm(key.comm, sizeof(key.comm));
	ke_add(&perf_samples_total, &key, 1);
	return 0;
}

// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

// (The build constraint above keeps the Go tool from treating this BPF C file
// as cgo source of package programs; clang ignores it.)

/*
 * llc: last-level cache references and misses per CPU, from the hardware
 * performance counters, so that the LLC hit rate per CPU is a PromQL
 * expression: 1 - rate(misses) / rate(references).
 *
 * Why: a falling LLC hit rate explains a falling IPC: a working set that
 * outgrew the cache, or a neighbour (another container, a batch job)
 * evicting it. The exporter talk (incident 6) names the LLC hit rate per
 * CPU among the signals an exporter should give.
 *
 * Kernel source: the perf_event subsystem, hardware events
 * "cache-references" (PERF_COUNT_HW_CACHE_REFERENCES) and "cache-misses"
 * (PERF_COUNT_HW_CACHE_MISSES). On Intel CPUs the kernel maps them to the
 * architectural "LLC Reference" and "LLC Misses" events; on AMD Zen and
 * other CPUs the kernel chooses the closest events its PMU driver has
 * (arch/x86/events/amd/core.c), which may count a lower cache level. Opened
 * on every online CPU, for all tasks, in sampling mode with a fixed period
 * (llc.yaml); each overflow runs the program, which adds
 * ctx->sample_period to the CPU's total. Needs a PMU, like ipc.
 *
 * Maps cpu_llc_references_total and cpu_llc_misses_total (HASH, up to 4096
 * CPUs):
 *   key   u32 cpu     CPU number (4 bytes)
 *   value u64         events counted on that CPU
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "kernel_exporter/maps.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u64);
} cpu_llc_references_total SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u64);
} cpu_llc_misses_total SEC(".maps");

SEC("perf_event")
int on_llc_references(struct bpf_perf_event_data *ctx)
{
	__u32 cpu = bpf_get_smp_processor_id();

	ke_add(&cpu_llc_references_total, &cpu, ctx->sample_period);
	return 0;
}

SEC("perf_event")
int on_llc_misses(struct bpf_perf_event_data *ctx)
{
	__u32 cpu = bpf_get_smp_processor_id();

	ke_add(&cpu_llc_misses_total, &cpu, ctx->sample_period);
	return 0;
}

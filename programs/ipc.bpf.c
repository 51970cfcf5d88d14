// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

// (The build constraint above keeps the Go tool from treating this BPF C file
// as cgo source of package programs; clang ignores it.)

/*
 * ipc: CPU cycles and retired instructions per CPU, from the hardware
 * performance counters, so that instructions per cycle (IPC) per CPU is a
 * PromQL ratio of two rates.
 *
 * Why: CPU utilisation says a CPU is busy, not whether it gets work done.
 * IPC falls when a CPU stalls on memory (cache misses, remote NUMA memory,
 * a noisy neighbour thrashing the LLC), on locks, or after a change that
 * grew the working set; the exporter talk (incident 6) names IPC per CPU
 * among the signals an exporter should give.
 *
 * Kernel source: the perf_event subsystem. The exporter opens the hardware
 * events "cycles" (PERF_COUNT_HW_CPU_CYCLES) and "instructions"
 * (PERF_COUNT_HW_INSTRUCTIONS) on every online CPU, for all tasks, in
 * sampling mode with a fixed period (ipc.yaml), and attaches one program to
 * each. The counter overflows every `period` events and runs the program,
 * which adds ctx->sample_period (the events the sample stands for) to the
 * CPU's total. The totals therefore lag the hardware by less than one
 * period per CPU. Needs a PMU: bare metal, or a VM that exposes one (KVM
 * with a host CPU model); absent PMUs make the config fail with "hardware
 * perf events not supported by this kernel or machine".
 *
 * Maps cpu_cycles_total and cpu_instructions_total (HASH, up to 4096 CPUs):
 *   key   u32 cpu     CPU number (4 bytes)
 *   value u64         events counted on that CPU
 * Only the sampled CPU's own key is written (atomically), from NMI context.
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
} cpu_cycles_total SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u64);
} cpu_instructions_total SEC(".maps");

SEC("perf_event")
int on_cycles(struct bpf_perf_event_data *ctx)
{
	__u32 cpu = bpf_get_smp_processor_id();

	ke_add(&cpu_cycles_total, &cpu, ctx->sample_period);
	return 0;
}

SEC("perf_event")
int on_instructions(struct bpf_perf_event_data *ctx)
{
	__u32 cpu = bpf_get_smp_processor_id();

	ke_add(&cpu_instructions_total, &cpu, ctx->sample_period);
	return 0;
}

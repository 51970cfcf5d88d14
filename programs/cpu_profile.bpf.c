// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

// (The build constraint above keeps the Go tool from treating this BPF C file
// as cgo source of package programs; clang ignores it.)
/*
 * cpu_profile: on-CPU samples by leaf kernel function and command name, as
 * counters: the flame graph's widest kernel frames as a metric that a fleet
 * graphs and alerts on over time and across kernel versions.
 *
 * Why: the Stretch regression (incident 1) showed first in a flame graph:
 * "Stretch was executing sendfile a lot slower", with tcp_write_timer and
 * the functions under it taking a larger share of the CPU than on Jessie.
 * A counter of samples by kernel function gives that share as a PromQL
 * ratio on every host, without anyone taking a profile.
 *
 * Kernel source: the perf_event subsystem, software event cpu-clock
 * (PERF_COUNT_SW_CPU_CLOCK, an hrtimer per CPU; it needs no PMU and works
 * in VMs). Opened on every online CPU for all tasks at 19 Hz (the kernel
 * turns a cpu-clock frequency into a fixed period, 1/19 s of CPU time per
 * sample), as Parca agent samples for always-on profiling. Each sample runs
 * the program with the interrupted registers: the instruction pointer is
 * the leaf, the innermost function on the CPU at that instant.
 *
 * Map cpu_profile_samples_total (HASH, up to MAX_KEYS keys), 24-byte key:
 *   offset 0 u64 ip       kernel address of the interrupted instruction
 *                         (ksym decoder: the function holding it); 0: the
 *                         CPU was in user mode; 1 with an empty comm: the
 *                         "[other]" key (below)
 *          8 char[16] comm the task's command name, NUL padded; the idle
 *                         tasks (pid 0, swapper/N) all count as "swapper"
 *   value u64             samples (each 1/19 s of CPU time)
 *
 * Bounds: many addresses fall in one function and decode to one series,
 * so the map holds addresses, not functions: at most MAX_KEYS. The key
 * {1, ""} is created before any other; once the map is full, a sample whose
 * key is new is counted there, so the sum over all series stays the number
 * of samples. The exporter bounds the series (max_series) and deletes keys
 * idle for the ttl (cpu_profile.yaml), which frees room for new ones.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "kernel_exporter/maps.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define MAX_KEYS	16384
#define COMM_LEN	16

struct sample_key {
	__u64 ip;
	char comm[COMM_LEN];
};
_Static_assert(sizeof(struct sample_key) == 24, "cpu_profile.yaml expects a 24-byte key");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_KEYS);
	__type(key, struct sample_key);
	__type(value, __u64);
} cpu_profile_samples_total SEC(".maps");

SEC("perf_event")
int on_cpu_sample(struct bpf_perf_event_data *ctx)
{
	struct sample_key other = { .ip = 1 }, key = {};
	__u64 zero = 0, *val;
	__u64 ip = PT_REGS_IP(&ctx->regs);

	/* Reserve the "other" key first, so that it exists once the map is full. */
	if (!bpf_map_lookup_elem(&cpu_profile_samples_total, &other))
		ke_update(&cpu_profile_samples_total, &other, &zero, BPF_NOEXIST);

	/* Kernel addresses are in the upper half of the address space. */
	key.ip = (__s64)ip < 0 ? ip : 0;
	if ((bpf_get_current_pid_tgid() >> 32) == 0)
		__builtin_memcpy(key.comm, "swapper", 8);
	else
		bpf_get_current_comm(key.comm, sizeof(key.comm));

	val = bpf_map_lookup_elem(&cpu_profile_samples_total, &key);
	if (!val) {
		/* Fails with -E2BIG when full (counted), -EEXIST if another CPU won. */
		ke_update(&cpu_profile_samples_total, &key, &zero, BPF_NOEXIST);
		val = bpf_map_lookup_elem(&cpu_profile_samples_total, &key);
		if (!val)
			val = bpf_map_lookup_elem(&cpu_profile_samples_total, &other);
		if (!val)
			return 0;
	}
	__sync_fetch_and_add(val, 1);
	return 0;
}

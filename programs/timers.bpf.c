// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

// (The build constraint above keeps the Go tool from treating this BPF C file
// as cgo source of package programs; clang ignores it.)
/*
 * timers: how often each kernel timer (struct timer_list) is armed, by the
 * function the timer will call when it fires.
 *
 * Why: a distro upgrade that turned TSO off multiplied the number of
 * tcp_write_timer starts by 12; a counter per timer function shows that kind
 * of change at a glance.
 *
 * Kernel source: tracepoint timer:timer_start (include/trace/events/timer.h,
 * since 2.6.32), field "function". Read through the tracepoint's raw record
 * (struct trace_event_raw_timer_start); CO-RE relocates the field offset.
 *
 * Map timer_starts_total (HASH, up to 1024 functions):
 *   key   u64 function   kernel address of the timer callback (8 bytes)
 *   value u64            number of timer_start events
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "kernel_exporter/maps.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64);
	__type(value, __u64);
} timer_starts_total SEC(".maps");

SEC("tracepoint/timer/timer_start")
int timer_start(struct trace_event_raw_timer_start *ctx)
{
	__u64 function = (__u64)BPF_CORE_READ(ctx, function);

	ke_add(&timer_starts_total, &function, 1);
	return 0;
}

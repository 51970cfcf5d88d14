/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * kernel_exporter drop counters: events a program leaves out of its metrics
 * on purpose (a start time that belongs to another request, say), counted by
 * reason so that the loss is visible.
 *
 * ke_dropped (PERCPU_HASH, 16 reasons at most): key struct ke_drop_reason,
 * a reason name of at most 16 characters, NUL-padded to 16 bytes; value u64
 * per CPU, the events dropped for that reason on that CPU. The exporter sums
 * the CPUs and serves kernel_exporter_bpf_dropped_total{config,reason}.
 * Objects that do not include this header get no such series.
 *
 * Cost: nothing until a drop; a drop costs a per-CPU hash lookup (an insert
 * the first time a reason is seen, counted like any failed insert by
 * maps.bpf.h).
 */
#ifndef __KERNEL_EXPORTER_DROPS_BPF_H
#define __KERNEL_EXPORTER_DROPS_BPF_H

#include "kernel_exporter/maps.bpf.h"

struct ke_drop_reason {
	char name[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 16);
	__type(key, struct ke_drop_reason);
	__type(value, __u64);
} ke_dropped SEC(".maps");

/*
 * ke_drop counts one event dropped for reason, a string literal of at most
 * 16 characters (longer ones do not compile). The add is atomic: a program
 * in interrupt context (a block completion, say) may interrupt another one
 * counting the same reason on this CPU.
 */
#define ke_drop(reason)                                              \
	do {                                                         \
		struct ke_drop_reason __r = { .name = reason };      \
		ke_add(&ke_dropped, &__r, 1);                        \
	} while (0)

#endif /* __KERNEL_EXPORTER_DROPS_BPF_H */

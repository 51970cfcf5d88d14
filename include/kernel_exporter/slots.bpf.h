/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * kernel_exporter helpers for histograms whose map value holds every slot
 * of a label set (slots_in_value in the YAML, docs/configuration.md): a
 * value of u64 slots[max_bucket + 2], slot k counting observations of
 * bucket k, the last slot the sum of the observed values. Compute the slot
 * with ke_exp2_slot and friends (maps.bpf.h).
 */
#ifndef __KERNEL_EXPORTER_SLOTS_BPF_H
#define __KERNEL_EXPORTER_SLOTS_BPF_H

/*
 * ke_observe_slots records value v in slot slot (clamped to max_bucket) of
 * slots, and adds v to the sum, with plain adds: for a per-CPU map's
 * value, which only this CPU writes.
 */
#define ke_observe_slots(slots, slot, v, max_bucket)                     \
	do {                                                             \
		__u32 __s = (slot);                                      \
		(slots)[__s > (max_bucket) ? (max_bucket) : __s] += 1;   \
		(slots)[(max_bucket) + 1] += (v);                        \
	} while (0)

#endif /* __KERNEL_EXPORTER_SLOTS_BPF_H */

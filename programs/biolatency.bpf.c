// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

// (The build constraint above keeps the Go tool from treating this BPF C file
// as cgo source of package programs; clang ignores it.)
/*
 * biolatency: block I/O latency, from the moment a request is issued to the
 * device driver until the device completes it, by disk and operation.
 *
 * Why: an SSD rated at 50 µs showed reads in the 0.5-1 s bucket; only a
 * per-device, per-operation latency histogram makes that visible.
 *
 * Kernel source: BTF tracepoints (tp_btf, 5.5+) block:block_rq_issue
 * (struct request *rq; this one-argument form since 5.11) and
 * block:block_rq_complete (struct request *rq, blk_status_t error,
 * unsigned int nr_bytes); both are trace events since 2.6.31. The disk is
 * read as rq->q->disk (request_queue.disk exists since 5.15), so passthrough
 * and flush requests, whose rq->part may be NULL, are attributed too.
 *
 * Map bio_latency_seconds (HASH), key struct bio_key, 12 bytes:
 *   offset 0  u32 device     kernel dev_t of the whole disk:
 *                            MKDEV(major, first_minor) = major << 20 | minor
 *   offset 4  u8  operation  rq->cmd_flags & REQ_OP_MASK: 0 read, 1 write,
 *                            2 flush, 3 discard, 5 secure erase,
 *                            9 write zeroes, 34/35 driver in/out, ...
 *   offset 5  3 bytes of padding, zeroed with the whole key
 *   offset 8  u32 bucket     exp2 slot of the latency, 0..26; 27 holds the sum
 * Field names are the label names: biolatency.yaml takes the layout from
 * this struct's BTF.
 *   value u64              count of requests (slot 27: sum of latencies)
 * Bucket unit: microseconds (slot k: latency <= 2^k µs; 26 ≈ 67 s).
 *
 * Requests in flight: their issue time sits in bio_start (ARRAY, 4096 slots
 * of struct inflight, 16 bytes), at a slot derived from the request's queue
 * id, hardware queue and the tag the request keeps from allocation to free
 * (the verifier forbids hashing the pointer itself): its scheduler tag
 * (rq->internal_tag) when the queue has an I/O scheduler, else its driver
 * tag (rq->tag). The address of a request is that of its tag's preallocated
 * struct request, so one address always maps to one slot. The driver tag of
 * a queue with a scheduler does not stay: it is taken at dispatch and given
 * back when the driver requeues the request (BLK_STS_RESOURCE or
 * BLK_STS_DEV_RESOURCE, e.g. a full virtqueue; block_rq_requeue already
 * sees rq->tag == -1) and after the data step of a flush sequence. Keyed by
 * it, a requeued request would be issued again into another slot, leaving
 * its first issue time behind, and a flush sequence's final completion
 * (rq->tag == -1) would look in a slot not its own. A queue's
 * tags are handed out low first, so its requests share a few hot cache
 * lines, and an array lookup is inlined by the verifier. When a slot holds
 * another request (two queues whose slots overlap), that request moves to
 * bio_start_overflow (LRU_HASH keyed by request address), where its
 * completion still finds it and from where the LRU ages out the ones that
 * never complete. A collision that races with a completion on another CPU
 * can lose that one sample.
 *
 * A start is only ever matched with the request it was taken for: it must
 * not predate rq->start_time_ns, which the block layer sets when the
 * request is allocated or its accounting starts (before any issue), with a
 * scheduler or with iostats on (0 otherwise, when the check cannot fire,
 * but the driver tag is then the allocation tag, which does not change).
 * A start older than the request found for it belongs to an earlier
 * request at the same address whose completion was not seen. The next
 * issue of that address overwrites it; a completion that finds it (one
 * without an issue of its own, see below) drops it and counts reason
 * stale_start in ke_dropped (include/kernel_exporter/drops.bpf.h,
 * kernel_exporter_bpf_dropped_total{config,reason}). A request the driver
 * handed back (requeued) is issued again into its own slot, and its
 * latency counts from the last issue, as bcc's biolatency does. Issue
 * checks nothing more: reading start_time_ns there, on each re-issue (a
 * third of the issues under heavy writes here), cost about 40 ns a run.
 * Completions without a start are not counted: requests issued before the
 * program was attached, the second completion of a flush sequence's data
 * request (blk_flush_complete_seq ends it again once the post-flush is
 * done) and flush-only requests, which the flush machinery completes
 * without issuing them (their flush is the REQ_OP_FLUSH request, timed as
 * operation 2). That is what libbpf-tools' biolatency counts too. No age
 * bound drops old starts: virtio-blk has no timeout handler and lets a
 * request run past the queue's timeout, and such a latency is real.
 *
 * Cost (make bench-overhead, biolatency alone, 2-CPU VM, bpf stats on):
 * reading rq and disk fields with direct loads instead of
 * bpf_probe_read_kernel took block_rq_complete from 528-539 to 456-463 ns.
 * A PERCPU_HASH histogram made no difference (block events are rare: no
 * contention on the shared one). The in-flight array instead of a HASH keyed
 * by request address took block_rq_issue from 589-639 to 153-182 ns and
 * block_rq_complete from 486-506 to 296-333 ns (four runs each). Without
 * the read of the slot's occupant at issue (and so without the overflow)
 * issue ran in 117-130 ns, but colliding requests lost their samples.
 * Keying by the kept tag added a load, a sign extension and a branch to
 * both hooks, and the check of start_time_ns a load and a compare to the
 * completion; neither was measurable (docs/performance.md).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "kernel_exporter/maps.bpf.h"
#include "kernel_exporter/drops.bpf.h"

#define MAX_BUCKET	26
#define REQ_OP_MASK	0xff	/* (1 << REQ_OP_BITS) - 1, REQ_OP_BITS == 8 */
#define MINORBITS	20	/* kernel dev_t: major << 20 | minor */

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct bio_key {
	__u32 device;
	__u8 operation;
	__u32 bucket;
};
_Static_assert(sizeof(struct bio_key) == 12, "biolatency.yaml expects a 12-byte key");

#ifndef INFLIGHT_SLOTS
#define INFLIGHT_SLOTS	4096	/* power of two; -D for tests */
#endif

struct inflight {
	__u64 rq;	/* request address; 0 when the slot is free */
	__u64 ts;	/* bpf_ktime_get_ns() at issue */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, INFLIGHT_SLOTS);
	__type(key, __u32);
	__type(value, struct inflight);
} bio_start SEC(".maps");

/* Issue time of requests moved out of their slot, by request address. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 10240);
	__type(key, __u64);
	__type(value, __u64);
} bio_start_overflow SEC(".maps");

static __always_inline __u32 inflight_slot(struct request *rq)
{
	/* A multiplicative hash spreads queues; tags stay adjacent. */
	__u32 queue = (__u32)rq->q->id << 10 ^ rq->mq_hctx->queue_num;
	/* The tag kept from allocation to free (see above); -1: none. */
	int tag = rq->internal_tag;

	if (tag < 0)
		tag = rq->tag;
	return ((queue * 2654435761U >> 20) + (__u32)tag) & (INFLIGHT_SLOTS - 1);
}

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct bio_key);
	__type(value, __u64);
} bio_latency_seconds SEC(".maps");

SEC("tp_btf/block_rq_issue")
int BPF_PROG(block_rq_issue, struct request *rq)
{
	__u32 slot = inflight_slot(rq);
	struct inflight *f = bpf_map_lookup_elem(&bio_start, &slot);
	__u64 old;

	if (!f)
		return 0;
	old = f->rq;
	/*
	 * Another queue's request moves to the overflow; the same one, issued
	 * again after a requeue, just gets its new start.
	 */
	if (old && old != (__u64)rq)
		ke_update(&bio_start_overflow, &old, &f->ts, BPF_ANY);
	f->ts = bpf_ktime_get_ns();
	f->rq = (__u64)rq;
	return 0;
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(block_rq_complete, struct request *rq, blk_status_t error,
	     unsigned int nr_bytes)
{
	__u32 slot = inflight_slot(rq);
	struct inflight *f = bpf_map_lookup_elem(&bio_start, &slot);
	__u64 id = (__u64)rq, start, *moved, delta_us;
	struct bio_key key;
	struct gendisk *disk;

	__builtin_memset(&key, 0, sizeof(key)); /* padding included */
	if (f && f->rq == id) {
		start = f->ts;
		f->rq = 0;
	} else {
		moved = bpf_map_lookup_elem(&bio_start_overflow, &id);
		if (!moved)
			return 0; /* not issued, or before we were attached */
		start = *moved;
		bpf_map_delete_elem(&bio_start_overflow, &id);
	}
	if (start < rq->start_time_ns) {
		ke_drop("stale_start"); /* an earlier request at this address */
		return 0;
	}
	delta_us = (bpf_ktime_get_ns() - start) / 1000;

	/* Direct loads: tp_btf arguments are BTF pointers. */
	disk = rq->q->disk;
	if (disk)
		key.device = (__u32)disk->major << MINORBITS | (__u32)disk->first_minor;
	key.operation = rq->cmd_flags & REQ_OP_MASK;

	ke_observe(ke_add, &bio_latency_seconds, key, ke_exp2_slot(delta_us),
		   delta_us, MAX_BUCKET);
	return 0;
}

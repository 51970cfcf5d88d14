// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

/*
 * bio_trace: one span per block request, from issue to completion, written
 * for a cloudflare/ebpf_exporter-format tracing config (bio_trace.yaml,
 * tracing: only) to check that such configs load and export here.
 *
 * Kernel source: tp_btf block:block_rq_issue (rq) and block:block_rq_complete
 * (rq, error, nr_bytes). The disk is rq->q->disk (5.15+).
 *
 * Record (64 bytes, of which the labels describe 60: the last 4 are the
 * struct's tail padding, which the exporter accepts): trace_id[16] random,
 * parent_span_id 0 (a root span), span_id 0 (the exporter generates it),
 * start ns, duration ns, device (kernel dev_t, major << 20 | minor),
 * operation (cmd_flags & REQ_OP_MASK), bytes at issue.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#define REQ_OP_MASK	0xff
#define MINORBITS	20

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct start {
	__u64 ts;
	__u32 bytes;
	__u32 pad;
};

struct record {
	__u64 trace_id[2];
	__u64 parent_span_id;
	__u64 span_id;
	__u64 ts;
	__u64 duration;
	__u32 device;
	__u32 operation;
	__u32 bytes;
};
_Static_assert(sizeof(struct record) == 64, "bio_trace.yaml describes 60 bytes plus 4 of tail padding");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 10240);
	__type(key, __u64);
	__type(value, struct start);
} bio_trace_start SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} bio_trace_spans SEC(".maps");

SEC("tp_btf/block_rq_issue")
int BPF_PROG(bio_trace_issue, struct request *rq)
{
	__u64 id = (__u64)rq;
	struct start s = {.ts = bpf_ktime_get_ns(), .bytes = rq->__data_len};

	bpf_map_update_elem(&bio_trace_start, &id, &s, BPF_ANY);
	return 0;
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(bio_trace_complete, struct request *rq, blk_status_t error, unsigned int nr_bytes)
{
	__u64 id = (__u64)rq;
	struct start *s = bpf_map_lookup_elem(&bio_trace_start, &id);
	struct gendisk *disk;
	struct record *r;

	if (!s)
		return 0;
	r = bpf_ringbuf_reserve(&bio_trace_spans, sizeof(*r), 0);
	if (r) {
		__builtin_memset(r, 0, sizeof(*r));
		r->trace_id[0] = (__u64)bpf_get_prandom_u32() << 32 | bpf_get_prandom_u32();
		r->trace_id[1] = (__u64)bpf_get_prandom_u32() << 32 | bpf_get_prandom_u32();
		r->ts = s->ts;
		r->duration = bpf_ktime_get_ns() - s->ts;
		disk = rq->q->disk;
		if (disk)
			r->device = (__u32)disk->major << MINORBITS | (__u32)disk->first_minor;
		r->operation = rq->cmd_flags & REQ_OP_MASK;
		r->bytes = s->bytes;
		bpf_ringbuf_submit(r, 0);
	}
	bpf_map_delete_elem(&bio_trace_start, &id);
	return 0;
}

// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

/*
 * Test program with a libbpf USDT spec layout this version does not know:
 * struct __bpf_usdt_arg_spec as a future libbpf might lay it out, with a
 * member "scale" (one of the layouts proposed for scale-index-base
 * operands, not the one libbpf 1.7 took). The loader must refuse it,
 * naming the struct and the member, rather than write specs the program
 * would misread.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

enum __bpf_usdt_arg_type {
	BPF_USDT_ARG_CONST,
	BPF_USDT_ARG_REG,
	BPF_USDT_ARG_REG_DEREF,
	BPF_USDT_ARG_SIB,
};

struct __bpf_usdt_arg_spec {
	__u64 val_off;
	enum __bpf_usdt_arg_type arg_type;
	short reg_off;
	short idx_reg_off;
	short scale;
	bool arg_signed;
	char arg_bitshift;
};

struct __bpf_usdt_spec {
	struct __bpf_usdt_arg_spec args[12];
	__u64 usdt_cookie;
	short arg_cnt;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 16);
	__type(key, int);
	__type(value, struct __bpf_usdt_spec);
} __bpf_usdt_specs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u64);
} future_calls_total SEC(".maps");

SEC("usdt//bin/true:ketest:none")
int on_probe(struct pt_regs *ctx)
{
	int id = 0;
	struct __bpf_usdt_spec *spec = bpf_map_lookup_elem(&__bpf_usdt_specs, &id);
	u64 one = 1;

	if (spec && spec->arg_cnt)
		bpf_map_update_elem(&future_calls_total, &id, &one, BPF_ANY);
	return 0;
}

// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

/*
 * Test program for USDT probes read through libbpf's <bpf/usdt.bpf.h>
 * (the header of the system's libbpf-dev), in the format of
 * ebpf_exporter's programs: SEC("usdt/<binary>:<provider>:<name>") and
 * BPF_USDT. The loader must fill libbpf's __bpf_usdt_specs map in the
 * layout of this object's BTF. KE_TARGET (a -D string) is the path of
 * ke_libbpf_target (testdata/probes/target_libbpf.c).
 *
 * Map libbpf_usdt_names_total (HASH): key char[16] (the probe's string
 * argument), value u64 count.
 * Map libbpf_usdt_values_total (HASH): key u32 what, value u64:
 *   0 ketest_libbpf:mixed fired   1 sum of arg 0 (int i)
 *   2 sum of -(arg 1) (long -1000*i)  3 sum of arg 2 ($42)
 *   4 sum of -(arg 3) ($-9)       5 sum of arg 5 (unsigned char i+200)
 *   6 sum of -(arg 6) (signed char -i)  7 sum of arg 7 (a global)
 *   8 sum of bpf_usdt_arg_cnt     9 sum of bpf_usdt_cookie
 *  10 reads of arg 8 that failed with -ENOENT (there is none)
 *  11 ketest_libbpf:site fired   12 sum of its arg 0 (1 or 2 by site)
 *  15 string reads that failed
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/usdt.bpf.h>
#include "kernel_exporter/maps.bpf.h"

#ifndef KE_TARGET
#error "KE_TARGET must be defined"
#endif

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct name_key {
	char name[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, struct name_key);
	__type(value, u64);
} libbpf_usdt_names_total SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, u32);
	__type(value, u64);
} libbpf_usdt_values_total SEC(".maps");

static __always_inline void add(u32 what, u64 v)
{
	ke_add(&libbpf_usdt_values_total, &what, v);
}

SEC("usdt/" KE_TARGET ":ketest_libbpf:mixed")
int BPF_USDT(on_mixed, int i, long neg, int c42, int cneg9, const char *name,
	     unsigned char low, signed char small, long counter)
{
	struct name_key key = {};
	long v;

	add(0, 1);
	add(1, i);
	add(2, -neg);
	add(3, c42);
	add(4, -cneg9);
	add(5, low);
	add(6, -small);
	add(7, counter);
	add(8, bpf_usdt_arg_cnt(ctx));
	add(9, bpf_usdt_cookie(ctx));
	if (bpf_usdt_arg(ctx, 8, &v) == -ENOENT)
		add(10, 1);
	if (bpf_probe_read_user_str(key.name, sizeof(key.name), name) < 0)
		add(15, 1);
	else
		ke_add(&libbpf_usdt_names_total, &key, 1);
	return 0;
}

SEC("usdt/" KE_TARGET ":ketest_libbpf:site")
int BPF_USDT(on_site, int which)
{
	add(11, 1);
	add(12, which);
	return 0;
}

/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * kernel_exporter helpers for USDT programs: read a probe's arguments.
 *
 * A USDT program has a bare SEC("usdt") section and is attached by the
 * exporter at every site of the probe named in the config's "usdt" list.
 * For each site, the exporter parses the argument specs of the probe's
 * .note.stapsdt note (e.g. "-4@%edi 8@-16(%rbp) 4@$5"), writes them into
 * the array map ke_usdt_specs at a spec id, and attaches the uprobe with the
 * spec id as its BPF cookie (Linux 5.15+). ke_usdt_arg() then finds the
 * spec through bpf_get_attach_cookie() and reads the value from the
 * registers (struct pt_regs) or user memory.
 *
 * The layout of struct ke_usdt_spec is fixed (200 bytes): the Go side
 * (package usdt, Spec.MarshalBinary) writes it and checks the map's value
 * size. This is our own layout, not libbpf's usdt.bpf.h: objects built with
 * any libbpf version work, and the exporter owns both ends.
 *
 * Usage:
 *
 *	#include "kernel_exporter/usdt.bpf.h"
 *
 *	SEC("usdt")
 *	int on_query(struct pt_regs *ctx)
 *	{
 *		long len;
 *
 *		if (ke_usdt_arg(ctx, 1, &len))
 *			return 0;
 *		...
 *	}
 */
#ifndef __KERNEL_EXPORTER_USDT_BPF_H
#define __KERNEL_EXPORTER_USDT_BPF_H

#include <bpf/bpf_helpers.h>

/* At most 12 arguments per probe, as in <sys/sdt.h>. */
#define KE_USDT_MAX_ARGS 12
/* Probe sites per object; the exporter refuses to attach more. */
#ifndef KE_USDT_MAX_SPECS
#define KE_USDT_MAX_SPECS 256
#endif

/* Where an argument's value is (package usdt, ArgKind). */
enum ke_usdt_arg_kind {
	KE_USDT_ARG_UNSUPPORTED = 0, /* operand the exporter cannot read */
	KE_USDT_ARG_CONST = 1,       /* value = off */
	KE_USDT_ARG_REG = 2,         /* value = register at reg_off */
	KE_USDT_ARG_MEM = 3,         /* value = *(reg + (idx << scale_shift) + off) */
};

/* One argument (16 bytes). */
struct ke_usdt_arg {
	__s64 off;         /* constant, or memory displacement */
	__s16 reg_off;     /* offset in struct pt_regs of the (base) register, -1: none */
	__s16 idx_off;     /* offset in struct pt_regs of the index register, -1: none */
	__u8 kind;         /* enum ke_usdt_arg_kind */
	__u8 size;         /* bytes: 1, 2, 4 or 8 */
	__u8 is_signed;    /* sign-extend (1) or zero-extend (0) to 64 bits */
	__u8 scale_shift;  /* log2 of the index scale */
};

/* One probe site's arguments (200 bytes). */
struct ke_usdt_spec {
	struct ke_usdt_arg args[KE_USDT_MAX_ARGS];
	__u32 nargs;
	__u32 reserved;
};

/* Spec id (the attachment's BPF cookie) -> spec, filled by the exporter. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, KE_USDT_MAX_SPECS);
	__type(key, __u32);
	__type(value, struct ke_usdt_spec);
} ke_usdt_specs SEC(".maps");

static __always_inline struct ke_usdt_spec *ke_usdt_spec_of(void *ctx)
{
	__u32 id = (__u32)bpf_get_attach_cookie(ctx);

	return bpf_map_lookup_elem(&ke_usdt_specs, &id);
}

/* ke_usdt_arg_count returns the number of arguments of the probe that
 * fired, or a negative error. */
static __always_inline int ke_usdt_arg_count(struct pt_regs *ctx)
{
	struct ke_usdt_spec *spec = ke_usdt_spec_of(ctx);

	if (!spec)
		return -2; /* -ENOENT */
	return spec->nargs;
}

/*
 * ke_usdt_arg stores argument n (from 0) of the probe that fired into *res,
 * sign- or zero-extended to 64 bits as the spec says. It returns 0, or a
 * negative error: -2 (ENOENT) for no such argument, -95 (EOPNOTSUPP) for an
 * operand the exporter cannot read, or the error of a failed memory read.
 */
static __always_inline int ke_usdt_arg(struct pt_regs *ctx, __u32 n, long *res)
{
	struct ke_usdt_spec *spec;
	struct ke_usdt_arg *arg;
	__u64 val = 0, addr, idx = 0;
	__u32 size, shift;
	int err;

	*res = 0;
	if (n >= KE_USDT_MAX_ARGS)
		return -2;
	spec = ke_usdt_spec_of(ctx);
	if (!spec || n >= spec->nargs)
		return -2;
	arg = &spec->args[n];
	switch (arg->kind) {
	case KE_USDT_ARG_CONST:
		val = arg->off;
		break;
	case KE_USDT_ARG_REG:
		err = bpf_probe_read_kernel(&val, sizeof(val), (void *)ctx + arg->reg_off);
		if (err)
			return err;
		break;
	case KE_USDT_ARG_MEM:
		addr = 0;
		if (arg->reg_off >= 0) {
			err = bpf_probe_read_kernel(&addr, sizeof(addr), (void *)ctx + arg->reg_off);
			if (err)
				return err;
		}
		if (arg->idx_off >= 0) {
			err = bpf_probe_read_kernel(&idx, sizeof(idx), (void *)ctx + arg->idx_off);
			if (err)
				return err;
			addr += idx << (arg->scale_shift & 3);
		}
		addr += arg->off;
		size = arg->size;
		if (size == 0 || size > 8)
			size = 8;
		/* Little-endian: the value's bytes are val's low bytes. */
		err = bpf_probe_read_user(&val, size, (void *)addr);
		if (err)
			return err;
		break;
	default:
		return -95;
	}
	size = arg->size;
	if (size > 0 && size < 8) {
		shift = 64 - size * 8;
		if (arg->is_signed)
			val = (__u64)((__s64)(val << shift) >> shift);
		else
			val = (val << shift) >> shift;
	}
	*res = (long)val;
	return 0;
}

#endif /* __KERNEL_EXPORTER_USDT_BPF_H */

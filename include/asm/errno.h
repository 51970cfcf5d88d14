/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * <asm/errno.h> for BPF programs: the kernel's <linux/errno.h>, which
 * libbpf's <bpf/usdt.bpf.h> includes, includes <asm/errno.h>, found in the
 * multiarch directory (/usr/include/x86_64-linux-gnu) that clang -target
 * bpf does not search. Every architecture this project builds for uses the
 * generic numbers.
 */
#include <asm-generic/errno.h>

// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

/*
 * Test program for a USDT probe of Debian's python3, in the format of
 * ebpf_exporter's programs: libbpf's <bpf/usdt.bpf.h>, BPF_USDT and a
 * bare binary name in the section (found as libbpf finds it).
 *
 * python:import__find__load__start fires when an import finds a module
 * not loaded yet; its one argument is the module's name (char *).
 *
 * Map python_imports_total (HASH): key char[64] module name, value u64
 * count.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/usdt.bpf.h>
#include "kernel_exporter/maps.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct module_key {
	char name[64];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct module_key);
	__type(value, u64);
} python_imports_total SEC(".maps");

SEC("usdt/python3:python:import__find__load__start")
int BPF_USDT(on_import, void *name)
{
	struct module_key key = {};

	bpf_probe_read_user_str(key.name, sizeof(key.name), name);
	ke_add(&python_imports_total, &key, 1);
	return 0;
}

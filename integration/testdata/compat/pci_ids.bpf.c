// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

/*
 * Test program for the pci_* decoders (programs_pci_test.go): counts
 * fadvise64() calls made with the advice PCI_TEST_ADVICE (which the kernel
 * refuses with EINVAL) by the PCI ids the test passes in their arguments,
 * in the key layout of cloudflare/ebpf_exporter's pci example (whose
 * kprobes read struct pci_dev).
 *
 * Kernel source: tracepoint syscalls:sys_enter_fadvise64 (since 2.6.37
 * with CONFIG_FTRACE_SYSCALLS), args[1] offset = (vendor << 16) + device,
 * args[2] len = the 24-bit class (class << 16 | subclass << 8 | prog-if),
 * args[3] advice.
 *
 * pci_test_calls_total (HASH, up to 128 devices): key struct pci_key
 *   (u32 vendor, u32 (vendor << 16) + device, u8 class, u8 padding,
 *   u16 (class << 8) + subclass; 12 bytes), value u64 calls.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define PCI_TEST_ADVICE 0x7e57

struct pci_key {
	__u32 vendor;
	__u32 device;
	__u8 class;
	__u16 subclass;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 128);
	__type(key, struct pci_key);
	__type(value, __u64);
} pci_test_calls_total SEC(".maps");

SEC("tracepoint/syscalls/sys_enter_fadvise64")
int pci_test_fadvise(struct trace_event_raw_sys_enter *ctx)
{
	struct pci_key key;
	__u64 one = 1, *v;
	__u32 id, class;

	if (ctx->args[3] != PCI_TEST_ADVICE)
		return 0;
	__builtin_memset(&key, 0, sizeof(key));
	id = (__u32)ctx->args[1];
	class = (__u32)ctx->args[2];
	key.vendor = id >> 16;
	key.device = id;
	key.class = class >> 16;
	key.subclass = class >> 8;
	v = bpf_map_lookup_elem(&pci_test_calls_total, &key);
	if (v) {
		__sync_fetch_and_add(v, 1);
		return 0;
	}
	bpf_map_update_elem(&pci_test_calls_total, &key, &one, BPF_NOEXIST);
	return 0;
}

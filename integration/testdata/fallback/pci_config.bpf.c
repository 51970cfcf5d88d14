// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//go:build ignore

/*
 * Test program for the pci_* decoders in the kernel matrix
 * (matrix_pci_test.go): reads of PCI configuration space through the
 * kernel's user-access helpers (what reading the config file of a device
 * under /sys/bus/pci/devices does), counted per device, in the key layout of
 * cloudflare/ebpf_exporter's pci example. Precompiled (make bpf): the
 * matrix guests have no compiler.
 *
 * Kernel source: kprobes on pci_user_read_config_byte, _word and _dword
 * (drivers/pci/access.c, exported since 2.6.x; first argument
 * struct pci_dev *), whose vendor, device and 24-bit class
 * (class << 16 | subclass << 8 | prog-if) are read with CO-RE.
 *
 * pci_config_reads_total (HASH, up to 128 devices): key struct pci_key
 *   (u32 vendor, u32 (vendor << 16) + device, u8 class, u8 padding,
 *   u16 (class << 8) + subclass; 12 bytes), value u64 calls.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

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
} pci_config_reads_total SEC(".maps");

static int count(struct pci_dev *dev)
{
	struct pci_key key;
	__u64 one = 1, *v;
	__u16 vendor = BPF_CORE_READ(dev, vendor);
	__u16 device = BPF_CORE_READ(dev, device);
	__u32 class = BPF_CORE_READ(dev, class);

	__builtin_memset(&key, 0, sizeof(key));
	key.vendor = vendor;
	key.device = (__u32)vendor << 16 | device;
	key.class = class >> 16;
	key.subclass = class >> 8;
	v = bpf_map_lookup_elem(&pci_config_reads_total, &key);
	if (v) {
		__sync_fetch_and_add(v, 1);
		return 0;
	}
	bpf_map_update_elem(&pci_config_reads_total, &key, &one, BPF_NOEXIST);
	return 0;
}

SEC("kprobe/pci_user_read_config_byte")
int BPF_KPROBE(pci_config_read_byte, struct pci_dev *dev)
{
	return count(dev);
}

SEC("kprobe/pci_user_read_config_word")
int BPF_KPROBE(pci_config_read_word, struct pci_dev *dev)
{
	return count(dev);
}

SEC("kprobe/pci_user_read_config_dword")
int BPF_KPROBE(pci_config_read_dword, struct pci_dev *dev)
{
	return count(dev);
}

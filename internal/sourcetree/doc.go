// SPDX-License-Identifier: Apache-2.0

// Package sourcetree has no code: its tests check the repository itself,
// as a user who clones it or redistributes it sees it.
//
//   - Every source file (Go, C, headers, shell scripts, the web assets)
//     starts with an SPDX-License-Identifier line naming the licence the
//     repository applies to its kind (Licences), and every licence named
//     has its text in LICENSES/.
//   - Every BPF object's license section holds the string its source sets,
//     which is the kernel's name for the source's SPDX expression, and one
//     the kernel counts as GPL-compatible (GPL-only helpers then load).
//   - In a fresh clone, plain make builds the binary and make bpf finds
//     every committed object up to date without clang (programs/bpf.sum).
package sourcetree

// Licences, by kind of file (see Expected):
//
//   - BPF C: programs, example and test .bpf.c sources, the headers under
//     include/ they share, and what kernel_exporter new writes. A
//     GPL-compatible licence, so that programs may call GPL-only helpers
//     (bpf_probe_read_kernel, bpf_get_current_task, ...), dual with BSD so
//     that the code can be reused anywhere.
//   - include/<arch>/vmlinux.h: generated from a kernel's BTF, the kernel's
//     own type definitions, under the kernel's licence.
//   - include/bpf/: libbpf's BPF-side headers, vendored unmodified, under
//     libbpf's dual licence (include/bpf/COPYING).
//   - Everything else (Go, userspace C, scripts, web assets): Apache-2.0.
const (
	BPFLicence     = "GPL-2.0-only OR BSD-2-Clause"
	VmlinuxLicence = "GPL-2.0-only"
	LibbpfLicence  = "(LGPL-2.1 OR BSD-2-Clause)"
	GoLicence      = "Apache-2.0"
)

// KernelLicence is the string a BPF object's license section holds for a
// source under BPFLicence: the kernel's license_is_gpl_compatible()
// (include/linux/license.h) accepts "Dual BSD/GPL".
const KernelLicence = "Dual BSD/GPL"

// SPDX-License-Identifier: Apache-2.0

package loader

import (
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// TestLicenseWarning checks the warning for an object without a
// GPL-compatible licence: the GPL-only helpers it calls, or the common
// ones when it calls none; none for a GPL-compatible licence.
func TestLicenseWarning(t *testing.T) {
	spec := func(license string, fns ...asm.BuiltinFunc) *ebpf.CollectionSpec {
		var insns asm.Instructions
		for _, f := range fns {
			insns = append(insns, f.Call())
		}
		insns = append(insns, asm.Return())
		return &ebpf.CollectionSpec{Programs: map[string]*ebpf.ProgramSpec{"p": {Name: "p", License: license, Instructions: insns}}}
	}
	const fix = `: add char LICENSE[] SEC("license") = "GPL"; (or "Dual BSD/GPL")`
	for _, tc := range []struct {
		spec *ebpf.CollectionSpec
		want string
	}{
		{spec("", asm.FnMapLookupElem), `object x.bpf.o has no license section, so the kernel will refuse its calls to GPL-only helpers (it calls none now, but ` +
			`bpf_probe_read_kernel, bpf_probe_read_user and their _str forms, bpf_get_current_task, bpf_perf_event_output, bpf_get_stack, bpf_get_stackid, bpf_printk (bpf_trace_printk) would be refused)` + fix},
		{spec("", asm.FnProbeReadUserStr, asm.FnKtimeGetNs, asm.FnGetCurrentTask), `object x.bpf.o has no license section, so the kernel will refuse its calls to GPL-only helpers (it calls bpf_get_current_task, bpf_probe_read_user_str)` + fix},
		{spec("Proprietary", asm.FnTracePrintk), `object x.bpf.o declares a licence that is not GPL-compatible, so the kernel will refuse its calls to GPL-only helpers (it calls bpf_trace_printk)` + fix},
		{spec("GPL", asm.FnTracePrintk), ""},
		{spec("Dual BSD/GPL", asm.FnProbeReadKernel), ""},
		{&ebpf.CollectionSpec{}, ""},
	} {
		if got := LicenseWarning("x.bpf.o", tc.spec); got != tc.want {
			t.Errorf("LicenseWarning:\n got %s\nwant %s", got, tc.want)
		}
	}
}

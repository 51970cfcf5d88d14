// SPDX-License-Identifier: Apache-2.0

package loader

// The licence an object declares. The kernel lets only programs with a
// GPL-compatible licence (the "license" ELF section, a C string) call the
// helpers it marks gpl_only; an object without that section loads, and
// fails only once a program calls such a helper ("cannot call
// GPL-restricted function from non-GPL compatible program"). LicenseWarning
// says so before that.

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// gplCompatible are the licences the kernel counts as GPL-compatible
// (include/linux/license.h, license_is_gpl_compatible).
var gplCompatible = []string{"GPL", "GPL v2", "GPL and additional rights", "Dual BSD/GPL", "Dual MIT/GPL", "Dual MPL/GPL"}

// gplOnly are the helpers tracing programs use whose proto is gpl_only
// (kernel/trace/bpf_trace.c, kernel/bpf/stackmap.c, kernel/bpf/helpers.c),
// by helper id.
var gplOnly = map[asm.BuiltinFunc]bool{
	asm.FnProbeRead: true, asm.FnTracePrintk: true, asm.FnPerfEventRead: true, asm.FnPerfEventOutput: true,
	asm.FnGetStackid: true, asm.FnGetCurrentTask: true, asm.FnProbeWriteUser: true, asm.FnProbeReadStr: true,
	asm.FnPerfEventReadValue: true, asm.FnOverrideReturn: true, asm.FnGetStack: true,
	asm.FnProbeReadUser: true, asm.FnProbeReadKernel: true, asm.FnProbeReadUserStr: true, asm.FnProbeReadKernelStr: true,
	asm.FnSeqPrintf: true, asm.FnGetCurrentTaskBtf: true, asm.FnTraceVprintk: true,
}

// gplOnlyCommon are the GPL-only helpers a warning names when the object
// calls none yet.
const gplOnlyCommon = "bpf_probe_read_kernel, bpf_probe_read_user and their _str forms, bpf_get_current_task, bpf_perf_event_output, bpf_get_stack, bpf_get_stackid, bpf_printk (bpf_trace_printk)"

// LicenseWarning returns a warning when the programs of spec, parsed from
// object (a file name, shown as is), declare no GPL-compatible licence,
// or "": it says which helpers the kernel will refuse them, the GPL-only
// ones they call or, when they call none, the common ones. The licence
// text itself is not quoted (it comes from the file).
func LicenseWarning(object string, spec *ebpf.CollectionSpec) string {
	if spec == nil || len(spec.Programs) == 0 {
		return ""
	}
	license, calls := "", map[string]bool{}
	for _, ps := range spec.Programs {
		license = ps.License
		for _, ins := range ps.Instructions {
			if ins.IsBuiltinCall() && gplOnly[asm.BuiltinFunc(ins.Constant)] {
				calls[helperName(int(ins.Constant))] = true
			}
		}
	}
	if slices.Contains(gplCompatible, license) {
		return ""
	}
	what := "has no license section"
	if license != "" {
		what = "declares a licence that is not GPL-compatible"
	}
	refused := "it calls none now, but " + gplOnlyCommon + " would be refused"
	if len(calls) > 0 {
		names := make([]string, 0, len(calls))
		for n := range calls {
			names = append(names, n)
		}
		slices.Sort(names)
		refused = "it calls " + strings.Join(names, ", ")
	}
	return fmt.Sprintf(`object %s %s, so the kernel will refuse its calls to GPL-only helpers (%s): add char LICENSE[] SEC("license") = "GPL"; (or "Dual BSD/GPL")`, object, what, refused)
}

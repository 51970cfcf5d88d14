// SPDX-License-Identifier: Apache-2.0

package loader

// Advice for the verifier's common complaints about a program's own code
// (as opposed to what the kernel lacks: explain.go). The texts matched are
// the kernel's (kernel/bpf/verifier.c, Linux 6.18, checked by loading
// small bad programs in hints_test.go):
//
//	cannot call GPL-restricted function from non-GPL compatible program  check_helper_call
//	invalid variable-offset read from stack R2 var_off=(0x0; 0x1f) ...  check_stack_access_within_bounds
//	invalid read from stack R4 off=0 size=1                           check_stack_access_within_bounds
//	variable stack access var_off=...                                 (before 5.12)
//	infinite loop detected at insn 2                                  is_state_visited
//	back-edge from insn 5 to 2                                        check_cfg (no CAP_BPF, or before 5.3)
//	BPF program is too large. Processed 1000001 insn                  do_check
//	R0 invalid mem access 'map_value_or_null'                         check_mem_access

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/cilium/ebpf"
)

// verifierHint is one complaint of the verifier and its advice.
type verifierHint struct {
	match  *regexp.Regexp
	advice func(m []string, log []string, at int, ps *ebpf.ProgramSpec) string
}

var (
	helperCall = regexp.MustCompile(`call ([A-Za-z0-9_]+)#([0-9]+)`)
	// insnLine is the verifier's print of an instruction ("1: (55) ...").
	insnLine = regexp.MustCompile(`^[0-9]+: \(`)

	verifierHints = []verifierHint{
		{regexp.MustCompile(`cannot call GPL-restricted function from non-GPL compatible program`), gplAdvice},
		{regexp.MustCompile(`invalid variable-offset [a-z ]*stack R[0-9]+ var_off=|variable stack access var_off=`), func([]string, []string, int, *ebpf.ProgramSpec) string {
			return "an index into a stack array can reach past the array's end (var_off: the values the verifier allows it): compare it with the array's size before the access (if (i >= sizeof(buf)) return 0;)"
		}},
		{regexp.MustCompile(`invalid [a-z ]*stack R[0-9]+ off=-?[0-9]+ size=`), func([]string, []string, int, *ebpf.ProgramSpec) string {
			return "an access runs past a stack variable, most often an array index in a loop bounded by a value from the context (the verifier follows every iteration): bound the index by the array's size as well (for (i = 0; i < n && i < sizeof(buf); i++))"
		}},
		{regexp.MustCompile(`infinite loop detected at insn|back-edge from insn|BPF program is too large`), func([]string, []string, int, *ebpf.ProgramSpec) string {
			return "the verifier cannot see this loop end (it follows every iteration, up to 1 million instructions): bound it by a constant (for (i = 0; i < 64 && i < n; i++)), or use bpf_loop() (Linux 5.17) or bpf_for() (Linux 6.4)"
		}},
		{regexp.MustCompile(`invalid mem access '([a-z_]+)_or_null'`), func(m []string, _ []string, _ int, _ *ebpf.ProgramSpec) string {
			if m[1] == "map_value" {
				return "the value bpf_map_lookup_elem returned is used without a NULL check (it is NULL when the key is absent): check it first (if (!value) return 0;)"
			}
			return fmt.Sprintf("a pointer that may be NULL (%s_or_null, as a helper returned it) is used without a NULL check: check it first (if (!p) return 0;)", m[1])
		}},
	}
)

// gplAdvice names the GPL-only helper called (the log's last call before
// the complaint) and the licence to declare.
func gplAdvice(_ []string, log []string, at int, ps *ebpf.ProgramSpec) string {
	helper := "a GPL-only helper"
	for i := at; i >= 0; i-- {
		if c := helperCall.FindStringSubmatch(log[i]); c != nil {
			helper = c[1] + " is GPL-only"
			break
		}
	}
	if ps != nil && ps.License == "" {
		return helper + " and the object has no license section: add char LICENSE[] SEC(\"license\") = \"GPL\"; (or \"Dual BSD/GPL\")"
	}
	return helper + " and the object's license section is not GPL-compatible: declare \"GPL\" or \"Dual BSD/GPL\" (char LICENSE[] SEC(\"license\"))"
}

// adviseVerifier returns the verifier's complaint (the log line that names
// the problem) and a line of advice for the common ones (advice "" for
// others, whose complaint is the log's last line). ps is the rejected
// program's spec, nil when unknown.
func adviseVerifier(log []string, ps *ebpf.ProgramSpec) (complaint, advice string) {
	lines := log
	if n := len(lines); n > 0 && strings.HasPrefix(lines[n-1], "processed ") {
		lines = lines[:n-1]
	}
	for i := len(lines) - 1; i >= 0 && i >= len(lines)-8; i-- {
		for _, h := range verifierHints {
			if m := h.match.FindStringSubmatchIndex(lines[i]); m != nil {
				line := lines[i]
				if insnLine.MatchString(line) {
					// Printed after an instruction, on its line.
					line = line[m[0]:]
				}
				sub := make([]string, len(m)/2)
				for j := range sub {
					if m[2*j] >= 0 {
						sub[j] = lines[i][m[2*j]:m[2*j+1]]
					}
				}
				return strings.TrimSpace(line), h.advice(sub, lines, i, ps)
			}
		}
	}
	if len(lines) > 0 {
		complaint = strings.TrimSpace(lines[len(lines)-1])
	}
	return complaint, ""
}

// rejectedProgram returns the name and spec of the program a load error
// names ("program <name>: load program: ..."), or "" and nil.
func rejectedProgram(spec *ebpf.CollectionSpec, err error) (string, *ebpf.ProgramSpec) {
	m := progLoadOp.FindStringSubmatch(err.Error())
	if m == nil {
		return "", nil
	}
	if spec != nil {
		if ps := spec.Programs[m[1]]; ps != nil {
			return m[1], ps
		}
	}
	return m[1], nil
}

// SPDX-License-Identifier: Apache-2.0

package loader

// Naming what an older kernel lacks when it refuses an object. The verifier
// and the map-create call answer with generic errnos (EINVAL, EACCES) and
// a log: these functions turn the known cases into a reason that names the
// missing helper, tracepoint argument, map type or kernel type, wrapping
// ErrUnsupported, so that a config down on an old kernel says why.

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/features"
)

// helperSince gives the first Linux release of the helpers whose absence
// the bundled programs meet on supported kernels (include/uapi/linux/bpf.h
// history); others are named without a release.
var helperSince = map[int]string{
	125: "5.8",  // bpf_ktime_get_boot_ns
	130: "5.8",  // bpf_ringbuf_output
	131: "5.8",  // bpf_ringbuf_reserve
	156: "5.11", // bpf_task_storage_get
	158: "5.11", // bpf_get_current_task_btf
	173: "5.15", // bpf_get_func_ip
	174: "5.15", // bpf_get_attach_cookie
	183: "5.17", // bpf_get_func_arg
	184: "5.17", // bpf_get_func_ret
	185: "5.17", // bpf_get_func_arg_cnt
}

var (
	unknownFunc = regexp.MustCompile(`invalid func unknown#([0-9]+)`)
	missingArg  = regexp.MustCompile(`func '([A-Za-z0-9_]+)' doesn't have ([0-9]+)-th argument`)
	mapCreate   = regexp.MustCompile(`map ([A-Za-z0-9_.]+): map create: `)
	// cilium/ebpf's UnsupportedFeatureError text: "... (requires >= 5.11)".
	featureSince = regexp.MustCompile(`requires >= v?([0-9]+\.[0-9]+)`)
)

// corePoison is the call number cilium/ebpf writes over an instruction
// whose CO-RE relocation matched nothing in the kernel's BTF (0xbad2310).
const corePoison = 0xbad2310

// explainVerifier returns what a verifier log says this kernel lacks, or
// "" when it says nothing known: a helper the kernel does not have ("invalid
// func unknown#N", N a helper id), a tp_btf/fentry argument beyond what the
// kernel's function or tracepoint passes, or a CO-RE relocation that
// matched nothing (a kernel type or field missing or renamed here).
func explainVerifier(log []string) string {
	text := strings.Join(log, "\n")
	if m := unknownFunc.FindStringSubmatch(text); m != nil {
		n, err := strconv.Atoi(m[1])
		switch {
		case err == nil && n == corePoison:
			return "a CO-RE relocation matched nothing in this kernel's BTF (a kernel type or field the program reads does not exist in this kernel)"
		case err == nil && n > 0 && n < 1024:
			name := helperName(n)
			if since := helperSince[n]; since != "" {
				return fmt.Sprintf("helper %s (#%d, Linux %s) %v", name, n, since, ErrUnsupported)
			}
			return fmt.Sprintf("helper %s (#%d) %v", name, n, ErrUnsupported)
		}
	}
	if m := missingArg.FindStringSubmatch(text); m != nil {
		return fmt.Sprintf("%s on this kernel passes fewer arguments than the program reads (no argument %s): that argument is %v", m[1], m[2], ErrUnsupported)
	}
	return ""
}

// helperName is bpf_<name> of a helper id, from cilium/ebpf's table
// (FnGetCurrentTaskBtf -> bpf_get_current_task_btf).
func helperName(n int) string {
	s := strings.TrimPrefix(asm.BuiltinFunc(n).String(), "Fn")
	if strings.HasPrefix(s, "BuiltinFunc(") {
		return "#" + strconv.Itoa(n)
	}
	var b strings.Builder
	b.WriteString("bpf")
	for _, r := range s {
		if unicode.IsUpper(r) {
			b.WriteByte('_')
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// explainMapCreate names the map type when a map of spec failed to create
// because this kernel lacks its type (probed with cilium/ebpf's features),
// or returns "".
func explainMapCreate(spec *ebpf.CollectionSpec, err error) string {
	m := mapCreate.FindStringSubmatch(err.Error())
	if m == nil || spec == nil {
		return ""
	}
	ms, ok := spec.Maps[m[1]]
	if !ok {
		return ""
	}
	ferr := features.HaveMapType(ms.Type)
	if !errors.Is(ferr, ebpf.ErrNotSupported) {
		return ""
	}
	since := ""
	if v := featureSince.FindStringSubmatch(ferr.Error()); v != nil {
		since = " (Linux " + v[1] + ")"
	}
	return fmt.Sprintf("map %s: map type %v%s %v", m[1], ms.Type, since, ErrUnsupported)
}

// lackingError is an explained load failure: its text names what the
// kernel lacks, and it matches both ErrUnsupported and the original error
// with errors.Is.
type lackingError struct {
	msg   string
	cause error
}

func (e *lackingError) Error() string   { return e.msg }
func (e *lackingError) Unwrap() []error { return []error{ErrUnsupported, e.cause} }

// explainedError is a load failure told in words of its own that keeps
// the original error (an *ebpf.VerifierError) for errors.Is and As.
type explainedError struct {
	msg   string
	cause error
}

func (e *explainedError) Error() string { return e.msg }
func (e *explainedError) Unwrap() error { return e.cause }

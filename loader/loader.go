// SPDX-License-Identifier: Apache-2.0

// Package loader turns a program's BPF object into running kernel programs.
//
// The model: an Object is one config's <name>.bpf.o. Load parses the ELF into
// a cilium/ebpf CollectionSpec, applies kaddrs, loads every map and program
// into the kernel (CO-RE relocations use the running kernel's BTF), and
// attaches each program according to its ELF section name:
//
//	tracepoint/<group>/<event>, tp/<group>/<event>   tracepoint
//	raw_tp/<event>, raw_tracepoint/<event>            raw tracepoint
//	tp_btf/<event>                                    BTF-typed raw tracepoint (5.5+)
//	fentry/<func>, fexit/<func>                       BPF trampoline (5.5+)
//	kprobe/<func>, kretprobe/<func>                   kprobe (CONFIG_KPROBES)
//	uprobe/<path>:<symbol>[+<offset>], uretprobe/...  uprobe (path absolute, or a bare library
//	                                                  name such as libc.so.6: see ResolveLibrary)
//	uprobe//proc/self/exe:post_attach_mark            the exporter's own selfprobe.Mark, called
//	                                                  after a config attaches (see package selfprobe)
//	uprobe, uretprobe                                 uprobes listed under "uprobes" in the config
//	usdt/<path>:<provider>:<name>, usdt               USDT probe sites (bare: "usdt" list)
//	perf_event                                        per-CPU perf events ("perf_events" list)
//	perf_event/type=<n>,config=<n>,frequency=<n>      per-CPU perf event given in the section
//	                                                  (or period=<n>; see parsePerfSection)
//	xdp/<interface>                                   XDP on that network interface (5.9+ link)
//
// A failure is never fatal to the process: Load returns an error describing
// the first problem (with the verifier log's last lines for a rejected
// program, or "kprobes not supported by this kernel"), and the caller marks
// that one config down while the others keep running.
package loader

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"

	"github.com/kernel-exporter/kernel_exporter/bounded"
	"github.com/kernel-exporter/kernel_exporter/config"
	"github.com/kernel-exporter/kernel_exporter/internal/printable"
	"github.com/kernel-exporter/kernel_exporter/usdt"
)

// Program is one BPF program of an object and its attachment.
type Program struct {
	// Name is the C function name; Section the ELF section it came from.
	Name    string
	Section string
	// Prog is the loaded program, nil when loading failed.
	Prog *ebpf.Program
	// Err is why the program is not attached (nil when it is).
	Err error
	// Alternative is the alternatives group the program was chosen from
	// ("" when it is in none).
	Alternative string
	link        link.Link
}

// Attached reports whether the program is attached to its hook.
func (p *Program) Attached() bool { return p.link != nil }

// Object is a loaded and attached BPF object.
type Object struct {
	Spec       *ebpf.CollectionSpec
	Collection *ebpf.Collection
	Programs   []*Program
	// Alternatives reports how each alternatives group was resolved.
	Alternatives []Alternative
	// env is what attached the programs, kept for Reattach.
	env *attachEnv
	// onClose runs at Close, before the maps are closed (OnClose).
	onClose []func()
}

// OnClose registers f to run when the object is closed, before its maps
// are: for goroutines that write into the maps (cgroupmap).
func (o *Object) OnClose(f func()) { o.onClose = append(o.onClose, f) }

// ParseObject parses a BPF ELF object (the bytes of a <name>.bpf.o) into a
// CollectionSpec. name is used in errors only. It is safe on arbitrary
// bytes: more than bounded.MaxObject bytes are refused, a file that is not
// ELF is refused before any parsing, and a panic of the ELF/BTF parser
// becomes an error. Errors name the object and never quote its bytes
// beyond a short sanitized excerpt of the parser's message (at most
// maxParseError bytes, printable ASCII only).
func ParseObject(name string, data []byte) (spec *ebpf.CollectionSpec, err error) {
	if len(data) > bounded.MaxObject {
		return nil, fmt.Errorf("parse BPF object %s: %d bytes, larger than the %s limit: %w", name, len(data), bounded.Size(bounded.MaxObject), bounded.ErrTooLarge)
	}
	if !bytes.HasPrefix(data, []byte(elf.ELFMAG)) {
		return nil, fmt.Errorf("parse BPF object %s: not an ELF file (no ELF magic number)", name)
	}
	// Guard around a third-party parser: cilium/ebpf (and debug/elf under
	// it) may panic on malformed ELF, BTF or relocations. The panic value
	// may hold parts of the input, so it is not printed.
	defer func() {
		if p := recover(); p != nil {
			spec, err = nil, fmt.Errorf("parse BPF object %s: malformed object (the ELF/BTF parser panicked)", name)
		}
	}()
	// Objects built with libbpf's usdt.bpf.h declare their maps __weak,
	// which cilium/ebpf refuses, and hidden helpers that libbpf makes
	// static: see usdt_libbpf.go.
	data, hidden := libbpfObject(data)
	spec, err = ebpf.LoadCollectionSpecFromReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("parse BPF object %s: %w", name, sanitizeParseError(err))
	}
	if err := checkSpec(spec); err != nil {
		return nil, fmt.Errorf("parse BPF object %s: %w", name, err)
	}
	staticHidden(spec, hidden)
	return spec, nil
}

// checkSpec checks what the loader's code relies on in a parsed spec: no
// nil programs, maps or variables.
func checkSpec(spec *ebpf.CollectionSpec) error {
	if spec == nil {
		return errors.New("parser returned no collection")
	}
	for n, p := range spec.Programs {
		if p == nil {
			return fmt.Errorf("program %s: no program", sanitize(n))
		}
	}
	for n, m := range spec.Maps {
		if m == nil {
			return fmt.Errorf("map %s: no map", sanitize(n))
		}
	}
	for n, v := range spec.Variables {
		if v == nil {
			return fmt.Errorf("variable %s: no variable", sanitize(n))
		}
	}
	return nil
}

// maxParseError bounds the parser's message that ParseObject passes on.
const maxParseError = 200

// parseError is a parser error with a sanitized text; errors.Is and As
// still see the original.
type parseError struct {
	msg string
	err error
}

func (e *parseError) Error() string { return e.msg }
func (e *parseError) Unwrap() error { return e.err }

// sanitizeParseError keeps the parser's message, but without debug/elf's
// quoted values, cut to maxParseError bytes of printable text.
func sanitizeParseError(err error) error {
	msg := err.Error()
	if m, ok := usdt.FormatErrorText(err); ok {
		msg = "malformed ELF: " + m
	}
	return &parseError{msg: sanitize(msg), err: err}
}

// sanitize returns s, a name or message from a parsed object, safe to
// show (printable.String) and cut to maxParseError bytes.
func sanitize(s string) string {
	return printable.Cut(s, maxParseError)
}

var memlockOnce sync.Once
var memlockErr error

// kernelTypes shares the decoded kernel BTF (tens of ms and MB to decode
// /sys/kernel/btf/vmlinux) among the objects loaded at start-up, instead of
// decoding it again for each one. ReleaseKernelTypes drops it.
var (
	kernelTypesMu sync.Mutex
	kernelTypes   *btf.Cache
)

func sharedKernelTypes() *btf.Cache {
	kernelTypesMu.Lock()
	defer kernelTypesMu.Unlock()
	if kernelTypes == nil {
		kernelTypes = btf.NewCache()
	}
	return kernelTypes
}

// externalBTF shares an external vmlinux BTF (--btf.path) among the
// configs loaded at start-up: parsed once, not once per config (concurrent
// loads each held a copy: 2.5 GB for a 40 MB file and every bundled
// program). The decoded spec guards its lazy decoding with a lock, so
// concurrent loads may share it.
var (
	externalBTFMu sync.Mutex
	externalBTF   map[string]*externalSpec
)

type externalSpec struct {
	once sync.Once
	spec *btf.Spec
	err  error
}

// sharedExternalBTF returns loadKernelBTF(path), parsed once until
// ReleaseKernelTypes.
func sharedExternalBTF(path string) (*btf.Spec, error) {
	externalBTFMu.Lock()
	if externalBTF == nil {
		externalBTF = map[string]*externalSpec{}
	}
	e := externalBTF[path]
	if e == nil {
		e = &externalSpec{}
		externalBTF[path] = e
	}
	externalBTFMu.Unlock()
	e.once.Do(func() { e.spec, e.err = loadKernelBTF(path) })
	return e.spec, e.err
}

// ReleaseKernelTypes frees the kernel BTF cached by Load (and any external
// BTF of --btf.path), once the objects are loaded. A later Load decodes it
// again.
func ReleaseKernelTypes() {
	kernelTypesMu.Lock()
	kernelTypes = nil
	kernelTypesMu.Unlock()
	externalBTFMu.Lock()
	externalBTF = nil
	externalBTFMu.Unlock()
}

// raiseMemlock lifts RLIMIT_MEMLOCK on kernels that charge BPF memory to it
// (before 5.11); newer kernels use memory cgroups and need nothing, and
// are not asked: cilium/ebpf's probe of that creates a map, which fails
// without CAP_BPF, and the error would then name the memlock limit
// instead of the capability (the map create that follows says which).
func raiseMemlock() error {
	memlockOnce.Do(func() {
		if _, v, err := KernelRelease(); err == nil && !v.Less(memcgSince) {
			return
		}
		memlockErr = rlimit.RemoveMemlock()
	})
	return memlockErr
}

// Options are the process-wide settings of Load.
type Options struct {
	// BTFPath is an external vmlinux BTF file; empty uses the running
	// kernel's /sys/kernel/btf/vmlinux.
	BTFPath string
	// DisableAttach lists attach kinds (AttachKinds) treated as unsupported,
	// so that alternatives fall through to the next choice.
	DisableAttach []string
}

// Load loads spec into the kernel and attaches all its programs, as the
// config says (cfg.Kaddrs are written into the global variables
// kaddr_<symbol> first). On error nothing stays loaded, and the returned
// Object (when not nil) lists the programs and why each is not attached.
// Before anything is loaded it checks cfg.Requires and points cfg.AttachTo
// programs at their kernel functions; a config with alternatives gets the
// first choice of each group that loads and attaches (see fallback.go).
func Load(spec *ebpf.CollectionSpec, cfg *config.Config, opts Options) (*Object, error) {
	if err := raiseMemlock(); err != nil {
		return nil, fmt.Errorf("raise memlock limit: %w", err)
	}
	if err := prepare(spec, cfg, opts); err != nil {
		return nil, err
	}
	if len(cfg.Alternatives) > 0 {
		return loadAlternatives(spec, cfg, opts)
	}
	if err := setKaddrs(spec, cfg.Kaddrs); err != nil {
		return nil, err
	}
	lu, err := prepareLibbpfUSDT(spec)
	if err != nil {
		return nil, err
	}
	if err := checkProbeTargets(spec, cfg); err != nil {
		return nil, err
	}
	copts := ebpf.CollectionOptions{Cache: sharedKernelTypes()}
	if opts.BTFPath != "" {
		kspec, err := sharedExternalBTF(opts.BTFPath)
		if err != nil {
			return nil, err
		}
		copts.Programs.KernelTypes = kspec
	}
	coll, err := ebpf.NewCollectionWithOptions(spec, copts)
	if err != nil {
		return nil, loadError(spec, err)
	}
	env := &attachEnv{cfg: cfg, coll: coll, libbpf: lu}
	obj := &Object{Spec: spec, Collection: coll, env: env}
	for _, name := range sortedPrograms(spec) {
		ps := spec.Programs[name]
		p := &Program{Name: name, Section: ps.SectionName, Prog: coll.Programs[name]}
		obj.Programs = append(obj.Programs, p)
		l, err := attach(ps, p.Prog, env)
		if err != nil {
			p.Err = fmt.Errorf("attach %s: %w", ps.SectionName, err)
			obj.Close()
			return obj, p.Err
		}
		p.link = l
	}
	if len(obj.Programs) == 0 {
		obj.Close()
		return obj, errors.New("object has no programs to attach")
	}
	return obj, nil
}

// Close detaches every link and unloads every program and map of the object.
func (o *Object) Close() {
	for _, f := range o.onClose {
		f()
	}
	o.onClose = nil
	for _, p := range o.Programs {
		if p.link != nil {
			p.link.Close()
			p.link = nil
		}
	}
	if o.Collection != nil {
		o.Collection.Close()
		o.Collection = nil
	}
}

// loadError explains a failed NewCollection: verifier rejections name the
// program and its section, give the verifier's complaint, a line of advice
// for the common mistakes (adviseVerifier) and the log's last lines, led by
// what this kernel lacks when the log says it (a
// helper, a tracepoint argument, a kernel type: explainVerifier), a map
// type the kernel does not have is named (explainMapCreate), and
// fentry/fexit EPERM becomes a plain "not supported". The named cases wrap
// ErrUnsupported.
func loadError(spec *ebpf.CollectionSpec, err error) error {
	var ve *ebpf.VerifierError
	if errors.As(err, &ve) {
		lines := ve.Log
		if len(lines) > 8 {
			lines = lines[len(lines)-8:]
		}
		tail := strings.Join(lines, "\n  ")
		name, ps := rejectedProgram(spec, err)
		what := "verifier rejected program"
		if name != "" {
			what += " " + sanitize(name)
		}
		if ps != nil && ps.SectionName != "" {
			what += " (section " + sanitize(ps.SectionName) + ")"
		}
		complaint, advice := adviseVerifier(ve.Log, ps)
		if complaint != "" {
			complaint = ": " + sanitize(complaint)
		}
		if why := explainVerifier(ve.Log); why != "" {
			return &lackingError{fmt.Sprintf("load: %s: %s: %v%s; verifier log tail:\n  %s", why, what, ve.Cause, complaint, tail), err}
		}
		if advice != "" {
			complaint += "; hint: " + advice
		}
		return &explainedError{fmt.Sprintf("load: %s: %v%s; verifier log tail:\n  %s", what, ve.Cause, complaint, tail), err}
	}
	if why := explainMapCreate(spec, err); why != "" {
		return &lackingError{fmt.Sprintf("load: %s: %v", why, err), err}
	}
	if isPermission(err) {
		perr, lacking := permissionError(spec, err)
		if lacking {
			return perr // a capability is missing: that is the cause
		}
		for _, ps := range spec.Programs {
			if kind(ps.SectionName) == "fentry" || kind(ps.SectionName) == "fexit" {
				// Memlock is already lifted: drop cilium/ebpf's hint about it.
				msg := strings.Replace(err.Error(), memlockHint, "", 1)
				return fmt.Errorf("load: fentry/fexit %w: %s", ErrUnsupported, msg)
			}
		}
		if perr != nil {
			return perr
		}
	}
	return fmt.Errorf("load: %w", err)
}

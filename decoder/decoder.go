// SPDX-License-Identifier: Apache-2.0

// Package decoder turns the raw bytes of a BPF map key field into a
// Prometheus label value.
//
// A label has a chain of decoders: the first gets the field's bytes (in host
// byte order, exactly as the BPF program wrote them), each later one gets the
// previous one's output, and the last output is the label value. For example
// [uint, static_map] turns the 4 bytes 01 00 00 00 into "1" and then into
// "read".
//
// Decoders are built once per label, when a config is loaded, so that bad
// settings (an unknown decoder, a regexp that does not compile) are reported
// before any scrape. Kernel state is read lazily and shared through an Env:
// ksym and kstack search one immutable copy of kallsyms, and cgroup, ifname
// and majorminor keep bounded LRU caches of the names they resolve. All
// decoders are safe for concurrent use.
//
// Decoders, by input:
//
//	uint        1/2/4/8-byte unsigned integer → decimal
//	hex         1/2/4/8-byte integer → 0x…; other widths → hex of the bytes
//	string      C string (up to the first NUL)
//	static_map  text → its static_map value
//	regexp      text kept if it matches a pattern, else the key is dropped
//	ksym        8-byte kernel address → symbol name
//	kstack      stack id (4/8 bytes) or inline u64 frames → "outer;…;inner"
//	syscall     4/8-byte syscall number → name (x86_64, arm64)
//	errno       1/2/4/8-byte errno, sign ignored → "ENOENT"
//	signal      1/2/4/8-byte signal number → "SIGKILL", "SIGRTMIN+2"
//	inet_ip     4/16-byte address in network byte order → text
//	majorminor  4/8-byte kernel or userspace dev_t → block device name
//	ifname      4/8-byte ifindex → interface name
//	cgroup      8-byte cgroup v2 id → cgroup path
//	kube_namespace, kube_pod, kube_container
//	            8-byte cgroup v2 id, or a cgroup path → the Kubernetes pod's
//	            namespace, pod name, container name ("" if not a pod)
//	dname       DNS wire-format name → "example.com"
//	pci_vendor, pci_device, pci_class, pci_subclass
//	            PCI vendor id, (vendor<<16)+device, class byte,
//	            (class<<8)+subclass → name from the pci.ids database
package decoder

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/kernel-exporter/kernel_exporter/config"
	"github.com/kernel-exporter/kernel_exporter/kube"
)

// Decoder decodes one step of a label's chain.
type Decoder interface {
	// Decode returns the decoded value of in. It returns ErrSkip when the
	// whole key must be dropped silently (the regexp decoder's no-match),
	// and any other error when the input is malformed. Decode must not
	// modify in, and callers must not modify the result: it may be shared
	// (a cached name, a slice of a symbol table, or in itself). It is safe
	// for concurrent use.
	Decode(in []byte) ([]byte, error)
}

// ErrSkip drops a key from a scrape without counting it as a decoder error.
var ErrSkip = errors.New("key skipped by decoder")

// StackReader returns the frames (kernel instruction addresses, innermost
// first, zero-terminated or full) of a stack id from a
// BPF_MAP_TYPE_STACK_TRACE map.
type StackReader interface {
	Stack(id uint32) ([]uint64, error)
}

// Env holds what decoders share across configs: kernel symbol tables, cgroup
// resolution and caches. The zero value is not usable; use NewEnv.
type Env struct {
	// CacheSize bounds every LRU cache a decoder keeps.
	CacheSize int
	// ProcRoot and SysRoot are "/proc" and "/sys" unless tests override them.
	ProcRoot string
	SysRoot  string
	// Kube configures the pod resolver of the kube_* decoders. It is
	// built when the first of them is (one watch of the node's pods for
	// every config) and stopped by Close. nil means no API access: pods
	// are named by UID.
	Kube *kube.Options
	// PCIIDs are the paths where the pci_* decoders look for the pci.ids
	// database, the first that exists is read; nil means PCIIDsPaths.
	PCIIDs []string

	shared

	// Compat makes decoders print what cloudflare/ebpf_exporter prints
	// where the two differ (--compat.ebpf-exporter).
	Compat bool
}

// StackMaps resolves the stack_map setting of a kstack decoder to a reader.
// An empty name means the object's only stack-trace map.
type StackMaps func(name string) (StackReader, error)

// Chain is the list of decoders of one label.
type Chain []Decoder

// Decode runs the chain and returns the label value, always valid UTF-8
// (see DecodeBytes). It returns ErrSkip unchanged when a decoder drops the
// key, and a *DecodeError naming the decoder that failed otherwise.
func (c Chain) Decode(in []byte) (string, error) {
	out, err := c.DecodeBytes(in)
	if err != nil {
		return "", err
	}
	return string(out), nil
}

// DecodeBytes is Decode without the conversion to a string: the result may
// be shared (see Decoder) and must not be modified. Prometheus label values
// must be UTF-8, so invalid sequences in the last decoder's output become
// U+FFFD, as the string decoder does (valid output is returned as is, without
// allocating). Errors are ErrSkip, or a *DecodeError whose Decoder is the
// name of the failing decoder and whose Err is that decoder's error.
func (c Chain) DecodeBytes(in []byte) ([]byte, error) {
	out := in
	for i, d := range c {
		var err error
		if out, err = d.Decode(out); err != nil {
			if err == ErrSkip {
				return nil, err
			}
			return nil, &DecodeError{Index: i, Decoder: NameOf(d), Err: err}
		}
	}
	if !utf8.Valid(out) {
		out = bytes.ToValidUTF8(out, []byte("\uFFFD"))
	}
	return out, nil
}

// DecodeSettled is DecodeBytes that also says whether the value is settled:
// whether the same input will decode the same way later. A value is not
// settled when a decoder of the chain printed a stand-in for what it does
// not know yet but expects to learn (the kube decoders, for a pod the pod
// watch has not delivered, or a container the pod's status does not list
// yet); the caller should decode the input again next time rather than
// keep the value. Decoders that do not implement it are settled.
func (c Chain) DecodeSettled(in []byte) ([]byte, bool, error) {
	out, settled := in, true
	for i, d := range c {
		var err error
		if u, ok := d.(unsettler); ok {
			var s bool
			out, s, err = u.decodeSettled(out)
			settled = settled && s
		} else {
			out, err = d.Decode(out)
		}
		if err != nil {
			if err == ErrSkip {
				return nil, true, err
			}
			return nil, true, &DecodeError{Index: i, Decoder: NameOf(d), Err: err}
		}
	}
	if !utf8.Valid(out) {
		out = bytes.ToValidUTF8(out, []byte("\uFFFD"))
	}
	return out, settled, nil
}

// AppendSettled appends the chain's value of in to dst and says whether it
// is settled, as DecodeSettled; errors are DecodeSettled's, and dst is
// then returned as it was. A chain of one decoder that can append (uint)
// writes straight into dst: no copy, no allocation, and no UTF-8 check
// (its text is ASCII).
func (c Chain) AppendSettled(dst, in []byte) ([]byte, bool, error) {
	if len(c) == 1 {
		if a, ok := c[0].(appender); ok {
			out, err := a.appendDecode(dst, in)
			if err != nil {
				return dst, true, &DecodeError{Decoder: NameOf(c[0]), Err: err}
			}
			return out, true, nil
		}
	}
	out, settled, err := c.DecodeSettled(in)
	if err != nil {
		return dst, settled, err
	}
	return append(dst, out...), settled, nil
}

// appender is a decoder that can append its ASCII, settled output to a
// buffer (see AppendSettled). It never returns ErrSkip.
type appender interface {
	appendDecode(dst, in []byte) ([]byte, error)
}

// unsettler is a decoder whose output may not be settled (see
// DecodeSettled).
type unsettler interface {
	decodeSettled(in []byte) ([]byte, bool, error)
}

// DecodeError is a decoder's failure on one map key: Decoder is the name of
// the decoder that failed ("ksym", "static_map", ...), Index its position in
// the chain, and Err its error, which errors.Is and errors.As reach through
// Unwrap. Decoders never quote more of their input than a short hex token
// (at most 8 bytes: see Token), so the text is safe to log.
type DecodeError struct {
	Index   int
	Decoder string
	Err     error
}

// Error returns the decoder's error text, which starts with the decoder's
// name ("ksym: ..."); the name is prepended when it does not.
func (e *DecodeError) Error() string {
	msg := e.Err.Error()
	if strings.HasPrefix(msg, e.Decoder+":") {
		return msg
	}
	return e.Decoder + ": " + msg
}

func (e *DecodeError) Unwrap() error { return e.Err }

// Named is implemented by every decoder of this package: Name returns the
// decoder's registered name ("uint", "ksym", ...).
type Named interface {
	Name() string
}

// NameOf returns d's registered name, or its Go type for a decoder from
// outside this package that does not implement Named.
func NameOf(d Decoder) string {
	if n, ok := d.(Named); ok {
		return n.Name()
	}
	return fmt.Sprintf("%T", d)
}

// Injective says that the chain gives distinct inputs distinct values: it
// is one uint or hex decoder of a raw field (the decimal or hex text of the
// field's bytes). A caller may then take the identity of a label set from
// the key's bytes alone.
func (c Chain) Injective() bool {
	if len(c) != 1 {
		return false
	}
	switch d := c[0].(type) {
	case *uintDecoder:
		return true
	case *hexDecoder:
		return d.size != textInput
	}
	return false
}

// Names returns the distinct names of the chain's decoders, in chain order.
func (c Chain) Names() []string {
	var names []string
	for _, d := range c {
		n := NameOf(d)
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return names
}

// NewChain builds the decoders of one label. size is the label's width in
// bytes: the first decoder gets it, so that it can reject widths it cannot
// handle; the later ones read the text output of the one before and get
// size 0 (see New). Errors name the decoder and the bad setting; the caller
// adds the file and field.
func (e *Env) NewChain(confs []config.Decoder, size int, stacks StackMaps) (Chain, error) {
	chain := make(Chain, 0, len(confs))
	for i, conf := range confs {
		if i > 0 {
			size = textInput
		}
		d, err := e.New(conf, size, stacks)
		if err != nil {
			return nil, &ChainError{Index: i, Name: conf.Name, Err: err}
		}
		chain = append(chain, d)
	}
	return chain, nil
}

// ChainError says which decoder of a chain could not be built.
type ChainError struct {
	Index int
	Name  string
	Err   error
}

func (e *ChainError) Error() string { return e.Err.Error() }
func (e *ChainError) Unwrap() error { return e.Err }

// ErrUnknown is returned (wrapped) for a decoder name that does not exist.
var ErrUnknown = errors.New("unknown decoder")

// New builds one decoder from its config. size is the width in bytes of the
// raw field the decoder reads, or 0 when its input is the text output of an
// earlier decoder. Decoders that need the raw field (uint, ksym, kstack,
// inet_ip, majorminor, ifname) reject size 0; hex then prints the text's
// bytes, and syscall, errno and cgroup parse the decimal text of an earlier
// uint decoder, as in ebpf_exporter's [uint, syscall] chains. stacks is used
// by kstack only and may be nil otherwise.
//
// size must be in [0, MaxSize]; anything else fails with an error wrapping
// ErrSize. Settings from the config are bounded too: at most
// MaxStaticMapEntries static_map entries and MaxRegexps regexps of at most
// MaxRegexpLen bytes each.
func (e *Env) New(conf config.Decoder, size int, stacks StackMaps) (Decoder, error) {
	ctor, ok := registry[conf.Name]
	if !ok {
		return nil, fmt.Errorf("%w %s (known: %s)", ErrUnknown, config.Quote(conf.Name), knownNames())
	}
	if size < 0 || size > MaxSize {
		return nil, fmt.Errorf("%s: %w: %d bytes (want 0 to %d)", conf.Name, ErrSize, size, MaxSize)
	}
	return ctor(e, conf, size, stacks)
}

// MaxSize bounds the width in bytes of the field a decoder reads: the
// config's label size bound, also enforced here for chains built in code.
const MaxSize = config.MaxLabelSize

// ErrSize is returned (wrapped) by New for a field width outside
// [0, MaxSize].
var ErrSize = errors.New("field size out of range")

// tokenMax is how many input bytes Token shows.
const tokenMax = 8

// Token formats the start of a decoder input for an error message: at most
// 8 bytes in hex, then "..." and the length when there are more
// ("0x3132", "0x0102030405060708... (24 bytes)", "0x (empty)"). Map bytes
// never appear in errors (which are logged) otherwise.
func Token(in []byte) string {
	if len(in) == 0 {
		return "0x (empty)"
	}
	if len(in) <= tokenMax {
		return "0x" + hex.EncodeToString(in)
	}
	return fmt.Sprintf("0x%s... (%d bytes)", hex.EncodeToString(in[:tokenMax]), len(in))
}

type constructor func(e *Env, conf config.Decoder, size int, stacks StackMaps) (Decoder, error)

// registry maps decoder names to constructors; each decoder's file adds
// itself in an init function.
var registry = map[string]constructor{}

func register(name string, c constructor) { registry[name] = c }

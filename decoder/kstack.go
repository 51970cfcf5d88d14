// SPDX-License-Identifier: Apache-2.0

package decoder

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/kernel-exporter/kernel_exporter/config"
)

func init() { register("kstack", newKstack) }

// noStack is the label value of a key without a stack: a negative stack id
// (bpf_get_stackid failed, e.g. -EFAULT) or no frames.
var noStack = []byte("[no stack]")

// kstackDecoder turns a kernel stack into folded-stack text: the symbol
// names of its frames (resolved like ksym), OUTERMOST first, joined by ";"
// ("entry_SYSCALL_64;do_syscall_64;__x64_sys_sendto;...;tcp_push_one"), the
// format flame graph tools read. Frames outside kallsyms print in hex.
// With Env.Compat the frames print as cloudflare/ebpf_exporter prints them:
// innermost first, one per line, "??" outside kallsyms, "" for no frames.
//
// A field of 4 or 8 bytes is a stack id returned by bpf_get_stackid, read
// from the BPF_MAP_TYPE_STACK_TRACE map named by stack_map (empty: the
// object's only one); a negative id decodes to "[no stack]". A field that is
// a larger multiple of 8 bytes holds the frames themselves (u64 addresses,
// innermost first, zero-terminated unless full), as bpf_get_stack writes
// them.
type kstackDecoder struct {
	e        *Env
	size     int
	stackMap string
	stacks   StackMaps

	mu     sync.Mutex // serializes resolving the reader
	reader atomic.Pointer[stackReaderRef]
}

type stackReaderRef struct{ r StackReader }

func newKstack(e *Env, conf config.Decoder, size int, stacks StackMaps) (Decoder, error) {
	switch {
	case size == textInput:
		return nil, errors.New("kstack: must be the first decoder of a chain: it reads the raw stack id or frames")
	case size == 4 || size == 8 || (size > 8 && size%8 == 0):
	default:
		return nil, fmt.Errorf("kstack: size %d not supported (want 4 or 8 for a stack id, or a multiple of 8 for inline frames)", size)
	}
	e.prefetchKallsyms()
	return &kstackDecoder{e: e, size: size, stackMap: conf.StackMap, stacks: stacks}, nil
}

// Decode fails if in does not have the field's width, kallsyms cannot be
// read, or (for stack ids) the stack map cannot be found or read.
func (d *kstackDecoder) Decode(in []byte) ([]byte, error) {
	if err := checkLen("kstack", in, d.size); err != nil {
		return nil, err
	}
	if d.size > 8 {
		return d.format(in, nil, len(in)/8)
	}
	v, _ := nativeUint(in)
	// Stack ids are non-negative int32s; the kernel returns a negative
	// errno instead of one, which the program may have stored as s32, s64
	// or a zero-extended u32.
	switch {
	case int64(v) < 0 || (v <= 1<<32-1 && int32(v) < 0):
		return noStack, nil
	case v > 1<<31-1:
		return nil, fmt.Errorf("kstack: bad stack id %d", v)
	}
	r, err := d.stackReader()
	if err != nil {
		return nil, err
	}
	frames, err := r.Stack(uint32(v))
	if err != nil {
		return nil, fmt.Errorf("kstack: stack %d: %w", v, err)
	}
	return d.format(nil, frames, len(frames))
}

// format folds n frames, taken from raw (u64s in host byte order) or
// frames, innermost first in either, stopping at the first zero.
func (d *kstackDecoder) format(raw []byte, frames []uint64, n int) ([]byte, error) {
	frame := func(i int) uint64 {
		if raw != nil {
			return binary.NativeEndian.Uint64(raw[i*8:])
		}
		return frames[i]
	}
	depth := 0
	for depth < n && frame(depth) != 0 {
		depth++
	}
	if depth == 0 && d.e.Compat {
		return []byte{}, nil
	}
	if depth == 0 {
		return noStack, nil
	}
	syms, err := d.e.kallsyms()
	if err != nil {
		return nil, fmt.Errorf("kstack: %w", err)
	}
	if d.e.Compat {
		return refStack(syms, frame, depth), nil
	}
	out := make([]byte, 0, depth*24)
	for i := depth - 1; i >= 0; i-- {
		if i != depth-1 {
			out = append(out, ';')
		}
		addr := frame(i)
		if name, ok := syms.lookup(addr); ok {
			out = append(out, name...)
		} else {
			out = hexAddr(out, addr)
		}
	}
	return out, nil
}

var errNoStackMaps = errors.New("kstack: no stack-trace maps to read stack ids from")

// stackReader resolves the stack map on first use rather than when the
// decoder is built, since the BPF object may not be loaded yet then. A
// failed resolution is retried at the next Decode.
func (d *kstackDecoder) stackReader() (StackReader, error) {
	if ref := d.reader.Load(); ref != nil {
		return ref.r, nil
	}
	if d.stacks == nil {
		return nil, errNoStackMaps
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if ref := d.reader.Load(); ref != nil {
		return ref.r, nil
	}
	r, err := d.stacks(d.stackMap)
	if err != nil {
		if d.stackMap == "" {
			return nil, fmt.Errorf("kstack: %w", err)
		}
		return nil, fmt.Errorf("kstack: stack_map %s: %w", config.Quote(d.stackMap), err)
	}
	if r == nil {
		return nil, errNoStackMaps
	}
	d.reader.Store(&stackReaderRef{r: r})
	return r, nil
}

// refStack formats depth frames as cloudflare/ebpf_exporter does
// (Env.Compat): innermost first, one per line, "??" for an address outside
// kallsyms.
func refStack(syms *kallsyms, frame func(int) uint64, depth int) []byte {
	out := make([]byte, 0, depth*24)
	for i := range depth {
		if i > 0 {
			out = append(out, '\n')
		}
		if name, ok := syms.lookup(frame(i)); ok {
			out = append(out, name...)
		} else {
			out = append(out, "??"...)
		}
	}
	return out
}

// SPDX-License-Identifier: Apache-2.0

package decoder

import (
	"fmt"
	"syscall"

	"github.com/kernel-exporter/kernel_exporter/config"
	"golang.org/x/sys/unix"
)

func init() { register("errno", newErrno) }

// errnoDecoder turns an errno value into its symbolic name: 2 → "ENOENT".
// The value is a raw signed integer of 1, 2, 4 or 8 bytes, or the decimal
// text of an earlier uint decoder. Negative values, as syscalls and kernel
// functions return them, are read as their absolute value (-11 → "EAGAIN").
// Zero prints as "0", and values without a name print in decimal. Besides
// the userspace errnos, the kernel-internal ones that tracing sees
// (ERESTARTSYS = 512 …) have names. With Env.Compat it prints what
// cloudflare/ebpf_exporter prints: golang.org/x/sys's name of the value,
// else "unknown:<n>" (0 and the kernel-internal values included).
type errnoDecoder struct {
	size int
	// compat prints as cloudflare/ebpf_exporter does (Env.Compat): the
	// name golang.org/x/sys gives, else "unknown:<n>" (also for 0).
	compat bool
}

// kernelErrnos are the values of include/linux/errno.h, which userspace
// never sees but kprobes and tracepoints do.
var kernelErrnos = map[int]string{
	512: "ERESTARTSYS",
	513: "ERESTARTNOINTR",
	514: "ERESTARTNOHAND",
	515: "ENOIOCTLCMD",
	516: "ERESTART_RESTARTBLOCK",
	517: "EPROBE_DEFER",
	518: "EOPENSTALE",
	519: "ENOPARAM",
	521: "EBADHANDLE",
	522: "ENOTSYNC",
	523: "EBADCOOKIE",
	524: "ENOTSUPP",
	525: "ETOOSMALL",
	526: "ESERVERFAULT",
	527: "EBADTYPE",
	528: "EJUKEBOX",
	529: "EIOCBQUEUED",
	530: "ERECALLCONFLICT",
	531: "ENOGRACE",
}

// errnoFixes replaces x/sys/unix names that differ from the kernel's UAPI
// headers: where two names share a value, x/sys picks the alias (ENOTSUP,
// EFSCORRUPTED), and it lists 134, which Linux does not define.
var errnoFixes = map[int]string{
	95:  "EOPNOTSUPP",
	117: "EUCLEAN",
	134: "",
}

// errnoNames is indexed by errno value; nil means no name.
var errnoNames = func() [][]byte {
	names := make([][]byte, 532)
	for i := 1; i < len(names); i++ {
		n := unix.ErrnoName(syscall.Errno(i))
		if fix, ok := errnoFixes[i]; ok {
			n = fix
		}
		if k, ok := kernelErrnos[i]; ok {
			n = k
		}
		if n != "" {
			names[i] = []byte(n)
		}
	}
	return names
}()

func newErrno(e *Env, _ config.Decoder, size int, _ StackMaps) (Decoder, error) {
	if size != textInput {
		if err := checkSize("errno", size, 1, 2, 4, 8); err != nil {
			return nil, err
		}
	}
	return &errnoDecoder{size: size, compat: e != nil && e.Compat}, nil
}

// Decode fails on a raw field of the wrong width or on text that is not a
// decimal number (a leading "-" is accepted).
func (d *errnoDecoder) Decode(in []byte) ([]byte, error) {
	var v uint64
	if d.size == textInput {
		text := in
		if len(text) > 1 && text[0] == '-' {
			text = text[1:]
		}
		n, ok := parseDecimal(text)
		if !ok {
			return nil, fmt.Errorf("errno: bad number %s", Token(in))
		}
		v = n
	} else {
		if err := checkLen("errno", in, d.size); err != nil {
			return nil, err
		}
		n, _ := nativeInt(in)
		v = uint64(n)
		if n < 0 {
			v = -v // two's complement: also right for math.MinInt64
		}
	}
	if d.compat {
		if v <= 1<<32-1 {
			if n := unix.ErrnoName(syscall.Errno(v)); n != "" {
				return []byte(n), nil
			}
		}
		return appendDecimal([]byte("unknown:"), v), nil
	}
	if v < uint64(len(errnoNames)) && errnoNames[v] != nil {
		return errnoNames[v], nil
	}
	return appendDecimal(nil, v), nil
}

// SPDX-License-Identifier: Apache-2.0

package decoder

import (
	"fmt"
	"strconv"

	"github.com/kernel-exporter/kernel_exporter/config"
)

func init() { register("signal", newSignal) }

// signalDecoder turns a signal number into its name: 9 → "SIGKILL",
// 17 → "SIGCHLD". The value is a raw signed integer of 1, 2, 4 or 8 bytes
// (the int sig of the signal:signal_generate and signal:signal_deliver
// tracepoints, or of kill(2)'s arguments), or the decimal text of an earlier
// uint decoder, optionally with a leading "-".
//
// Names are those of the kernel's include/uapi/asm-generic/signal.h and
// arch/x86/include/uapi/asm/signal.h, which agree for 1 to 31 (x86-64 and
// arm64 both use them; alpha, mips, parisc and sparc number differently).
// Where two names share a number the first one of the header is printed:
// SIGABRT (not SIGIOT), SIGIO (not SIGPOLL), SIGSYS (not SIGUNUSED).
// Realtime signals are numbered from the kernel's SIGRTMIN, 32, up to
// SIGRTMAX, 64: 32 → "SIGRTMIN", 40 → "SIGRTMIN+8". glibc reserves 32 and
// 33 for its threads and its own SIGRTMIN is 34, so what a program calls
// SIGRTMIN prints as "SIGRTMIN+2". Every other value (0, which kill(2)
// uses to probe a process, negative numbers, numbers above 64) prints in
// decimal.
type signalDecoder struct {
	size int
}

const (
	sigRTMin = 32 // include/uapi/asm-generic/signal.h SIGRTMIN
	sigRTMax = 64 // _NSIG on x86-64 and arm64
)

// signalNames is indexed by signal number, 1 to 31.
var signalNames = [sigRTMin][]byte{
	1: []byte("SIGHUP"), 2: []byte("SIGINT"), 3: []byte("SIGQUIT"), 4: []byte("SIGILL"),
	5: []byte("SIGTRAP"), 6: []byte("SIGABRT"), 7: []byte("SIGBUS"), 8: []byte("SIGFPE"),
	9: []byte("SIGKILL"), 10: []byte("SIGUSR1"), 11: []byte("SIGSEGV"), 12: []byte("SIGUSR2"),
	13: []byte("SIGPIPE"), 14: []byte("SIGALRM"), 15: []byte("SIGTERM"), 16: []byte("SIGSTKFLT"),
	17: []byte("SIGCHLD"), 18: []byte("SIGCONT"), 19: []byte("SIGSTOP"), 20: []byte("SIGTSTP"),
	21: []byte("SIGTTIN"), 22: []byte("SIGTTOU"), 23: []byte("SIGURG"), 24: []byte("SIGXCPU"),
	25: []byte("SIGXFSZ"), 26: []byte("SIGVTALRM"), 27: []byte("SIGPROF"), 28: []byte("SIGWINCH"),
	29: []byte("SIGIO"), 30: []byte("SIGPWR"), 31: []byte("SIGSYS"),
}

// realtimeNames holds "SIGRTMIN", "SIGRTMIN+1" … "SIGRTMIN+32", indexed by
// signal number minus 32, built once so that Decode does not allocate.
var realtimeNames = func() [sigRTMax - sigRTMin + 1][]byte {
	var names [sigRTMax - sigRTMin + 1][]byte
	names[0] = []byte("SIGRTMIN")
	for i := 1; i < len(names); i++ {
		names[i] = []byte("SIGRTMIN+" + strconv.Itoa(i))
	}
	return names
}()

func newSignal(_ *Env, _ config.Decoder, size int, _ StackMaps) (Decoder, error) {
	if size != textInput {
		if err := checkSize("signal", size, 1, 2, 4, 8); err != nil {
			return nil, err
		}
	}
	return &signalDecoder{size: size}, nil
}

// Decode fails on a raw field of the wrong width or on text that is not a
// decimal number (a leading "-" is accepted).
func (d *signalDecoder) Decode(in []byte) ([]byte, error) {
	var v int64
	if d.size == textInput {
		text, neg := in, false
		if len(text) > 1 && text[0] == '-' {
			text, neg = text[1:], true
		}
		n, ok := parseDecimal(text)
		if !ok {
			return nil, fmt.Errorf("signal: bad number %s", Token(in))
		}
		if neg || n > sigRTMax {
			// Not a signal: printed as given.
			return in, nil
		}
		v = int64(n)
	} else {
		if err := checkLen("signal", in, d.size); err != nil {
			return nil, err
		}
		v, _ = nativeInt(in)
	}
	switch {
	case v > 0 && v < sigRTMin:
		return signalNames[v], nil
	case v >= sigRTMin && v <= sigRTMax:
		return realtimeNames[v-sigRTMin], nil
	}
	return strconv.AppendInt(nil, v, 10), nil
}

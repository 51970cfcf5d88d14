// SPDX-License-Identifier: Apache-2.0

package profile

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// kernelSuffix marks kernel frames in folded stacks, as the FlameGraph
// scripts (stackcollapse-perf.pl --kernel, bcc's tools with -f) write
// them; flamegraph.pl --colors=java draws them apart.
const kernelSuffix = "_[k]"

// FoldedOptions configure WriteFolded.
type FoldedOptions struct {
	// NoComm leaves out the first frame, the thread's comm (bcc's profile
	// -f and stackcollapse-perf.pl start each stack with it).
	NoComm bool
	// NoKernelSuffix writes kernel frames without "_[k]".
	NoKernelSuffix bool
}

// WriteFolded writes p as folded stacks, the input of Brendan Gregg's
// flamegraph.pl: one line per distinct stack, outermost frame first,
// frames joined by ';', then a space and the stack's value (samples, or
// nanoseconds off the CPU) as an integer:
//
//	burn;_start;__libc_start_main;main;burn_a 702
//	burn;_start;__libc_start_main;main;burn_b 298
//	cat;read;entry_SYSCALL_64_after_hwframe_[k];...;read_iter_zero_[k] 12
//
// Lines are sorted. ';' in a name is written ':', and control characters
// '?', so that no name can split a frame or a line.
func (p *Profile) WriteFolded(w io.Writer, o FoldedOptions) error {
	lines := map[string]int64{}
	for i := range p.Samples {
		lines[folded(&p.Samples[i], o)] += p.Samples[i].Value
	}
	keys := make([]string, 0, len(lines))
	for k := range lines {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	bw := bufio.NewWriter(w)
	for _, k := range keys {
		bw.WriteString(k)
		bw.WriteByte(' ')
		bw.WriteString(strconv.FormatInt(lines[k], 10))
		bw.WriteByte('\n')
	}
	return bw.Flush()
}

// folded returns the frames of s, outermost first, joined by ';'.
func folded(s *Sample, o FoldedOptions) string {
	var b strings.Builder
	first := true
	sep := func() {
		if !first {
			b.WriteByte(';')
		}
		first = false
	}
	if !o.NoComm {
		sep()
		writeFrameName(&b, s.Comm)
	}
	for i := len(s.Stack) - 1; i >= 0; i-- {
		sep()
		f := s.Stack[i]
		writeFrameName(&b, f.Function)
		if f.Kernel && !o.NoKernelSuffix {
			b.WriteString(kernelSuffix)
		}
	}
	if first {
		b.WriteString("[no stack]")
	}
	return b.String()
}

// writeFrameName writes a frame name that cannot break the format.
func writeFrameName(b *strings.Builder, name string) {
	if name == "" {
		b.WriteString("[unknown]")
		return
	}
	for _, r := range name {
		switch {
		case r == ';':
			b.WriteByte(':')
		case r < 0x20 || r == 0x7f:
			b.WriteByte('?')
		default:
			b.WriteRune(r)
		}
	}
}

// Bounds of ParseFolded.
const (
	// MaxFoldedLine bounds one line of folded stacks.
	MaxFoldedLine = 1 << 20
	// MaxFoldedFrames bounds the frames of one line; more is an error.
	MaxFoldedFrames = 4096
	// MaxFoldedLines bounds the lines of a file.
	MaxFoldedLines = 10_000_000
)

// ErrNotFolded is returned by ParseFolded for input that is not folded
// stacks.
var ErrNotFolded = errors.New("not folded stacks")

// ParseFolded reads folded stacks (as WriteFolded, flamegraph.pl's input)
// into a profile of kind k. The first frame of each line is taken as the
// comm (as bcc and stackcollapse-perf.pl write it); frames ending in "_[k]"
// are kernel frames. Counts must be non-negative integers (a decimal count,
// which flamegraph.pl allows, is rounded down); a line with two counts
// (difffolded.pl's output) takes the second, unless the first would leave
// no frame (then it is part of the comm, which may hold spaces and
// digits: " 0 5" is comm " 0", count 5). Empty lines are skipped.
// Errors name the line; more than MaxFoldedLines lines, a line longer than
// MaxFoldedLine bytes or with more than MaxFoldedFrames frames is an error.
func ParseFolded(r io.Reader, k Kind) (*Profile, error) {
	p := &Profile{Kind: k}
	frames := newInterner()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxFoldedLine)
	agg := newAggregator(p)
	n := 0
	for sc.Scan() {
		n++
		if n > MaxFoldedLines {
			return nil, fmt.Errorf("more than %d lines", MaxFoldedLines)
		}
		line := bytes.TrimRight(sc.Bytes(), "\r")
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		stack, count, ok := splitCount(line)
		if s2, _, ok2 := splitCount(stack); ok && ok2 && len(s2) > 0 {
			stack = s2 // difffolded.pl: "stack base new"
		}
		if !ok || len(stack) == 0 {
			return nil, fmt.Errorf("line %d: %w: want frames;joined;by;semicolons, a space and a count", n, ErrNotFolded)
		}
		names := bytes.Split(stack, []byte{';'})
		if len(names) > MaxFoldedFrames {
			return nil, fmt.Errorf("line %d: more than %d frames", n, MaxFoldedFrames)
		}
		s := Sample{Comm: string(names[0]), Value: count, Count: count}
		if k == OffCPU {
			s.Count = 1
		}
		for i := len(names) - 1; i >= 1; i-- {
			name := string(names[i])
			kernel := false
			if n, ok := strings.CutSuffix(name, kernelSuffix); ok {
				name, kernel = n, true
			}
			s.Stack = append(s.Stack, frames.get(kernel, true, "", name, ""))
		}
		agg.add(string(stack), s)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("line %d: longer than %d bytes", n+1, MaxFoldedLine)
		}
		return nil, err
	}
	if len(p.Samples) == 0 {
		return nil, fmt.Errorf("%w: no stacks", ErrNotFolded)
	}
	return p, nil
}

// splitCount splits "stack count" at the last space; the count is a
// non-negative integer or decimal (rounded down) below 2^62.
func splitCount(line []byte) ([]byte, int64, bool) {
	i := bytes.LastIndexByte(line, ' ')
	if i < 0 {
		return nil, 0, false
	}
	num := string(line[i+1:])
	if d := strings.IndexByte(num, '.'); d >= 0 {
		if strings.Trim(num[d+1:], "0123456789") != "" {
			return nil, 0, false
		}
		num = num[:d]
	}
	v, err := strconv.ParseInt(num, 10, 64)
	if err != nil || v < 0 || v >= 1<<62 {
		return nil, 0, false
	}
	return bytes.TrimRight(line[:i], " "), v, true
}

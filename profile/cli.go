// SPDX-License-Identifier: Apache-2.0

package profile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/kernel-exporter/kernel_exporter/internal/plural"
	"github.com/kernel-exporter/kernel_exporter/loader"
	"github.com/kernel-exporter/kernel_exporter/profile/symbolize"
)

// Exit codes of the profile commands.
const (
	ExitOK     = 0
	ExitFailed = 1
	ExitUsage  = 2
)

// The output formats of the profile command.
const (
	FormatPprof  = "pprof"
	FormatFolded = "folded"
)

// RecordOptions configure Record: the profile command.
type RecordOptions struct {
	// Options of the session (Kind, Duration, Frequency, MinBlock,
	// Filter...).
	Options
	// Output is the file written ("" or "-": standard output); Format
	// FormatPprof or FormatFolded ("": pprof, or folded when Output ends
	// in .folded or .txt).
	Output, Format string
	Stdout, Stderr io.Writer
}

// CheckFormat returns the format to write: format, or from output's
// extension when format is "". The error names the flag.
func CheckFormat(format, output string) (string, error) {
	switch format {
	case FormatPprof, FormatFolded:
		return format, nil
	case "":
		if ext := filepath.Ext(output); ext == ".folded" || ext == ".txt" {
			return FormatFolded, nil
		}
		return FormatPprof, nil
	}
	return "", fmt.Errorf("--format %q: want %s or %s", format, FormatPprof, FormatFolded)
}

// Record is the profile command: it takes one profile with o (Ctrl-C, that
// is ctx done, ends it early and still writes it), writes it to o.Output,
// and prints a one-line summary on Stderr. It returns ExitOK, ExitUsage
// for bad options, or ExitFailed (the reason on Stderr). Nothing stays
// loaded or attached when it returns. Pprof to a terminal is refused.
func Record(ctx context.Context, o RecordOptions) int {
	fail := func(code int, format string, args ...any) int {
		fmt.Fprintf(o.Stderr, "kernel_exporter profile: %s\n", fmt.Sprintf(format, args...))
		return code
	}
	format, err := CheckFormat(o.Format, o.Output)
	if err != nil {
		return fail(ExitUsage, "%v", err)
	}
	if o.Options.Duration == 0 {
		o.Options.Duration = DefaultDuration
	}
	toStdout := o.Output == "" || o.Output == "-"
	if toStdout && format == FormatPprof && isTerminal(o.Stdout) {
		return fail(ExitUsage, "pprof is binary: give -o FILE, or --format=folded")
	}
	if o.Options.Symbolizer == nil {
		o.Options.Symbolizer = CommandSymbolizer(o.Options.Logger)
	}
	s, err := NewSession(o.Options)
	if err != nil {
		return fail(ExitUsage, "%v", err)
	}
	p, err := s.Run(ctx)
	if err != nil {
		if errors.Is(err, loader.ErrUnsupported) {
			return fail(ExitFailed, "this kernel or machine cannot profile: %v", err)
		}
		return fail(ExitFailed, "%v", err)
	}
	var buf bytes.Buffer
	if format == FormatFolded {
		err = p.WriteFolded(&buf, FoldedOptions{})
	} else {
		err = p.WritePprof(&buf)
	}
	if err != nil {
		return fail(ExitFailed, "%v", err)
	}
	if toStdout {
		_, err = o.Stdout.Write(buf.Bytes())
	} else {
		err = os.WriteFile(o.Output, buf.Bytes(), 0o644)
	}
	if err != nil {
		return fail(ExitFailed, "write: %v", err)
	}
	fmt.Fprintln(o.Stderr, Summary(p))
	return ExitOK
}

// CommandSymbolizer is the symbolizer of the profile and top cpu
// commands: a person asked for this one profile, so symbol tables are read
// without the server's load budget, and cached up to 64 MiB (the process
// exits after it).
func CommandSymbolizer(log *slog.Logger) *symbolize.Symbolizer {
	return symbolize.New(symbolize.Options{LoadRate: -1, CacheBytes: 64 << 20, Logger: log})
}

// Summary is a one-line description of a profile taken: kind, event,
// length, samples, lost stacks and the share of user frames resolved.
func Summary(p *Profile) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s profile (%s", p.Kind, p.Event)
	if p.Frequency > 0 {
		fmt.Fprintf(&b, ", %d Hz", p.Frequency)
	}
	fmt.Fprintf(&b, ") of %.1fs: %d %s in %s", p.Duration.Seconds(), p.Total(), p.Unit(), plural.Count(len(p.Samples), "stack"))
	st := p.Stats
	if lost := st.KernelStacksLost + st.UserStacksLost + st.StacksMissing; lost > 0 {
		fmt.Fprintf(&b, ", %s lost", plural.Count(lost, "stack"))
	}
	if st.CountsFull > 0 {
		fmt.Fprintf(&b, ", %s not counted (map full)", plural.Count(st.CountsFull, "sample"))
	}
	if u := st.Symbols.UserFrames; u > 0 {
		fmt.Fprintf(&b, "; user frames resolved %.1f%% (%d of %d)", 100*float64(st.Symbols.UserResolved)/float64(u), st.Symbols.UserResolved, u)
	}
	if k := st.Symbols.KernelFrames; k > 0 {
		fmt.Fprintf(&b, ", kernel %.1f%%", 100*float64(st.Symbols.KernelResolved)/float64(k))
	}
	return b.String()
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// DiffOptions configure DiffFiles: the profile diff command.
type DiffOptions struct {
	// Format: "table" (default) or FormatFolded (difffolded.pl's lines,
	// for flamegraph.pl).
	Format string
	// Top is the number of functions listed as grown and as shrunk
	// (default 20); By the share they are ranked by.
	Top int
	By  Measure
	// Kind of folded inputs (pprof files say theirs): CPU when "".
	Kind Kind
	// Inputs say how URLs are fetched (its Kind is set from Kind).
	Inputs         InputOptions
	Stdout, Stderr io.Writer
	Logger         *slog.Logger
}

// DiffInputs is the profile diff command: it reads two sides, each one or
// more profiles (files, pprof or folded, see ReadFile; or URLs), merged
// with every input weighted equally (ReadInputs), and writes their
// comparison (DiffResult.WriteTable or WriteFolded). It returns ExitOK,
// ExitUsage or ExitFailed.
func DiffInputs(ctx context.Context, base, new []string, o DiffOptions) int {
	fail := func(code int, format string, args ...any) int {
		fmt.Fprintf(o.Stderr, "kernel_exporter profile diff: %s\n", fmt.Sprintf(format, args...))
		return code
	}
	if o.Format == "" {
		o.Format = "table"
	}
	if o.Format != "table" && o.Format != FormatFolded {
		return fail(ExitUsage, "--format %q: want table or folded", o.Format)
	}
	if o.Top == 0 {
		o.Top = 20
	}
	if o.Top < 1 || o.Top > 10000 {
		return fail(ExitUsage, "--top %d: must be 1 to 10000", o.Top)
	}
	kind := o.Kind
	if kind == "" {
		kind = CPU
	}
	o.Inputs.Kind = kind
	var b, n *Profile
	var berr, nerr error
	var wg sync.WaitGroup
	wg.Go(func() { b, berr = ReadInputs(ctx, base, o.Inputs) })
	wg.Go(func() { n, nerr = ReadInputs(ctx, new, o.Inputs) })
	wg.Wait()
	if berr != nil {
		return fail(ExitFailed, "base: %v", berr)
	}
	if nerr != nil {
		return fail(ExitFailed, "new: %v", nerr)
	}
	d, err := Diff(b, n)
	if err != nil {
		return fail(ExitFailed, "%v", err)
	}
	if o.Format == FormatFolded {
		err = d.WriteFolded(o.Stdout)
	} else {
		err = d.WriteTable(o.Stdout, o.Top, o.By)
	}
	if err != nil {
		return fail(ExitFailed, "write: %v", err)
	}
	return ExitOK
}

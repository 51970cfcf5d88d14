// SPDX-License-Identifier: Apache-2.0

package term

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/kernel-exporter/kernel_exporter/internal/printable"
)

// A View is what top redraws: a program's counters (the view of top
// <program>), or a built-in view (top bpf).
type View interface {
	// Baseline reads what the first frame is measured from.
	Baseline() error
	// Frame reads again and writes one frame of the interval that ended
	// at now and lasted elapsed: at most height lines, each cut to width
	// runes (0: not cut), ending in "\n", with no escape sequences. An
	// error ends top with ExitFailed.
	Frame(w io.Writer, now time.Time, elapsed time.Duration, height, width int) error
}

// RedrawOptions configure Redraw.
type RedrawOptions struct {
	// Name is what top shows ("syscalls", "bpf"), for the first line
	// and errors.
	Name string
	// Interval between frames; Count of frames (0: until ctx is done).
	Interval time.Duration
	Count    int
	// Stdout gets the frames: on a terminal they are redrawn in place on
	// the alternate screen, fitted to its size; otherwise they follow
	// each other, separated by a blank line. Stderr gets errors.
	Stdout, Stderr io.Writer
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Redraw takes v's baseline, then every o.Interval draws a frame of v,
// o.Count times or until ctx is done. It returns ExitOK, or ExitFailed
// when v fails or the output cannot be written; the terminal is restored
// on return.
func Redraw(ctx context.Context, o RedrawOptions, v View) int {
	if o.Now == nil {
		o.Now = time.Now
	}
	fail := func(err error) int {
		fmt.Fprintf(o.Stderr, "kernel_exporter top %s: %s\n", printable.String(o.Name), printable.String(err.Error()))
		return ExitFailed
	}
	if err := v.Baseline(); err != nil {
		return fail(err)
	}
	last := o.Now()
	scr := NewScreen(o.Stdout, fmt.Sprintf("kernel_exporter top %s  interval %v: measuring the first interval...", printable.String(o.Name), o.Interval))
	defer scr.Close()
	t := time.NewTicker(o.Interval)
	defer t.Stop()
	for n := 0; o.Count == 0 || n < o.Count; n++ {
		if !tick(ctx, t) {
			return ExitOK
		}
		now := o.Now()
		height, width := scr.Size()
		var b strings.Builder
		if err := v.Frame(&b, now, now.Sub(last), height, width); err != nil {
			return fail(err)
		}
		last = now
		if err := scr.Draw(b.String()); err != nil {
			return fail(fmt.Errorf("write: %w", err))
		}
	}
	return ExitOK
}

// Builtin is a built-in view of top: `kernel_exporter top <Name>` shows
// it instead of a program's counters. Its name is reserved: no bundled
// program has it (cmd/kernel_exporter TestTopViewsReserved), and a program of that name in
// --config.dir cannot be shown by top.
type Builtin struct {
	Name string
	// Help is one line for top's --help.
	Help string
	// Open prepares the view (it may turn statistics on) and returns it,
	// with the function that undoes what Open did.
	Open func(log *slog.Logger) (View, func(), error)
}

// FindBuiltin returns the view of views named name.
func FindBuiltin(views []Builtin, name string) (Builtin, bool) {
	i := slices.IndexFunc(views, func(b Builtin) bool { return b.Name == name })
	if i < 0 {
		return Builtin{}, false
	}
	return views[i], true
}

// RunBuiltin is top <builtin>: it opens b, redraws it (Redraw) and undoes
// what Open did.
func RunBuiltin(ctx context.Context, b Builtin, o RedrawOptions, log *slog.Logger) int {
	v, release, err := b.Open(log)
	if err != nil {
		fmt.Fprintf(o.Stderr, "kernel_exporter top %s: %s\n", b.Name, printable.String(err.Error()))
		return ExitFailed
	}
	defer release()
	o.Name = b.Name
	return Redraw(ctx, o, v)
}

// Column is one column of WriteTable.
type Column struct {
	Title string
	// Right aligns the column to the right (numbers).
	Right bool
	// Max bounds the column's width in runes (0: none); longer cells are
	// cut with "...".
	Max int
}

// WriteTable writes a frame of a top view: title, a header line, then
// rows, at most height lines in all, each cut to width runes (0: not
// cut); when the rows do not fit, the last line says how many were left
// out. Cells are made printable. Columns are as wide as their widest
// cell shown, separated by two spaces.
func WriteTable(w io.Writer, title string, cols []Column, rows [][]string, height, width int) error {
	height = max(height, 3)
	show := rows
	if len(rows) > height-2 {
		show = rows[:height-3]
	}
	cells := make([][]string, 0, len(show)+1)
	head := make([]string, len(cols))
	for i, c := range cols {
		head[i] = c.Title
	}
	cells = append(cells, head)
	for _, r := range show {
		row := make([]string, len(cols))
		for i := range cols {
			if i < len(r) {
				row[i] = printable.String(r[i])
				if cols[i].Max > 0 {
					row[i] = Truncate(row[i], cols[i].Max)
				}
			}
		}
		cells = append(cells, row)
	}
	widths := make([]int, len(cols))
	for _, r := range cells {
		for i, c := range r {
			widths[i] = max(widths[i], runeLen(c))
		}
	}
	var b strings.Builder
	line := func(s string) {
		s = strings.TrimRight(s, " ")
		if width > 0 {
			s = Truncate(s, width)
		}
		b.WriteString(s + "\n")
	}
	line(printable.String(title))
	for _, r := range cells {
		var l strings.Builder
		for i, c := range r {
			if i > 0 {
				l.WriteString("  ")
			}
			pad := strings.Repeat(" ", widths[i]-runeLen(c))
			if cols[i].Right {
				l.WriteString(pad + c)
			} else {
				l.WriteString(c + pad)
			}
		}
		line(l.String())
	}
	if len(show) < len(rows) {
		line(fmt.Sprintf("... %d more", len(rows)-len(show)))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func runeLen(s string) int { return len([]rune(s)) }

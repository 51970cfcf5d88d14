// SPDX-License-Identifier: Apache-2.0

package profile

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Measure chooses which share a diff ranks functions by.
type Measure int

const (
	// ByTotal ranks by the share of samples whose stack holds the
	// function: what a differential flame graph's widths show; it names
	// the code path that changed (do_sendfile against vfs_write).
	ByTotal Measure = iota
	// BySelf ranks by the share of samples where the function is the
	// innermost frame: where the CPU time itself went (perf diff's
	// default).
	BySelf
)

// ParseMeasure reads "total" or "self".
func ParseMeasure(s string) (Measure, error) {
	switch s {
	case "total", "":
		return ByTotal, nil
	case "self":
		return BySelf, nil
	}
	return 0, fmt.Errorf("sort %q: want total or self", s)
}

// Share is a function's part of a profile: its value over the profile's
// total, from 0 to 1.
type Share struct{ Self, Total float64 }

// DiffRow is one function in two profiles.
type DiffRow struct {
	Function string
	Kernel   bool
	// Base and New are its shares of each profile; Delta is New - Base
	// (in fractions: 0.4 is 40 percentage points).
	Base, New, Delta Share
	// BaseValue and NewValue are its total values, unnormalised.
	BaseValue, NewValue int64
}

func (r DiffRow) delta(m Measure) float64 {
	if m == BySelf {
		return r.Delta.Self
	}
	return r.Delta.Total
}

// DiffNode is one frame of a differential flame graph: the shares of each
// profile's samples whose stacks pass through the path from the root to
// it (a frame's width is New, its colour New - Base).
type DiffNode struct {
	Name      string
	Kernel    bool
	Base, New float64
	// Children, sorted by name.
	Children []*DiffNode
}

// DiffResult compares two profiles, each normalised by its own total so
// that profiles of different lengths, frequencies or loads compare.
type DiffResult struct {
	// Kind of both profiles.
	Kind Kind
	// BaseTotal and NewTotal are the profiles' totals (samples or
	// nanoseconds).
	BaseTotal, NewTotal int64
	// Rows has every function of either profile, sorted by Delta.Total,
	// largest growth first, then by name.
	Rows []DiffRow
	// Tree is the merged flame graph (root "all", then comm, then the
	// frames outermost first, as in folded stacks).
	Tree *DiffNode

	base, new map[string]int64 // folded stack -> value
}

// ErrEmptyProfile is returned by Diff for a profile without samples.
var ErrEmptyProfile = errors.New("profile has no samples")

// Diff compares base and new (both CPU or both off-CPU): every function's
// share of each (self and total), and the merged flame graph. Functions
// are matched by name and kernel or user, not by module, so that two hosts
// with libraries at different paths compare. It fails when the kinds
// differ or a profile is empty.
func Diff(base, new *Profile) (*DiffResult, error) {
	if base.Kind != new.Kind {
		return nil, fmt.Errorf("cannot compare a %s profile with a %s profile", base.Kind, new.Kind)
	}
	d := &DiffResult{Kind: base.Kind, BaseTotal: base.Total(), NewTotal: new.Total()}
	if d.BaseTotal <= 0 {
		return nil, fmt.Errorf("base: %w", ErrEmptyProfile)
	}
	if d.NewTotal <= 0 {
		return nil, fmt.Errorf("new: %w", ErrEmptyProfile)
	}
	rows := map[nodeKey]*DiffRow{}
	add := func(p *Profile, total int64, isNew bool) {
		for _, f := range p.Functions() {
			k := nodeKey{f.Kernel, f.Function}
			r, ok := rows[k]
			if !ok {
				r = &DiffRow{Function: f.Function, Kernel: f.Kernel}
				rows[k] = r
			}
			sh := Share{Self: float64(f.Self) / float64(total), Total: float64(f.Total) / float64(total)}
			if isNew {
				r.New, r.NewValue = sh, f.Total
			} else {
				r.Base, r.BaseValue = sh, f.Total
			}
		}
	}
	add(base, d.BaseTotal, false)
	add(new, d.NewTotal, true)
	for _, r := range rows {
		r.Delta = Share{Self: r.New.Self - r.Base.Self, Total: r.New.Total - r.Base.Total}
		d.Rows = append(d.Rows, *r)
	}
	d.sort(ByTotal)
	d.base, d.new = foldedValues(base), foldedValues(new)
	d.Tree = &DiffNode{Name: "all", Base: 1, New: 1}
	idx := map[*DiffNode]map[nodeKey]*DiffNode{}
	walk := func(lines map[string]int64, total int64, isNew bool) {
		for line, v := range lines {
			share := float64(v) / float64(total)
			n := d.Tree
			for _, name := range strings.Split(line, ";") {
				k := nodeKey{name: name}
				if n2, ok := strings.CutSuffix(name, kernelSuffix); ok {
					k = nodeKey{kernel: true, name: n2}
				}
				m := idx[n]
				if m == nil {
					m = map[nodeKey]*DiffNode{}
					idx[n] = m
				}
				c, ok := m[k]
				if !ok {
					c = &DiffNode{Name: k.name, Kernel: k.kernel}
					m[k] = c
					n.Children = append(n.Children, c)
				}
				if isNew {
					c.New += share
				} else {
					c.Base += share
				}
				n = c
			}
		}
	}
	walk(d.base, d.BaseTotal, false)
	walk(d.new, d.NewTotal, true)
	d.Tree.sort()
	return d, nil
}

func (n *DiffNode) sort() {
	slices.SortFunc(n.Children, func(a, b *DiffNode) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), cmpBool(a.Kernel, b.Kernel))
	})
	for _, c := range n.Children {
		c.sort()
	}
}

// foldedValues returns p's folded stacks (with comm and "_[k]") and their
// values.
func foldedValues(p *Profile) map[string]int64 {
	out := map[string]int64{}
	for i := range p.Samples {
		out[folded(&p.Samples[i], FoldedOptions{})] += p.Samples[i].Value
	}
	return out
}

func (d *DiffResult) sort(m Measure) {
	slices.SortStableFunc(d.Rows, func(a, b DiffRow) int {
		return cmp.Or(cmp.Compare(b.delta(m), a.delta(m)), strings.Compare(a.Function, b.Function), cmpBool(a.Kernel, b.Kernel))
	})
}

// minDelta is the smallest change Grew and Shrank report: below it, a
// share did not move (float rounding).
const minDelta = 1e-9

// Grew returns at most n functions whose share grew, most first, by m.
func (d *DiffResult) Grew(n int, m Measure) []DiffRow { return d.moved(n, m, 1) }

// Shrank returns at most n functions whose share shrank, most first, by m.
func (d *DiffResult) Shrank(n int, m Measure) []DiffRow { return d.moved(n, m, -1) }

// moved returns at most n rows whose delta by m has sign, largest first.
func (d *DiffResult) moved(n int, m Measure, sign float64) []DiffRow {
	rows := slices.Clone(d.Rows)
	slices.SortStableFunc(rows, func(a, b DiffRow) int {
		return cmp.Or(cmp.Compare(sign*b.delta(m), sign*a.delta(m)), strings.Compare(a.Function, b.Function))
	})
	var out []DiffRow
	for _, r := range rows {
		if len(out) == n || sign*r.delta(m) <= minDelta {
			break
		}
		out = append(out, r)
	}
	return out
}

// WriteTable writes the n functions whose share grew most and the n whose
// share shrank most, ranked by m: their shares of each profile's total in
// percent, and the changes in percentage points ("pp": 29.8% to 69.9% is
// +40.1 pp):
//
//	base: 1001 samples; new: 998 samples (cpu); shares of each profile's total in %, changes (Δ) in percentage points (pp), by total
//	grew most:
//	   TOTAL Δ    BASE     NEW    SELF Δ  FUNCTION
//	  +40.1 pp   29.8%   69.9%  +40.1 pp  burn_a
//	shrank most:
//	  -40.1 pp   70.0%   29.9%  -40.1 pp  burn_b
//
// Kernel functions end in "_[k]".
func (d *DiffResult) WriteTable(w io.Writer, n int, m Measure) error {
	bw := bufio.NewWriter(w)
	by := "total"
	if m == BySelf {
		by = "self"
	}
	unit := "samples"
	if d.Kind == OffCPU {
		unit = "ns off-CPU"
	}
	fmt.Fprintf(bw, "base: %d %s; new: %d %s (%s); shares of each profile's total in %%, changes (Δ) in percentage points (pp), by %s\n", d.BaseTotal, unit, d.NewTotal, unit, d.Kind, by)
	section := func(title string, rows []DiffRow) {
		fmt.Fprintf(bw, "%s:\n", title)
		if len(rows) == 0 {
			fmt.Fprintln(bw, "  (none)")
			return
		}
		first, second := "TOTAL Δ", "SELF Δ"
		if m == BySelf {
			first, second = "SELF Δ", "TOTAL Δ"
		}
		fmt.Fprintf(bw, "  %9s %7s %7s %9s  FUNCTION\n", first, "BASE", "NEW", second)
		for _, r := range rows {
			a, b, nn, o := r.Delta.Total, r.Base.Total, r.New.Total, r.Delta.Self
			if m == BySelf {
				a, b, nn, o = r.Delta.Self, r.Base.Self, r.New.Self, r.Delta.Total
			}
			name := r.Function
			if r.Kernel {
				name += kernelSuffix
			}
			fmt.Fprintf(bw, "  %9s %7s %7s %9s  %s\n", signedPoints(a), pct(b), pct(nn), signedPoints(o), printable(name))
		}
	}
	section("grew most", d.Grew(n, m))
	section("shrank most", d.Shrank(n, m))
	return bw.Flush()
}

func pct(f float64) string { return strconv.FormatFloat(100*f, 'f', 1, 64) + "%" }

// signedPoints is a change of share in percentage points: "+40.1 pp".
func signedPoints(f float64) string {
	s := strconv.FormatFloat(100*f, 'f', 1, 64) + " pp"
	if f >= 0 {
		s = "+" + s
	}
	return s
}

// printable replaces control characters, so that a name from a profile
// cannot drive a terminal.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return '?'
		}
		return r
	}, s)
}

// WriteFolded writes the differential folded stacks of difffolded.pl,
// which flamegraph.pl draws as a differential flame graph: one line per
// stack of either profile, "frames base new", with base scaled to new's
// total (difffolded.pl -n) so that the colours show shares:
//
//	burn;main;burn_a 301 702
//
// Lines are sorted.
func (d *DiffResult) WriteFolded(w io.Writer) error {
	scale := float64(d.NewTotal) / float64(d.BaseTotal)
	keys := make([]string, 0, len(d.base)+len(d.new))
	for k := range d.base {
		keys = append(keys, k)
	}
	for k := range d.new {
		if _, ok := d.base[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	bw := bufio.NewWriter(w)
	for _, k := range keys {
		fmt.Fprintf(bw, "%s %d %d\n", k, int64(math.Round(float64(d.base[k])*scale)), d.new[k])
	}
	return bw.Flush()
}

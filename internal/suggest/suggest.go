// SPDX-License-Identifier: Apache-2.0

// Package suggest finds the known names closest to a mistyped one, for
// errors such as "no bundled program "biolatncy" (did you mean
// biolatency?)".
//
// Closeness is the optimal string alignment distance: the fewest
// insertions, deletions, substitutions and swaps of two adjacent bytes that
// turn one name into the other. A name is suggested when that distance is
// at most a third of the typed name's length (at least 1, at most 3).
package suggest

import (
	"sort"
	"strings"
)

// MaxSuggestions bounds the names Closest returns.
const MaxSuggestions = 3

// maxName bounds the length of names compared: the distance takes
// len(a)*len(b) steps, and a longer typed name gets no suggestion.
const maxName = 256

// Closest returns the names of known closest to name, nearest first (ties
// in the order of known), at most MaxSuggestions; none when name is in
// known or nothing is near.
func Closest(name string, known []string) []string {
	if len(name) == 0 || len(name) > maxName {
		return nil
	}
	limit := min(max(len(name)/3, 1), 3)
	type match struct {
		name string
		d, i int
	}
	var ms []match
	for i, k := range known {
		if k == name {
			return nil
		}
		if len(k) > maxName || abs(len(k)-len(name)) > limit {
			continue
		}
		if d := Distance(strings.ToLower(name), strings.ToLower(k)); d <= limit {
			ms = append(ms, match{k, d, i})
		}
	}
	sort.Slice(ms, func(a, b int) bool {
		if ms[a].d != ms[b].d {
			return ms[a].d < ms[b].d
		}
		return ms[a].i < ms[b].i
	})
	var out []string
	for _, m := range ms[:min(len(ms), MaxSuggestions)] {
		out = append(out, m.name)
	}
	return out
}

// DidYouMean returns " (did you mean a or b?)" for the names of known
// closest to name, each formatted by format (nil: as it is), or "" when
// there are none.
func DidYouMean(name string, known []string, format func(string) string) string {
	c := Closest(name, known)
	if len(c) == 0 {
		return ""
	}
	if format != nil {
		for i := range c {
			c[i] = format(c[i])
		}
	}
	last := c[len(c)-1]
	if len(c) == 1 {
		return " (did you mean " + last + "?)"
	}
	return " (did you mean " + strings.Join(c[:len(c)-1], ", ") + " or " + last + "?)"
}

// Distance is the optimal string alignment distance of a and b, over
// bytes: the fewest insertions, deletions, substitutions and swaps of two
// adjacent bytes that turn a into b. It takes len(a)*len(b) steps: for
// short strings.
func Distance(a, b string) int {
	// Three rows: the one before the previous (for swaps), the previous
	// and the current.
	pp := make([]int, len(b)+1)
	p := make([]int, len(b)+1)
	c := make([]int, len(b)+1)
	for j := range p {
		p[j] = j
	}
	for i := 1; i <= len(a); i++ {
		c[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			c[j] = min(p[j]+1, c[j-1]+1, p[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				c[j] = min(c[j], pp[j-2]+1)
			}
		}
		pp, p, c = p, c, pp
	}
	return p[len(b)]
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

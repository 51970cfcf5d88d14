// SPDX-License-Identifier: Apache-2.0

package deploy

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// DocExprs returns the PromQL expressions of the fenced ```promql blocks in
// root's README.md and docs/*.md, so that a test can evaluate the queries
// the documentation tells users to run.
//
// In a block, an expression starts on every line that begins at column 0
// and continues on the indented lines after it, and on any line while its
// parentheses are not balanced; blank lines separate
// expressions, and lines starting with "#" are comments. A comment
// "# native" marks the expressions after it, up to the next comment, as
// reading native histograms (Expr.Native); "# classic" ends that. The
// Source of each is "<file>:<line>". Data is the expression's LeftSide, as
// for an alert: a documented alert condition's threshold is normally not
// met.
//
// It fails when a file cannot be read, or a block is not closed.
func DocExprs(root string) ([]Expr, error) {
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	files = append([]string{filepath.Join(root, "README.md")}, files...)
	sort.Strings(files[1:])
	var out []Expr
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		rel, _ := filepath.Rel(root, f)
		x, err := promqlBlocks(rel, b)
		if err != nil {
			return nil, err
		}
		out = append(out, x...)
	}
	return out, nil
}

// promqlBlocks returns the expressions of the ```promql blocks of one
// Markdown file, named name in Source.
func promqlBlocks(name string, b []byte) ([]Expr, error) {
	var (
		out         []Expr
		in, native  bool
		cur         []string
		start, open int
		sc          = bufio.NewScanner(bytes.NewReader(b))
		flush       = func() {
			if len(cur) > 0 {
				q := strings.Join(cur, "\n")
				out = append(out, Expr{Source: fmt.Sprintf("%s:%d", name, start), Query: q, Data: LeftSide(q), Native: native})
			}
			cur = nil
		}
	)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trim := strings.TrimSpace(line)
		switch {
		case !in:
			if trim == "```promql" {
				in, native, open = true, false, n
				continue
			}
		case strings.HasPrefix(trim, "```"):
			flush()
			in = false
		case trim == "":
			flush()
		case strings.HasPrefix(trim, "#"):
			flush()
			native = strings.EqualFold(strings.TrimSpace(strings.TrimPrefix(trim, "#")), "native")
		case line[0] == ' ' || line[0] == '\t' || unbalanced(cur):
			if len(cur) == 0 {
				return nil, fmt.Errorf("%s:%d: an indented line continues no expression", name, n)
			}
			cur = append(cur, line)
		default:
			flush()
			cur, start = []string{line}, n
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if in {
		return nil, fmt.Errorf("%s:%d: ```promql block not closed", name, open)
	}
	return out, nil
}

// unbalanced reports whether the lines so far open more parentheses,
// braces or brackets than they close (outside string literals).
func unbalanced(lines []string) bool {
	q, depth := strings.Join(lines, "\n"), 0
	scan(q, func(i int) bool {
		switch q[i] {
		case '(', '{', '[':
			depth++
		case ')', '}', ']':
			depth--
		}
		return true
	})
	return depth > 0
}

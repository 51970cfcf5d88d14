// SPDX-License-Identifier: Apache-2.0

package compare

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// MaxSelector bounds the length of a BASE or NEW selector, in bytes.
const MaxSelector = 4096

// A Matcher is one label matcher of a PromQL selector: Name Op "Value",
// Op one of =, !=, =~, !~.
type Matcher struct {
	Name, Op, Value string
}

// String is the matcher in PromQL, its value quoted.
func (m Matcher) String() string {
	return m.Name + m.Op + strconv.Quote(m.Value)
}

// A Selector is a list of label matchers, as {os="jessie",dc=~"fra.*"}.
type Selector []Matcher

// String is the selector's matchers in PromQL, without braces, so that
// more can be added around them; "" for none.
func (s Selector) String() string {
	parts := make([]string, len(s))
	for i, m := range s {
		parts[i] = m.String()
	}
	return strings.Join(parts, ",")
}

// names is the set of label names the selector matches on.
func (s Selector) names() map[string]bool {
	n := make(map[string]bool, len(s))
	for _, m := range s {
		n[m.Name] = true
	}
	return n
}

// ParseSelector parses a PromQL label selector: matchers in braces ({} for
// none; the braces may be left out), separated by commas, each a label
// name, an operator (=, !=, =~, !~) and a double-quoted or backquoted
// string (Go's escapes, as PromQL's). A regular expression must compile
// (RE2, as Prometheus'). It refuses a metric name or a __name__ matcher:
// compare chooses the metrics itself. Errors name the offset in s, never
// quote more than the offending token.
func ParseSelector(s string) (Selector, error) {
	if len(s) > MaxSelector {
		return nil, fmt.Errorf("selector of %d bytes, more than %d", len(s), MaxSelector)
	}
	p := strings.Trim(s, " \t\n\r")
	lead := strings.Index(s, p) // offsets in errors are s's
	if strings.HasPrefix(p, "{") {
		lead++
		if !strings.HasSuffix(p, "}") || len(p) < 2 {
			return nil, errors.New("selector opens { but does not end with }")
		}
		p = p[1 : len(p)-1]
	} else if i := strings.IndexByte(p, '{'); i > 0 {
		return nil, fmt.Errorf("selector names a metric (%s): give labels only, compare ranks every kernel_* metric", quoteShort(p[:i]))
	}
	var sel Selector
	for i := 0; ; {
		i = skipSpace(p, i)
		if i == len(p) {
			return sel, nil
		}
		j := i
		for j < len(p) && isNameByte(p[j], j == i) {
			j++
		}
		if j == i {
			return nil, fmt.Errorf("selector: label name expected at offset %d", lead+i)
		}
		name := p[i:j]
		if name == "__name__" {
			return nil, errors.New("selector matches __name__: give labels only, compare ranks every kernel_* metric")
		}
		i = skipSpace(p, j)
		op := ""
		for _, o := range []string{"=~", "!~", "!=", "="} {
			if strings.HasPrefix(p[i:], o) {
				op = o
				break
			}
		}
		if op == "" {
			return nil, fmt.Errorf("selector: operator (=, !=, =~, !~) expected after label %s", name)
		}
		i = skipSpace(p, i+len(op))
		value, n, err := scanString(p[i:])
		if err != nil {
			return nil, fmt.Errorf("selector: value of label %s: %w", name, err)
		}
		if op == "=~" || op == "!~" {
			if _, err := regexp.Compile("^(?:" + value + ")$"); err != nil {
				return nil, fmt.Errorf("selector: label %s: bad regular expression: %w", name, err)
			}
		}
		sel = append(sel, Matcher{Name: name, Op: op, Value: value})
		i = skipSpace(p, i+n)
		if i == len(p) {
			return sel, nil
		}
		if p[i] != ',' {
			return nil, fmt.Errorf("selector: , or } expected at offset %d", lead+i)
		}
		i++
	}
}

// scanString reads a quoted string at the start of s and returns its
// value and the bytes it took.
func scanString(s string) (string, int, error) {
	if s == "" || (s[0] != '"' && s[0] != '`') {
		if s != "" && s[0] == '\'' {
			return "", 0, errors.New("single quotes: use double quotes inside the shell's single quotes")
		}
		return "", 0, errors.New("double-quoted string expected")
	}
	q := s[0]
	for i := 1; i < len(s); i++ {
		switch {
		case s[i] == '\\' && q == '"':
			i++
		case s[i] == q:
			v, err := strconv.Unquote(s[:i+1])
			if err != nil {
				return "", 0, fmt.Errorf("bad escape in string: %w", err)
			}
			return v, i + 1, nil
		}
	}
	return "", 0, errors.New("string not closed")
}

func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

func isNameByte(c byte, first bool) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (!first && c >= '0' && c <= '9')
}

// quoteShort quotes s if it is short, else gives its length.
func quoteShort(s string) string {
	if len(s) <= 64 {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%d bytes", len(s))
}

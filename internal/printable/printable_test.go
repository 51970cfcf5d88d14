// SPDX-License-Identifier: Apache-2.0

package printable

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// cases are inputs from outside and what String shows of them.
var cases = map[string]string{
	"vda":                   "vda",
	"":                      "",
	"café 日本":               "café 日本",
	"\x1b[2J\x1b]0;pwned\a": `\x1b[2J\x1b]0;pwned\x07`,
	"a\nb\rc\td\x7f":        `a\x0ab\x0dc\x09d\x7f`,
	"\u009b31m":             `\x9b31m`,
	"evil\u202etxt.exe":     `evil\u202etxt.exe`,
	"zero\u200bwidth":       `zero\u200bwidth`,
	"line\u2028sep":         `line\u2028sep`,
	"tag\U000E0001":         `tag\U000e0001`,
	"bad\xff\xfe":           "bad\uFFFD",
	"\xffa\xfe":             "\uFFFDa\uFFFD",
	`quote " and \`:         `quote " and \`,
}

func TestString(t *testing.T) {
	for in, want := range cases {
		if got := String(in); got != want {
			t.Errorf("String(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCut(t *testing.T) {
	for _, tc := range []struct {
		in   string
		max  int
		want string
	}{
		{"abcdef", 6, "abcdef"},
		{"abcdef", 5, "abcde..."},
		{"abcdef", 0, "..."},
		{"a\x1bb", 5, `a\x1b...`},
		{"a\x1bb", 4, "a..."}, // the escape is not split
		{"日本語", 8, "日本..."},   // nor a character
		{"日本語", 9, "日本語"},
	} {
		if got := Cut(tc.in, tc.max); got != tc.want {
			t.Errorf("Cut(%q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
		}
	}
}

func TestQuote(t *testing.T) {
	for _, tc := range []struct {
		in   string
		max  int
		want string
	}{
		{"biolatncy", 100, `"biolatncy"`},
		{"", 100, `""`},
		{`a"b\c`, 100, `"a\"b\\c"`},
		{"x\x1b[2J", 100, `"x\x1b[2J"`},
		{strings.Repeat("a", 10), 4, `"aaaa..."`},
	} {
		if got := Quote(tc.in, tc.max); got != tc.want {
			t.Errorf("Quote(%q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
		}
	}
}

// FuzzString checks, for any text, that String's result is valid UTF-8
// with no control or format character, that String changes nothing of
// what it returns, and that Cut and Quote stay in their bounds.
func FuzzString(f *testing.F) {
	for in := range cases {
		f.Add(in, 8)
	}
	f.Fuzz(func(t *testing.T, s string, max int) {
		got := String(s)
		if !utf8.ValidString(got) {
			t.Fatalf("String(%q) = %q: not valid UTF-8", s, got)
		}
		for _, r := range got {
			if !safe(r) {
				t.Fatalf("String(%q) = %q holds %U", s, got, r)
			}
		}
		if again := String(got); again != got {
			t.Fatalf("String(String(%q)) = %q, want %q", s, again, got)
		}
		if utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return !safe(r) }) && got != s {
			t.Fatalf("String(%q) = %q changed safe text", s, got)
		}
		max = max & 0xff
		if c := Cut(s, max); len(c) > max+len("...") || !strings.HasPrefix(got, strings.TrimSuffix(c, "...")) {
			t.Fatalf("Cut(%q, %d) = %q (String: %q)", s, max, c, got)
		}
		if q := Quote(s, max); len(q) > max+len(`"..."`) || q[0] != '"' || q[len(q)-1] != '"' || String(q) != q {
			t.Fatalf("Quote(%q, %d) = %q", s, max, q)
		}
	})
}

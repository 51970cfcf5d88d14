// SPDX-License-Identifier: Apache-2.0

package compare

import (
	"strings"
	"testing"
)

func TestParseSelector(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{}`, ``},
		{``, ``},
		{`{os="jessie"}`, `os="jessie"`},
		{` { os = "jessie" , dc=~"fra.*", } `, `os="jessie",dc=~"fra.*"`},
		{`os!="a\"b",x!~` + "`a\\.b`", `os!="a\"b",x!~"a\\.b"`},
		{`{instance="h:19435"}`, `instance="h:19435"`},
	} {
		s, err := ParseSelector(c.in)
		if err != nil || s.String() != c.want {
			t.Errorf("ParseSelector(%q) = %q, %v; want %q", c.in, s.String(), err, c.want)
		}
	}
	for _, c := range []struct{ in, want string }{
		{`{os="a"`, "does not end with }"},
		{`up{os="a"}`, `names a metric ("up")`},
		{`{__name__="up"}`, "matches __name__"},
		{`{os='a'}`, "single quotes"},
		{`{os=a}`, "double-quoted string expected"},
		{`{os="a}`, "string not closed"},
		{`{os~"a"}`, "operator"},
		{`{os="a" dc="b"}`, ", or } expected at offset 8"},
		{`{os=~"("}`, "bad regular expression"},
		{`{1os="a"}`, "label name expected at offset 1"},
		{`{os="\q"}`, "bad escape"},
		{strings.Repeat(" ", MaxSelector+1), "more than 4096"},
	} {
		_, err := ParseSelector(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseSelector(%q) = %v, want an error with %q", c.in, err, c.want)
		}
	}
}

// FuzzParseSelector checks that ParseSelector never panics, and that a
// selector it accepts prints as one it parses back to the same matchers
// (when the printed form is within MaxSelector).
func FuzzParseSelector(f *testing.F) {
	for _, s := range []string{`{}`, `{os="jessie"}`, `{a=~"x.*",b!="y\n",c!~` + "`z`" + `}`, `a="b",`, `{a="\u00e9\x00"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, err := ParseSelector(in)
		if err != nil {
			return
		}
		printed := "{" + s.String() + "}"
		if len(printed) > MaxSelector {
			// Quoting can make it longer (an invalid UTF-8 byte prints as
			// \xNN): past the input limit, which is for what users type.
			return
		}
		again, err := ParseSelector(printed)
		if err != nil {
			t.Fatalf("%q parsed to %q, which does not parse: %v", in, s.String(), err)
		}
		if len(again) != len(s) {
			t.Fatalf("%q: %d matchers, then %d", in, len(s), len(again))
		}
		for i := range s {
			if s[i] != again[i] {
				t.Fatalf("%q: matcher %d %+v, then %+v", in, i, s[i], again[i])
			}
		}
	})
}

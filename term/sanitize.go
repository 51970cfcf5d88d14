// SPDX-License-Identifier: Apache-2.0

package term

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxLabelWidth is the number of runes of a label value shown; longer values
// are cut and end with "...".
const MaxLabelWidth = 40

// Printable returns s safe to write to a terminal: invalid UTF-8 bytes
// become U+FFFD, control characters below U+0100 (C0, DEL, C1: ESC starts
// every escape sequence, CSI is U+009B) are written as \xNN, and other
// control or format characters (U+200B zero width space, U+202E right to
// left override...) as \uNNNN. Printable characters are kept as they are.
func Printable(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || !safe(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		switch {
		case safe(r):
			b.WriteRune(r)
		case r < 0x100:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}

// safe reports whether r may be written to a terminal as it is.
func safe(r rune) bool {
	return !unicode.IsControl(r) && !unicode.Is(unicode.Cf, r) && r != '\u2028' && r != '\u2029'
}

// Truncate returns s cut to at most width runes, the last three of them
// "..." when it was cut (width < 4: cut with no mark).
func Truncate(s string, width int) string {
	if utf8.RuneCountInString(s) <= width {
		return s
	}
	mark := "..."
	if width < 4 {
		mark = ""
	}
	n := width - len(mark)
	for i := range s {
		if n == 0 {
			return s[:i] + mark
		}
		n--
	}
	return s
}

// labelValue is a label value as shown: printable, cut to MaxLabelWidth.
func labelValue(v string) string {
	return Truncate(Printable(v), MaxLabelWidth)
}

// SPDX-License-Identifier: Apache-2.0

// Package printable makes text from outside safe to show: config names and
// values, names from a BPF object's ELF and BTF, label values read from
// the kernel, values from the command line. Whatever the text holds, what
// String returns can go into a log line, an error, a terminal or a metric
// label without starting an escape sequence, moving the cursor, reversing
// the text's direction or hiding characters:
//
//   - invalid UTF-8 becomes U+FFFD (one per run of bad bytes);
//   - control characters below U+0100 (C0, DEL, C1: ESC starts every
//     terminal escape sequence, CSI is U+009B) are written \xNN;
//   - other control and format characters (U+200B zero width space,
//     U+202E right-to-left override, U+2028 line separator...) are
//     written \uNNNN (\UNNNNNNNN above U+FFFF);
//   - every other character is kept as it is, accents and CJK included.
//
// Cut and Quote apply the same rule and bound the length. Hiding what must
// not be shown at all (a config file's contents) is the caller's rule, as
// config.Quote's.
package printable

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// String returns s safe to show (see the package doc), s itself when it
// needs no change.
func String(s string) string {
	if clean(s) {
		return s
	}
	var b strings.Builder
	write(&b, s, -1, false)
	return b.String()
}

// Cut returns String(s) cut to at most max bytes, followed by "..." when
// it was cut; an escape is never split.
func Cut(s string, max int) string {
	if len(s) <= max && clean(s) {
		return s
	}
	var b strings.Builder
	write(&b, s, max, false)
	return b.String()
}

// Quote returns s in double quotes, made safe as String does and cut as
// Cut does (max bounds what is between the quotes), with " and \ written
// \" and \\ so that where the value ends is clear. For a value in an
// error message: --programs "bio\x1b[2J...".
func Quote(s string, max int) string {
	var b strings.Builder
	b.WriteByte('"')
	write(&b, s, max, true)
	b.WriteByte('"')
	return b.String()
}

// clean reports whether s needs no change.
func clean(s string) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < 0x7f {
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n <= 1 || !safe(r) {
			return false
		}
		i += n
	}
	return true
}

// safe reports whether r may be shown as it is.
func safe(r rune) bool {
	return !unicode.IsControl(r) && !unicode.Is(unicode.Cf, r) && r != '\u2028' && r != '\u2029'
}

// write writes s, made safe, to b: at most max bytes of it (max < 0: no
// bound), then "..." if it was cut. quoted escapes " and \ too.
func write(b *strings.Builder, s string, max int, quoted bool) {
	written := 0
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		var unit string
		switch {
		case r == utf8.RuneError && n <= 1:
			// A run of invalid bytes is one U+FFFD, as
			// strings.ToValidUTF8 writes it.
			for n = 0; i+n < len(s); n++ {
				if r, w := utf8.DecodeRuneInString(s[i+n:]); r != utf8.RuneError || w > 1 {
					break
				}
			}
			unit = "\uFFFD"
		case quoted && (r == '"' || r == '\\'):
			unit = `\` + string(r)
		case safe(r):
			unit = s[i : i+n]
		case r < 0x100:
			unit = fmt.Sprintf(`\x%02x`, r)
		case r <= 0xffff:
			unit = fmt.Sprintf(`\u%04x`, r)
		default:
			unit = fmt.Sprintf(`\U%08x`, r)
		}
		if max >= 0 && written+len(unit) > max {
			b.WriteString("...")
			return
		}
		b.WriteString(unit)
		written += len(unit)
		i += n
	}
}

// SPDX-License-Identifier: Apache-2.0

package term

import (
	"unicode/utf8"

	"github.com/kernel-exporter/kernel_exporter/internal/printable"
)

// MaxLabelWidth is the number of runes of a label value shown; longer values
// are cut and end with "...".
const MaxLabelWidth = 40

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
	return Truncate(printable.String(v), MaxLabelWidth)
}

// SPDX-License-Identifier: Apache-2.0

// Package plural writes counts with their noun in the right number: "1
// program", "2 programs", "0 programs".
package plural

import "strconv"

// Count returns n and noun, in the plural unless n is 1 or -1: the plural
// is forms[0] when given ("entries"), else noun with "s" appended.
func Count[N ~int | ~int64 | ~uint32 | ~uint64](n N, noun string, forms ...string) string {
	s := strconv.FormatInt(int64(n), 10)
	if n == 1 || int64(n) == -1 {
		return s + " " + noun
	}
	if len(forms) > 0 {
		return s + " " + forms[0]
	}
	return s + " " + noun + "s"
}

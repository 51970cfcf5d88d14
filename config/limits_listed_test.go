// SPDX-License-Identifier: Apache-2.0

package config

import (
	"fmt"
	"strings"
	"testing"
)

func TestJoinListed(t *testing.T) {
	num := func(b *strings.Builder, i int) { fmt.Fprintf(b, "m%d", i) }
	for _, c := range []struct {
		n    int
		want string
	}{
		{0, ""},
		{1, "m0"},
		{3, "m0, m1, m2"},
		{16, "m0, m1, m2, m3, m4, m5, m6, m7, m8, m9, m10, m11, m12, m13, m14, m15"},
		{20, "m0, m1, m2, m3, m4, m5, m6, m7, m8, m9, m10, m11, m12, m13, m14, m15, and 4 more"},
	} {
		if got := JoinListed(c.n, num); got != c.want {
			t.Errorf("JoinListed(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}

// SPDX-License-Identifier: Apache-2.0

package plural

import "testing"

func TestCount(t *testing.T) {
	for _, tc := range []struct {
		got, want string
	}{
		{Count(0, "program"), "0 programs"},
		{Count(1, "program"), "1 program"},
		{Count(2, "program"), "2 programs"},
		{Count(uint64(1), "stack"), "1 stack"},
		{Count(int64(-1), "stack"), "-1 stack"},
		{Count(1, "entry", "entries"), "1 entry"},
		{Count(3, "entry", "entries"), "3 entries"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestSplitInputs(t *testing.T) {
	dir := t.TempDir()
	comma := filepath.Join(dir, "a,b.pprof")
	if err := os.WriteFile(comma, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		arg  string
		want []string
	}{
		{"a.pprof", []string{"a.pprof"}},
		{comma, []string{comma}}, // an existing file is one input
		{"a.pprof,http://h:9435/profile/cpu?seconds=10", []string{"a.pprof", "http://h:9435/profile/cpu?seconds=10"}},
		{"http://h1:9435/profile/cpu,http://h2:9435/profile/cpu", []string{"http://h1:9435/profile/cpu", "http://h2:9435/profile/cpu"}},
	} {
		got, err := splitInputs("base", c.arg)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("splitInputs(%q) = %q, %v; want %q", c.arg, got, err, c.want)
		}
	}
}

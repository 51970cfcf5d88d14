// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"
	"testing"
)

// TestHardening11SourceNames checks that every config name from the flags
// is a plain name given once: a path, an overlong name or a name given
// twice (which made two configs share one set of self-metric labels) is a
// flag error naming the flag.
func TestHardening11SourceNames(t *testing.T) {
	for _, tc := range []struct{ programs, dir, names, want string }{
		{"", "/etc/ke", "../outside/evil", `--config.names: config name "../outside/evil"`},
		{"../programs/timers", "", "", `--programs: config name "../programs/timers"`},
		{strings.Repeat("a", 100), "", "", "--programs: config name"},
		{"timers,timers", "", "", "--programs: config timers is already given by --programs"},
		{"timers", "/etc/ke", "timers", "--config.names: config timers is already given by --programs"},
	} {
		_, _, _, err := sources(tc.programs, tc.dir, tc.names)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("sources(%q, %q, %q) = %v, want an error starting %q", tc.programs, tc.dir, tc.names, err, tc.want)
		}
	}
	dir := t.TempDir()
	got, _, _, err := sources("timers,runqlat", dir, "mine")
	if err != nil || len(got) != 3 || got[2].Dir != dir || got[2].Name != "mine" {
		t.Errorf("sources(timers,runqlat + mine) = %v, %v", got, err)
	}
}

// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// TestProfileDiffURLs: three exporters with --profile.enable (at 499, 99
// and 999 Hz) profile, over the same 10 s, two frame-pointer processes
// that spend 70% and 30% of their time in burn_a (the rest in burn_b).
// profile diff takes their /profile/cpu URLs (?pid= picks the process):
// base the 70% process from the first, new the 30% process from the
// second and the 70% one again from the third, which takes 10 times the
// samples. Merged with equal weight, new holds burn_a at 50%: burn_a
// ranks first among the shrunk by 20 points (within 8; unweighted, the
// third exporter's samples would dominate and burn_a fall by 4 points
// only), burn_b first among the grown.
func TestProfileDiffURLs(t *testing.T) {
	w70 := startProfWorkload(t, "burn", "0.7", "14")
	w30 := startProfWorkload(t, "burn", "0.3", "14")
	e1 := Start(t, "--programs=none", "--profile.enable", "--profile.frequency=499")
	e2 := Start(t, "--programs=none", "--profile.enable", "--profile.frequency=99")
	e3 := Start(t, "--programs=none", "--profile.enable", "--profile.frequency=999")
	w70.Begin()
	w30.Begin()
	u := func(e *Exporter, pid uint32) string {
		return fmt.Sprintf("%s/profile/cpu?seconds=10&pid=%d", e.URL, pid)
	}
	base := u(e1, w70.PID)
	newer := u(e2, w30.PID) + "," + u(e3, w70.PID)
	out := runCLI(t, "profile", "diff", "--timeout=60s", "--top=5", base, newer)
	t.Logf("profile diff %s %s:\n%s", base, newer, out)
	grew, shrank := diffSections(out)
	if len(shrank) == 0 || shrank[0] != "burn_a" || len(grew) == 0 || grew[0] != "burn_b" {
		t.Fatalf("grew %v, shrank %v; want burn_b and burn_a first", grew, shrank)
	}
	// "  -20.3 pp   69.8%   49.5%   -20.3 pp  burn_a"
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) == 7 && f[6] == "burn_a" {
			d, err := strconv.ParseFloat(f[0], 64)
			if err != nil || d > -12 || d < -28 {
				t.Errorf("burn_a moved %s pp: want -20 (70%% to the equal-weight 50%%) within 8", f[0])
			}
		}
	}
}

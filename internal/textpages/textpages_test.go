// SPDX-License-Identifier: Apache-2.0

package textpages

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// rssFile returns RssFile of this process, in KiB.
func rssFile(t *testing.T) int {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "RssFile:"); ok {
			v, err := strconv.Atoi(strings.Fields(rest)[0])
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatal("no RssFile in /proc/self/status")
	return 0
}

// TestRelease drops the test binary's read-only pages: RssFile falls, and
// the code still runs (its pages come back on use).
func TestRelease(t *testing.T) {
	before := rssFile(t)
	n, err := Release()
	if err != nil {
		t.Fatal(err)
	}
	after := rssFile(t)
	t.Logf("released %d KiB of mappings; RssFile %d -> %d KiB", n>>10, before, after)
	if n == 0 || after >= before {
		t.Errorf("RssFile %d -> %d KiB after releasing %d bytes: want it lower", before, after, n)
	}
	// Code and read-only data fault back in.
	if s := strings.Repeat("ab", 3); s != "ababab" || strconv.Itoa(42) != "42" {
		t.Fatal("code after Release misbehaves")
	}
}

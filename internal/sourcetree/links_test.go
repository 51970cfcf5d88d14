// SPDX-License-Identifier: Apache-2.0

package sourcetree

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/kernel-exporter/kernel_exporter/internal/mdlinks"
)

// TestDocLinks: every relative link of the tracked Markdown files (README,
// CONTRIBUTING, docs/, examples/, deploy/) names a file or directory of the
// repository, and its #anchor, if any, a heading of that Markdown file.
// The release tests check the shipped subset again inside the tarball and
// the .deb, where source files are missing.
func TestDocLinks(t *testing.T) {
	root, files := repoFiles(t)
	var md []string
	for _, f := range files {
		if filepath.Ext(f) == ".md" && !strings.Contains(f, "/testdata/") {
			md = append(md, filepath.ToSlash(f))
		}
	}
	errs, checked := mdlinks.Check(root, md)
	for _, err := range errs {
		t.Error(err)
	}
	t.Logf("%d relative links checked in %d files", checked, len(md))
	if checked < 150 {
		t.Errorf("checked %d relative links: fewer than the docs have (is the link pattern broken?)", checked)
	}
}

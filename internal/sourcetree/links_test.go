// SPDX-License-Identifier: Apache-2.0

package sourcetree

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// mdLinkRE matches an inline Markdown link or image, [text](target) or
// [text](target "title"), capturing the target.
var mdLinkRE = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// mdLinks returns the targets of the inline links of a Markdown file
// outside fenced code blocks and code spans, each with the line it starts
// on. A link's text may run over lines within a paragraph.
func mdLinks(b []byte) (targets []string, lines []int) {
	var (
		in    bool
		para  []string
		start int
	)
	flush := func() {
		text := stripCodeSpans(strings.Join(para, "\n"))
		for _, m := range mdLinkRE.FindAllStringSubmatchIndex(text, -1) {
			targets = append(targets, text[m[2]:m[3]])
			lines = append(lines, start+strings.Count(text[:m[0]], "\n"))
		}
		para = nil
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		t := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~"):
			flush()
			in = !in
		case in:
		case t == "":
			flush()
		default:
			if len(para) == 0 {
				start = n
			}
			para = append(para, line)
		}
	}
	flush()
	return targets, lines
}

// stripCodeSpans removes the `code spans` of a paragraph, keeping its
// newlines (a link inside a code span is text, not a link).
func stripCodeSpans(text string) string {
	var out strings.Builder
	in := false
	for _, r := range text {
		switch {
		case r == '`':
			in = !in
		case !in || r == '\n':
			out.WriteRune(r)
		}
	}
	return out.String()
}

// mdAnchors returns the anchors GitHub gives the headings of a Markdown
// file: the heading's text lower-cased, with code-span backticks and every
// character but letters, digits, spaces, hyphens and underscores removed,
// and spaces turned into hyphens; a repeated anchor gets -1, -2, ...
func mdAnchors(b []byte) map[string]bool {
	anchors, seen, in := map[string]bool{}, map[string]int{}, false
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if t := strings.TrimSpace(line); strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
			in = !in
			continue
		}
		if in || !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimLeft(line, "#")
		if len(text) == len(line) || len(line)-len(text) > 6 || (text != "" && text[0] != ' ') {
			continue
		}
		a := anchor(strings.TrimSpace(text))
		if n := seen[a]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors
}

// anchor is GitHub's anchor of one heading's text.
func anchor(text string) string {
	var out strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			out.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			out.WriteRune(r)
		}
	}
	return out.String()
}

// TestDocLinks: every relative link of the tracked Markdown files (README,
// CONTRIBUTING, docs/, examples/, deploy/) names a file or directory of the
// repository, and its #anchor, if any, a heading of that Markdown file.
func TestDocLinks(t *testing.T) {
	root, files := repoFiles(t)
	anchors := map[string]map[string]bool{} // Markdown file -> its anchors
	anchorsOf := func(f string) (map[string]bool, error) {
		if a, ok := anchors[f]; ok {
			return a, nil
		}
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return nil, err
		}
		anchors[f] = mdAnchors(b)
		return anchors[f], nil
	}
	checked := 0
	for _, f := range files {
		if filepath.Ext(f) != ".md" || strings.Contains(f, "/testdata/") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		targets, lines := mdLinks(b)
		for i, target := range targets {
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			path, frag, _ := strings.Cut(target, "#")
			dest := f
			if path != "" {
				dest = filepath.Join(filepath.Dir(f), path)
				if strings.HasPrefix(dest, "..") || filepath.IsAbs(path) {
					t.Errorf("%s:%d: link %s leaves the repository", f, lines[i], target)
					continue
				}
				if _, err := os.Stat(filepath.Join(root, dest)); err != nil {
					t.Errorf("%s:%d: link %s: no file %s", f, lines[i], target, dest)
					continue
				}
			}
			if frag == "" {
				continue
			}
			if filepath.Ext(dest) != ".md" {
				t.Errorf("%s:%d: link %s: an anchor into %s, which is not Markdown", f, lines[i], target, dest)
				continue
			}
			a, err := anchorsOf(dest)
			if err != nil {
				t.Fatal(err)
			}
			if !a[frag] {
				t.Errorf("%s:%d: link %s: %s has no heading with anchor #%s", f, lines[i], target, dest, frag)
			}
		}
	}
	t.Logf("%d relative links checked", checked)
	if checked < 150 {
		t.Errorf("checked %d relative links: fewer than the docs have (is the link pattern broken?)", checked)
	}
}

func TestAnchor(t *testing.T) {
	for text, want := range map[string]string{
		"CPU budget: `--bpf.cpu-budget`":                        "cpu-budget---bpfcpu-budget",
		"Reload: SIGHUP and `POST /-/reload`":                   "reload-sighup-and-post--reload",
		"Compatibility with ebpf_exporter v2":                   "compatibility-with-ebpf_exporter-v2",
		"PCI decoders: `pci_vendor`, `pci_device`, `pci_class`": "pci-decoders-pci_vendor-pci_device-pci_class",
		"Big maps, the first scrape, binary size (issue 28)":    "big-maps-the-first-scrape-binary-size-issue-28",
		"Start-up, HTTP and shutdown":                           "start-up-http-and-shutdown",
		"Kubernetes pod labels: `of` and the `kube_*` decoders": "kubernetes-pod-labels-of-and-the-kube_-decoders",
	} {
		if got := anchor(text); got != want {
			t.Errorf("anchor(%q) = %q, want %q", text, got, want)
		}
	}
	a := mdAnchors([]byte("# A\n## Tests\n```\n# not a heading\n```\n### Tests\n#nope\n"))
	for _, want := range []string{"a", "tests", "tests-1"} {
		if !a[want] {
			t.Errorf("anchors %v lack %q", a, want)
		}
	}
	if len(a) != 3 {
		t.Errorf("anchors %v, want 3", a)
	}
}

func TestMdLinks(t *testing.T) {
	md := "See [the\nincidents](docs/incidents.md) and `[x](not-a-link.md)`.\n\n```\n[y](code.md)\n```\n" +
		"| a | [b](b.md#c \"title\") |\n![img](docs/landing.png) <https://example.com/x>\n"
	targets, lines := mdLinks([]byte(md))
	want := []string{"docs/incidents.md", "b.md#c", "docs/landing.png"}
	if fmt.Sprint(targets) != fmt.Sprint(want) || fmt.Sprint(lines) != "[1 7 8]" {
		t.Errorf("mdLinks = %q at lines %v, want %q at [1 7 8]", targets, lines, want)
	}
}

// SPDX-License-Identifier: Apache-2.0

// Package mdlinks checks the relative links of a set of Markdown files: that
// each names a file or directory under the same root and, when it has a
// #fragment, that the target Markdown file has a heading (or an explicit
// <a id>/<a name>) with that anchor. Tests use it on the docs a release
// ships, to prove a tarball or a package's doc directory carries what its
// README links to.
//
// Links are those CommonMark and GitHub render: inline links and images
// [text](dest "title"), reference definitions [label]: dest, and HTML
// href="..." and src="..." attributes, outside fenced code blocks and code
// spans. Anchors follow GitHub's rule: the heading's text, lower-cased,
// with everything but letters, digits, spaces, - and _ dropped and spaces
// made -, and -1, -2, ... appended to repeats.
package mdlinks

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"unicode"
)

// Link is one link of a Markdown file.
type Link struct {
	Line int    // 1-based line of the file
	Dest string // as written: path, path#fragment or #fragment
}

var (
	inlineRE = regexp.MustCompile(`!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	refDefRE = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$`)
	htmlRE   = regexp.MustCompile(`\b(?:href|src)="([^"]*)"`)
	idRE     = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	codeRE   = regexp.MustCompile("`+[^`]*`+")
	headRE   = regexp.MustCompile(`^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	fenceRE  = regexp.MustCompile("^ {0,3}(```|~~~)")
)

// lines returns md's lines outside fenced code blocks, by 1-based number.
func lines(md string) map[int]string {
	out := map[int]string{}
	fence := ""
	for i, l := range strings.Split(md, "\n") {
		if m := fenceRE.FindStringSubmatch(l); m != nil {
			switch {
			case fence == "":
				fence = m[1]
				continue
			case fence == m[1]:
				fence = ""
				continue
			}
		}
		if fence == "" {
			out[i+1] = l
		}
	}
	return out
}

// Links returns md's links, in order of line. An inline link's text may
// run over the lines of a paragraph; the link is reported at the line its
// destination is on.
func Links(md string) []Link {
	ls := lines(md)
	var out []Link
	var para []string // the current paragraph's lines, code spans emptied
	start := 0        // its first line
	flush := func() {
		block := strings.Join(para, "\n")
		for _, m := range inlineRE.FindAllStringSubmatchIndex(block, -1) {
			out = append(out, Link{start + strings.Count(block[:m[2]], "\n"), block[m[2]:m[3]]})
		}
		para = para[:0]
	}
	last := strings.Count(md, "\n") + 1
	for n := 1; n <= last; n++ {
		l, ok := ls[n]
		if !ok || strings.TrimSpace(l) == "" {
			flush()
			continue
		}
		if m := refDefRE.FindStringSubmatch(l); m != nil {
			flush()
			out = append(out, Link{n, m[1]})
			continue
		}
		l = codeRE.ReplaceAllString(l, "``")
		if len(para) == 0 {
			start = n
		}
		para = append(para, l)
		for _, m := range htmlRE.FindAllStringSubmatch(l, -1) {
			out = append(out, Link{n, m[1]})
		}
	}
	flush()
	slices.SortStableFunc(out, func(a, b Link) int { return a.Line - b.Line })
	return out
}

// Anchors returns the anchors of md's headings and explicit <a id>/<a name>.
func Anchors(md string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, l := range lines(md) {
		for _, m := range idRE.FindAllStringSubmatch(l, -1) {
			out[m[1]] = true
		}
	}
	ls := lines(md)
	for n := 1; n <= strings.Count(md, "\n")+1; n++ {
		l, ok := ls[n]
		if !ok {
			continue
		}
		m := headRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		s := Slug(m[2])
		if k := seen[s]; k > 0 {
			out[fmt.Sprintf("%s-%d", s, k)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

var (
	linkTextRE = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	tagRE      = regexp.MustCompile(`<[^>]+>`)
)

// Slug is GitHub's anchor for a heading's text (Markdown source).
func Slug(heading string) string {
	// Code spans keep their text (even <...>); outside them links become
	// their text and HTML tags go.
	var t string
	rest := heading
	for {
		loc := codeRE.FindStringIndex(rest)
		if loc == nil {
			break
		}
		t += tagRE.ReplaceAllString(linkTextRE.ReplaceAllString(rest[:loc[0]], "$1"), "") + rest[loc[0]:loc[1]]
		rest = rest[loc[1]:]
	}
	t += tagRE.ReplaceAllString(linkTextRE.ReplaceAllString(rest, "$1"), "")
	var b strings.Builder
	for _, r := range strings.ToLower(t) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// schemeRE matches a link that leaves the file system: a URL scheme
// (https:, mailto:).
var schemeRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)

// Check checks the links of each of files (paths relative to root, with /)
// and returns one error per broken link, naming the file, line and link.
// A link must stay under root, name something that exists (os.Stat, so
// symbolic links are followed), and a #fragment must be an anchor of the
// Markdown file it names (or of the file itself). Links with a URL scheme
// are not checked.
func Check(root string, files []string) ([]error, int) {
	var errs []error
	checked := 0
	anchors := map[string]map[string]bool{}
	anchorsOf := func(rel string) (map[string]bool, error) {
		if a, ok := anchors[rel]; ok {
			return a, nil
		}
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			return nil, err
		}
		anchors[rel] = Anchors(string(b))
		return anchors[rel], nil
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, l := range Links(string(b)) {
			if l.Dest == "" || schemeRE.MatchString(l.Dest) || strings.HasPrefix(l.Dest, "//") {
				continue
			}
			checked++
			p, frag, _ := strings.Cut(l.Dest, "#")
			target := f
			if p != "" {
				if strings.HasPrefix(p, "/") {
					errs = append(errs, fmt.Errorf("%s:%d: link %s: an absolute path", f, l.Line, l.Dest))
					continue
				}
				target = path.Clean(path.Join(path.Dir(f), p))
				if target == ".." || strings.HasPrefix(target, "../") {
					errs = append(errs, fmt.Errorf("%s:%d: link %s: outside %s", f, l.Line, l.Dest, root))
					continue
				}
				if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(target))); err != nil {
					errs = append(errs, fmt.Errorf("%s:%d: link %s: %s is missing", f, l.Line, l.Dest, target))
					continue
				}
			}
			if frag == "" {
				continue
			}
			if !strings.HasSuffix(target, ".md") {
				errs = append(errs, fmt.Errorf("%s:%d: link %s: a #fragment on %s, which is not Markdown", f, l.Line, l.Dest, target))
				continue
			}
			a, err := anchorsOf(target)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s:%d: link %s: %v", f, l.Line, l.Dest, err))
				continue
			}
			if !a[frag] {
				errs = append(errs, fmt.Errorf("%s:%d: link %s: %s has no heading with anchor #%s", f, l.Line, l.Dest, target, frag))
			}
		}
	}
	return errs, checked
}

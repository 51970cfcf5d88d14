// SPDX-License-Identifier: Apache-2.0

package mdlinks

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestLinks(t *testing.T) {
	md := strings.Join([]string{
		"# Title", // 1
		"See [a](docs/a.md#x-y) and ![img](p.png \"t\").", // 2
		"`[not](a link)` but [b](<b.md>)",                 // 3
		"```sh",                                           // 4
		"[no](inside.md)",                                 // 5
		"```",                                             // 6
		"[ref]: ref.md#r",                                 // 7
		`<img src="i.png"> [nested [x]](n.md) [u](https://x.y/z)`, // 8
		"",                   // 9
		"A [link whose text", // 10
		"wraps](w.md#here).", // 11
	}, "\n")
	got := Links(md)
	want := []Link{{2, "docs/a.md#x-y"}, {2, "p.png"}, {3, "b.md"}, {7, "ref.md#r"}, {8, "i.png"}, {8, "n.md"}, {8, "https://x.y/z"}, {11, "w.md#here"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Links:\n got %v\nwant %v", got, want)
	}
}

func TestSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"Writing your own program":           "writing-your-own-program",
		"XDP: `xdp/<interface>`":             "xdp-xdpinterface",
		"Decoders":                           "decoders",
		"`static_map` and [links](x.md) too": "static_map-and-links-too",
		"Label sizes, <b>bold</b> (v2)":      "label-sizes-bold-v2",
	} {
		if got := Slug(heading); got != want {
			t.Errorf("Slug(%q) = %q, want %q", heading, got, want)
		}
	}
}

func TestAnchors(t *testing.T) {
	a := Anchors("# Same\n## Same\n```\n# Not\n```\n<a id=\"own\"></a>\n### Same ##\n")
	for _, want := range []string{"same", "same-1", "same-2", "own"} {
		if !a[want] {
			t.Errorf("Anchors lacks %q: %v", want, a)
		}
	}
	if a["not"] {
		t.Errorf("a heading in a code block has an anchor: %v", a)
	}
}

func TestCheck(t *testing.T) {
	root := t.TempDir()
	write := func(name, text string) {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("docs/a.md", "# A\n## Decoders\nback to [README](../README.md#top)\n")
	write("README.md", strings.Join([]string{
		"# Top",
		"[ok](docs/a.md#decoders) [dir](docs/) [self](#top) [web](https://example.org/x)",
		"[gone](docs/b.md) [anchor](docs/a.md#labels) [up](../x.md) [abs](/etc/passwd)",
		"[frag on dir](docs/#x)",
	}, "\n"))
	errs, n := Check(root, []string{"README.md", "docs/a.md"})
	if n != 9 {
		t.Errorf("checked %d links, want 9", n)
	}
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	want := []string{
		"README.md:3: link docs/b.md: docs/b.md is missing",
		"README.md:3: link docs/a.md#labels: docs/a.md has no heading with anchor #labels",
		"README.md:3: link ../x.md: outside " + root,
		"README.md:3: link /etc/passwd: an absolute path",
		"README.md:4: link docs/#x: a #fragment on docs, which is not Markdown",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Check:\n got %q\nwant %q", got, want)
	}
}

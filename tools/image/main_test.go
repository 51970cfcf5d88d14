// SPDX-License-Identifier: Apache-2.0

package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRunReproducible writes the archive twice from the same binaries and
// checks the bytes are equal; a third run with another -created differs.
// It then reads the archive back: index.json names kernel_exporter:1.2.3
// and points at an image index of two platforms.
func TestRunReproducible(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "kernel_exporter")
	if err := os.WriteFile(bin, []byte("\x7fELF not really"), 0o755); err != nil {
		t.Fatal(err)
	}
	bins := binFlag{"amd64": bin, "arm64": bin}
	doc := filepath.Join(dir, "doc")
	for name, text := range map[string]string{"LICENSE": "Apache License", "LICENSES/BSD-2-Clause.txt": "BSD", "THIRD_PARTY_LICENSES": "modules"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(doc, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(doc, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	docs := binFlag{"amd64": doc, "arm64": doc}
	write := func(name string, created int64) []byte {
		out := filepath.Join(dir, name)
		if err := run(bins, docs, out, "1.2.3", "abc", "src", created); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a, b, c := write("a.tar", 1700000000), write("b.tar", 1700000000), write("c.tar", 1700000001)
	if !bytes.Equal(a, b) {
		t.Errorf("two runs with the same inputs wrote different archives")
	}
	if bytes.Equal(a, c) {
		t.Errorf("another -created wrote the same archive")
	}

	files := map[string][]byte{}
	readTar(t, a, func(h *tar.Header, body []byte) {
		if h.ModTime.Unix() != 1700000000 || h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s: mtime %v uid %d gid %d, want 1700000000 and root", h.Name, h.ModTime.Unix(), h.Uid, h.Gid)
		}
		files[h.Name] = body
	})
	var index struct {
		Manifests []struct {
			MediaType   string
			Digest      string
			Annotations map[string]string
		}
	}
	if err := json.Unmarshal(files["index.json"], &index); err != nil || len(index.Manifests) != 1 {
		t.Fatalf("index.json: %v, %d manifests\n%s", err, len(index.Manifests), files["index.json"])
	}
	m := index.Manifests[0]
	if m.MediaType != "application/vnd.oci.image.index.v1+json" || m.Annotations["org.opencontainers.image.ref.name"] != "kernel_exporter:1.2.3" {
		t.Errorf("index.json entry %+v", m)
	}
	inner := string(files["blobs/sha256/"+strings.TrimPrefix(m.Digest, "sha256:")])
	for _, want := range []string{`"architecture":"amd64"`, `"architecture":"arm64"`} {
		if !strings.Contains(inner, want) {
			t.Errorf("image index lacks %s: %s", want, inner)
		}
	}
	// No artifactType: OCI 1.0 tools (skopeo 1.9) would rewrite the index.
	if strings.Contains(inner, "artifactType") {
		t.Errorf("image index has artifactType: %s", inner)
	}
	if string(files["oci-layout"]) == "" {
		t.Errorf("no oci-layout file")
	}
}

// TestRootfsDoc: the -doc files are in the layer under DocDir, with their
// directories, root-owned and world-readable.
func TestRootfsDoc(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "LICENSES"), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"LICENSE": "A", "LICENSES/GPL-2.0-only.txt": "G"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	doc, err := readDoc(dir)
	if err != nil {
		t.Fatal(err)
	}
	layer, err := rootfs([]byte("bin"), doc, time.Unix(1700000000, 0))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	readTar(t, layer, func(h *tar.Header, body []byte) { got[h.Name] = fmt.Sprintf("%o %s", h.Mode, body) })
	for name, want := range map[string]string{
		"kernel_exporter":                    "755 bin",
		"usr/share/doc/":                     "755 ",
		DocDir:                               "755 ",
		DocDir + "LICENSE":                   "644 A",
		DocDir + "LICENSES/":                 "755 ",
		DocDir + "LICENSES/GPL-2.0-only.txt": "644 G",
	} {
		if got[name] != want {
			t.Errorf("%s: %q, want %q (layer: %v)", name, got[name], want, got)
		}
	}
	if err := os.Symlink("LICENSE", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if _, err := readDoc(dir); err == nil || !strings.Contains(err.Error(), "link: not a regular file") {
		t.Errorf("readDoc with a symlink: %v", err)
	}
}

// TestRunBadInput checks each flag's range and form.
func TestRunBadInput(t *testing.T) {
	out := filepath.Join(t.TempDir(), "x.tar")
	bins := binFlag{"amd64": "/nonexistent"}
	for _, tc := range []struct {
		bins         binFlag
		out, version string
		created      int64
		want         string
	}{
		{binFlag{}, out, "1", 0, "no -binary"},
		{bins, "", "1", 0, "no -out"},
		{bins, out, "", 0, "-version"},
		{bins, out, "1 2", 0, "-version"},
		{bins, out, "1", -1, "-created -1"},
		{bins, out, "1", 1 << 40, "-created"},
		{bins, out, "1", 0, "/nonexistent"},
	} {
		err := run(tc.bins, nil, tc.out, tc.version, "r", "s", tc.created)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run(%v, %q, %q, %d) = %v, want an error with %q", tc.bins, tc.out, tc.version, tc.created, err, tc.want)
		}
	}
	b := binFlag{}
	for _, s := range []string{"amd64", "s390x=/x", "amd64="} {
		if err := b.Set(s); err == nil {
			t.Errorf("-binary %q accepted", s)
		}
	}
	if err := b.Set("amd64=/x"); err != nil {
		t.Fatal(err)
	}
	if err := b.Set("amd64=/y"); err == nil {
		t.Errorf("-binary amd64 twice accepted")
	}
	if err := run(binFlag{"amd64": "/x"}, binFlag{"arm64": "/d"}, out, "1", "r", "s", 0); err == nil || !strings.Contains(err.Error(), "-doc arm64=/d: no -binary for arm64") {
		t.Errorf("-doc without its -binary: %v", err)
	}
	if err := (archFlag{"doc", binFlag{}}).Set("s390x=/d"); err == nil || !strings.Contains(err.Error(), "-doc") {
		t.Errorf("-doc s390x: %v", err)
	}
}

// readTar calls f with every entry of the tar archive data and its bytes.
func readTar(t *testing.T, data []byte, f func(*tar.Header, []byte)) {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		f(h, body)
	}
}

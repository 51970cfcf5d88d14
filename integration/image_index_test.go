// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"archive/tar"
	"context"
	"debug/elf"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/kernel-exporter/kernel_exporter/internal/testenv"
)

// imageArches are the architectures make image builds by default
// (IMAGE_ARCHES), with the ELF machine of each one's binary.
var imageArches = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// TestImageIndexArches builds the OCI archive with make image's default
// architectures (or takes KE_IMAGE_INDEX_ARCHIVE) and checks that its
// image index lists linux/amd64 and linux/arm64, each image's config
// naming its architecture and its /kernel_exporter an ELF binary of that
// machine (an arm64 node must not get exec format error). Then it copies
// the archive as docs/kubernetes.md's push step does, with skopeo copy
// --all --preserve-digests (into an OCI layout instead of a registry: the
// same code path), and checks that the copy holds the same index, by
// digest (the image.digest the docs tell to set), with both architectures.
func TestImageIndexArches(t *testing.T) {
	skopeo, err := exec.LookPath("skopeo")
	if err != nil {
		testenv.SkipOrFail(t, "skopeo not found: the push step's test needs Debian's skopeo (%v)", err)
	}
	archive := os.Getenv("KE_IMAGE_INDEX_ARCHIVE")
	if archive == "" {
		archive = makeImageArches(t, t.TempDir(), "", 10*time.Minute)
	}
	dir := t.TempDir()
	untar(t, archive, dir)
	digest := checkIndexArches(t, dir)
	progress(t, "image: index %s holds linux/amd64 and linux/arm64", digest)

	copied := filepath.Join(t.TempDir(), "copy")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, skopeo, "copy", "--all", "--preserve-digests", "oci-archive:"+archive, "oci:"+copied+":kernel_exporter:test")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", cmd, err, out)
	}
	if got := checkIndexArches(t, copied); got != digest {
		t.Errorf("skopeo copy --all --preserve-digests: index %s, want the archive's %s", got, digest)
	}
	progress(t, "image: skopeo copy --all kept index %s with both architectures", digest)
}

// makeImageArches runs make image into dist for arches (default: the
// Makefile's IMAGE_ARCHES), failing t after timeout, and returns the
// archive's path.
func makeImageArches(t *testing.T, dist, arches string, timeout time.Duration) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	args := []string{"--no-print-directory", "image", "DIST=" + dist}
	if arches != "" {
		args = append(args, "IMAGE_ARCHES="+arches)
	}
	mk := exec.CommandContext(ctx, "make", args...)
	mk.Dir = repoRoot
	mk.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := mk.CombinedOutput(); err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	}
	tars, _ := filepath.Glob(filepath.Join(dist, "kernel_exporter-*.oci.tar"))
	if len(tars) != 1 {
		t.Fatalf("make image: want one kernel_exporter-<version>.oci.tar in %s, got %v", dist, tars)
	}
	if arches == "" {
		arches = "IMAGE_ARCHES"
	}
	progress(t, "image: make image (%s) took %v: %s", arches, time.Since(start).Round(time.Second), filepath.Base(tars[0]))
	return tars[0]
}

// untar extracts the regular files and directories of the tar file src
// into dir (an OCI layout: no links), refusing names that leave dir.
func untar(t *testing.T, src, dir string) {
	t.Helper()
	f, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Clean(h.Name)
		if !filepath.IsLocal(name) {
			t.Fatalf("%s: entry %q leaves the directory", src, h.Name)
		}
		p := filepath.Join(dir, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			out, err := os.Create(p)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(out, io.LimitReader(tr, 1<<30)); err != nil {
				t.Fatal(err)
			}
			out.Close()
		}
	}
}

// checkIndexArches checks the OCI layout in dir: index.json names one
// image index, which lists exactly imageArches' platforms (linux), each an
// image whose config has that architecture and whose layer's
// /kernel_exporter is an ELF binary of its machine. It returns the index'
// digest.
func checkIndexArches(t *testing.T, dir string) string {
	t.Helper()
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatalf("OCI layout %s: %v", dir, err)
	}
	im, err := top.IndexManifest()
	if err != nil || len(im.Manifests) != 1 {
		t.Fatalf("%s/index.json: %v, %d entries, want one image index", dir, err, len(im.Manifests))
	}
	d := im.Manifests[0].Digest
	idx, err := top.ImageIndex(d)
	if err != nil {
		t.Fatalf("%s: image index %s: %v", dir, d, err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, desc := range m.Manifests {
		p := desc.Platform
		if p == nil || p.OS != "linux" {
			t.Errorf("%s: manifest %s has platform %+v, want linux/<arch>", dir, desc.Digest, p)
			continue
		}
		want, ok := imageArches[p.Architecture]
		if !ok {
			t.Errorf("%s: unexpected architecture %s", dir, p.Architecture)
			continue
		}
		seen = append(seen, p.Architecture)
		img, err := idx.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := img.ConfigFile()
		if err != nil || cfg.Architecture != p.Architecture || cfg.OS != "linux" {
			t.Errorf("%s: image %s config %v/%v (%v), want linux/%s", dir, desc.Digest, cfg.OS, cfg.Architecture, err, p.Architecture)
		}
		if got := binaryMachine(t, img.Layers); got != want {
			t.Errorf("%s: linux/%s image's /kernel_exporter is for %v, want %v", dir, p.Architecture, got, want)
		}
	}
	slices.Sort(seen)
	if !slices.Equal(seen, []string{"amd64", "arm64"}) {
		t.Errorf("%s: index %s lists %v, want [amd64 arm64]", dir, d, seen)
	}
	return d.String()
}

// binaryMachine returns the ELF machine of /kernel_exporter in the image's
// layers (read from their uncompressed tar).
func binaryMachine[L interface{ Uncompressed() (io.ReadCloser, error) }](t *testing.T, layers func() ([]L, error)) elf.Machine {
	t.Helper()
	ls, err := layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err != nil {
				break
			}
			if strings.TrimPrefix(h.Name, "./") != "kernel_exporter" {
				continue
			}
			// The ELF header's e_machine: bytes 18-19, little-endian
			// on both architectures (e_ident[EI_DATA] 1).
			head := make([]byte, 20)
			_, err = io.ReadFull(tr, head)
			rc.Close()
			if err != nil || string(head[:4]) != elf.ELFMAG || elf.Data(head[elf.EI_DATA]) != elf.ELFDATA2LSB {
				t.Fatalf("/kernel_exporter: not a little-endian ELF file (%v)", err)
			}
			return elf.Machine(uint16(head[18]) | uint16(head[19])<<8)
		}
		rc.Close()
	}
	t.Fatal("no /kernel_exporter in the image's layers")
	return 0
}

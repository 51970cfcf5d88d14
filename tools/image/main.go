// SPDX-License-Identifier: Apache-2.0

// Command image writes kernel_exporter's container image as an OCI archive
// (an OCI image layout in a tar file, as `podman load -i` and
// `podman run oci-archive:FILE` read it), from static binaries already
// built, with no base image and no network:
//
//	go run ./tools/image -out dist/kernel_exporter-1.2.0.oci.tar \
//	    -version 1.2.0 -revision <commit> -created <unix seconds> \
//	    -binary amd64=build/amd64/kernel_exporter [-binary arm64=...] \
//	    [-doc amd64=build/amd64/doc ...]
//
// Each architecture is one image FROM scratch with a single layer:
// /kernel_exporter (0755), an empty /etc/kernel_exporter/ for user programs
// (--config.dir), a /tmp (1777), and the licences under
// /usr/share/doc/kernel_exporter/ (the files of -doc ARCH=DIR: LICENSE,
// LICENSES/, THIRD_PARTY_LICENSES, as tools/image.sh stages them). ENTRYPOINT is the binary, CMD
// --web.listen-address=:19435. The images are listed in one OCI image index
// (linux/<arch> platforms), which the archive's index.json names as
// kernel_exporter:<version>.
//
// The archive is reproducible: every timestamp (tar entries, image created
// and history) is -created, owners are root, entries are sorted, and gzip
// carries no time, so two runs on the same binaries give the same bytes.
// It prints the index digest (sha256:...) on stdout.
//
// go-containerregistry writes the manifests, configs, digests and layout;
// this program only chooses their contents.
package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Name is the image's repository name in the archive's index.json.
const Name = "kernel_exporter"

// ListenPort is the port of the default CMD (the exporter's own default).
const ListenPort = 19435

// maxBinary bounds a binary read into the layer (the exporter is ~40 MiB).
const maxBinary = 512 << 20

// DocDir is where the -doc files go in the image.
const DocDir = "usr/share/doc/kernel_exporter/"

// maxDoc bounds the -doc files of one image together (the licences are
// about 700 KiB).
const maxDoc = 16 << 20

// binFlag maps an architecture to a path: -binary ARCH=PATH (its name in
// errors: "binary") and -doc ARCH=DIR.
type binFlag map[string]string

// archFlag is a binFlag with the flag's name, for its errors.
type archFlag struct {
	name string
	m    binFlag
}

func (b binFlag) String() string { return fmt.Sprint(map[string]string(b)) }

func (b binFlag) Set(s string) error { return archFlag{"binary", b}.Set(s) }

func (f archFlag) String() string { return f.m.String() }

func (f archFlag) Set(s string) error {
	arch, path, ok := strings.Cut(s, "=")
	if !ok || path == "" {
		return fmt.Errorf("-%s %q: want ARCH=PATH", f.name, s)
	}
	switch arch {
	case "amd64", "arm64":
	default:
		return fmt.Errorf("-%s %q: architecture %q is not amd64 or arm64", f.name, s, arch)
	}
	if _, dup := f.m[arch]; dup {
		return fmt.Errorf("-%s %q: %s given twice", f.name, s, arch)
	}
	f.m[arch] = path
	return nil
}

func main() {
	bins, docs := binFlag{}, binFlag{}
	flag.Var(bins, "binary", "ARCH=PATH of a static kernel_exporter for linux/ARCH (amd64, arm64); repeat for each")
	flag.Var(archFlag{"doc", docs}, "doc", "ARCH=DIR whose files (licences) go under /"+DocDir+" in linux/ARCH's image; repeat for each")
	out := flag.String("out", "", "OCI archive to write")
	version := flag.String("version", "", "image version (label org.opencontainers.image.version, tag)")
	revision := flag.String("revision", "", "source commit (label org.opencontainers.image.revision)")
	source := flag.String("source", "https://github.com/kernel-exporter/kernel_exporter", "label org.opencontainers.image.source")
	created := flag.Int64("created", -1, "timestamp of every file and of the image, in Unix seconds (SOURCE_DATE_EPOCH)")
	flag.Parse()
	if err := run(bins, docs, *out, *version, *revision, *source, *created); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(bins, docs binFlag, out, version, revision, source string, created int64) error {
	for arch := range docs {
		if _, ok := bins[arch]; !ok {
			return fmt.Errorf("-doc %s=%s: no -binary for %s", arch, docs[arch], arch)
		}
	}
	switch {
	case len(bins) == 0:
		return errors.New("no -binary given")
	case out == "":
		return errors.New("no -out given")
	case version == "" || strings.ContainsAny(version, " \t\n:/@"):
		return fmt.Errorf("-version %q: must be non-empty, without spaces, ':', '/' or '@'", version)
	case created < 0 || created > 1<<34:
		return fmt.Errorf("-created %d: must be Unix seconds between 0 and %d", created, int64(1)<<34)
	}
	when := time.Unix(created, 0).UTC()
	labels := map[string]string{
		"org.opencontainers.image.title":    Name,
		"org.opencontainers.image.version":  version,
		"org.opencontainers.image.revision": revision,
		"org.opencontainers.image.source":   source,
		"org.opencontainers.image.created":  when.Format(time.RFC3339),
	}

	archs := make([]string, 0, len(bins))
	for a := range bins {
		archs = append(archs, a)
	}
	sort.Strings(archs)
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, arch := range archs {
		img, err := archImage(bins[arch], docs[arch], arch, when, labels)
		if err != nil {
			return err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add: img,
			Descriptor: v1.Descriptor{
				Platform: &v1.Platform{OS: "linux", Architecture: arch},
			},
		})
	}

	idx, err := withoutArtifactType(idx)
	if err != nil {
		return err
	}

	dir, err := os.MkdirTemp("", "kernel_exporter-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": Name + ":" + version,
		"io.containerd.image.name":          Name + ":" + version,
	})); err != nil {
		return err
	}
	if err := tarDir(dir, out, when); err != nil {
		return err
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Println(d)
	return nil
}

// withoutArtifactType returns idx with no artifactType in its descriptors.
// go-containerregistry sets it to each image's config media type, which
// OCI 1.1 reserves for artifacts; tools that know only OCI 1.0 (skopeo
// 1.9, Debian 12's) drop the field when they copy the index, and so cannot
// push it with its digest (skopeo copy --all --preserve-digests fails,
// without it the pushed index has another digest than the one printed).
func withoutArtifactType(idx v1.ImageIndex) (v1.ImageIndex, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	m = m.DeepCopy()
	for i := range m.Manifests {
		m.Manifests[i].ArtifactType = ""
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return plainIndex{inner: idx, raw: raw, m: m}, nil
}

// plainIndex is an image index whose manifest is raw; its images are
// those of the index it wraps.
type plainIndex struct {
	inner v1.ImageIndex
	raw   []byte
	m     *v1.IndexManifest
}

func (p plainIndex) RawManifest() ([]byte, error) { return p.raw, nil }

func (p plainIndex) MediaType() (types.MediaType, error) { return p.inner.MediaType() }

func (p plainIndex) Image(h v1.Hash) (v1.Image, error) { return p.inner.Image(h) }

func (p plainIndex) ImageIndex(h v1.Hash) (v1.ImageIndex, error) { return p.inner.ImageIndex(h) }

func (p plainIndex) IndexManifest() (*v1.IndexManifest, error) { return p.m.DeepCopy(), nil }

func (p plainIndex) Size() (int64, error) { return int64(len(p.raw)), nil }

func (p plainIndex) Digest() (v1.Hash, error) {
	h, _, err := v1.SHA256(bytes.NewReader(p.raw))
	return h, err
}

// archImage is the linux/arch image: one layer, config with entrypoint,
// default arguments, labels and created time.
func archImage(binPath, docDir, arch string, when time.Time, labels map[string]string) (v1.Image, error) {
	st, err := os.Stat(binPath)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() || st.Size() > maxBinary {
		return nil, fmt.Errorf("-binary %s=%s: not a regular file of at most %d bytes", arch, binPath, maxBinary)
	}
	bin, err := os.ReadFile(binPath)
	if err != nil {
		return nil, err
	}
	var doc []docFile
	if docDir != "" {
		if doc, err = readDoc(docDir); err != nil {
			return nil, fmt.Errorf("-doc %s=%s: %w", arch, docDir, err)
		}
	}
	layerTar, err := rootfs(bin, doc, when)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Created:   v1.Time{Time: when},
			CreatedBy: "tools/image: COPY kernel_exporter /kernel_exporter",
			Comment:   "static kernel_exporter for linux/" + arch,
		},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS = "linux"
	cf.Architecture = arch
	cf.Created = v1.Time{Time: when}
	cf.Config = v1.Config{
		Entrypoint:   []string{"/kernel_exporter"},
		Cmd:          []string{fmt.Sprintf("--web.listen-address=:%d", ListenPort)},
		ExposedPorts: map[string]struct{}{fmt.Sprintf("%d/tcp", ListenPort): {}},
		Labels:       labels,
		WorkingDir:   "/",
		User:         "0:0",
	}
	return mutate.ConfigFile(img, cf)
}

// docFile is a file of -doc: its path relative to the directory (a
// trailing slash for a directory), and its bytes.
type docFile struct {
	name string
	data []byte
}

// readDoc reads dir's tree of regular files and directories, sorted by name,
// at most maxDoc bytes in all.
func readDoc(dir string) ([]docFile, error) {
	var out []docFile
	total := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		rel = filepath.ToSlash(rel)
		switch {
		case d.IsDir():
			out = append(out, docFile{name: rel + "/"})
			return nil
		case !d.Type().IsRegular():
			return fmt.Errorf("%s: not a regular file or directory", rel)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if total += int(info.Size()); total > maxDoc {
			return fmt.Errorf("more than %d bytes of files", maxDoc)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		out = append(out, docFile{name: rel, data: data})
		return nil
	})
	return out, err
}

// rootfs is the layer's tar: the binary, two directories and the doc
// files, owned by root, with mtime when.
func rootfs(bin []byte, doc []docFile, when time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	type entry struct {
		name string
		mode int64
		dir  bool
		data []byte
	}
	entries := []entry{
		{"etc/", 0o755, true, nil},
		{"etc/kernel_exporter/", 0o755, true, nil},
		{"kernel_exporter", 0o755, false, bin},
		{"tmp/", 0o1777, true, nil},
	}
	if len(doc) > 0 {
		for _, d := range []string{"usr/", "usr/share/", "usr/share/doc/", DocDir} {
			entries = append(entries, entry{d, 0o755, true, nil})
		}
		for _, f := range doc {
			isDir := strings.HasSuffix(f.name, "/")
			mode := int64(0o644)
			if isDir {
				mode = 0o755
			}
			entries = append(entries, entry{DocDir + f.name, mode, isDir, f.data})
		}
	}
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, ModTime: when, Format: tar.FormatPAX,
			Uname: "root", Gname: "root"}
		if e.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// tarDir writes dir's tree into the tar file out (through a temporary file
// renamed into place), sorted by name, root-owned, mtime when.
func tarDir(dir, out string, when time.Time) error {
	var names []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path != dir {
			names = append(names, path)
		}
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(names)
	tmp, err := os.CreateTemp(filepath.Dir(out), ".oci-*.tar")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	tw := tar.NewWriter(tmp)
	for _, path := range names {
		rel, _ := filepath.Rel(dir, path)
		st, err := os.Lstat(path)
		if err != nil {
			return err
		}
		h := &tar.Header{Name: filepath.ToSlash(rel), ModTime: when, Format: tar.FormatPAX,
			Uname: "root", Gname: "root"}
		switch {
		case st.IsDir():
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, h.Name+"/", 0o755
		case st.Mode().IsRegular():
			h.Typeflag, h.Mode, h.Size = tar.TypeReg, 0o644, st.Size()
		default:
			return fmt.Errorf("%s: not a file or directory", path)
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if h.Typeflag == tar.TypeReg {
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, f)
			f.Close()
			if err != nil {
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), out)
}

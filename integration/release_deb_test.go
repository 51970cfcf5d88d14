// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kernel-exporter/kernel_exporter/internal/mdlinks"
	"github.com/kernel-exporter/kernel_exporter/internal/testenv"
)

// debPackage is the .deb's package name (deploy/nfpm.yaml).
const debPackage = "kernel_exporter"

// TestReleaseDeb builds this machine's architecture's release with make
// release (tools/release.sh: tarball and .deb through nfpm), checks that
// every relative link of the Markdown files in the unpacked tarball
// resolves inside it, installs the .deb into the real system with dpkg -i,
// checks its files, that the links of its doc directory's Markdown files
// resolve there too, --version, the
// unit and the system user, runs the unit's command line (ExecStart with
// the ARGS of /etc/default/kernel_exporter, as root, on a test port) until
// kernel_exporter_config_up is 1 for every bundled default config, then
// removes and purges the package and checks its files are gone.
//
// It changes the system (a package, and the kernel_exporter user, which
// dpkg -P keeps as Debian does): run it on throwaway machines (CI, a VM).
// The first run downloads nfpm's modules (about 25 s).
func TestReleaseDeb(t *testing.T) {
	for _, tool := range []string{"dpkg", "dpkg-query", "make", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.SkipOrFail(t, "%s not found: the .deb test needs dpkg and a Go toolchain (%v)", tool, err)
		}
	}
	if out, err := exec.Command("dpkg-query", "-W", "-f=${Status}", debPackage).Output(); err == nil &&
		strings.Contains(string(out), "installed") && !strings.Contains(string(out), "not-installed") {
		t.Fatalf("package %s is already installed (%s): this test would replace it; dpkg -P %s first", debPackage, out, debPackage)
	}

	dist := buildRelease(t)
	version := releaseVersion(t, dist)
	debs, _ := filepath.Glob(filepath.Join(dist, "kernel_exporter_*_"+runtime.GOARCH+".deb"))
	if len(debs) != 1 {
		t.Fatalf("want one .deb for %s in %s, got %v", runtime.GOARCH, dist, debs)
	}
	sums, err := os.ReadFile(filepath.Join(dist, "sha256sums.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(sums), filepath.Base(debs[0])) {
		t.Errorf("sha256sums.txt does not list %s:\n%s", filepath.Base(debs[0]), sums)
	}
	check := exec.Command("sha256sum", "-c", "sha256sums.txt")
	check.Dir = dist
	if out, err := check.CombinedOutput(); err != nil {
		t.Errorf("sha256sum -c: %v\n%s", err, out)
	}

	checkReleaseTarball(t, dist, version)
	checkDocLinks(t, unpackRelease(t, dist, version), "the unpacked tarball")

	dpkg(t, "-i", debs[0])
	t.Cleanup(func() { _ = exec.Command("dpkg", "-P", debPackage).Run() })

	listed := dpkg(t, "-L", debPackage)
	for _, f := range []string{"/usr/bin/kernel_exporter", "/usr/lib/systemd/system/kernel_exporter.service",
		"/usr/lib/sysusers.d/kernel_exporter.conf", "/etc/default/kernel_exporter", "/etc/kernel_exporter",
		"/usr/share/doc/kernel_exporter/README.md", "/usr/share/doc/kernel_exporter/copyright",
		"/usr/share/doc/kernel_exporter/THIRD_PARTY_LICENSES",
		"/usr/share/doc/kernel_exporter/examples/syscall_errors.bpf.c",
		"/usr/share/doc/kernel_exporter/examples/syscall_errors.yaml",
		"/usr/share/kernel_exporter/include/vmlinux.h", "/usr/share/kernel_exporter/include/x86/vmlinux.h",
		"/usr/share/kernel_exporter/include/arm64/vmlinux.h",
		"/usr/share/kernel_exporter/include/kernel_exporter/maps.bpf.h",
		"/usr/share/kernel_exporter/include/kernel_exporter/usdt.bpf.h",
		"/usr/share/kernel_exporter/include/asm/errno.h",
		"/usr/share/kernel_exporter/include/bpf/bpf_helpers.h", "/usr/share/kernel_exporter/include/bpf/COPYING",
		"/usr/share/doc/kernel_exporter/docs/configuration.md", "/usr/share/doc/kernel_exporter/LICENSES/LGPL-2.1.txt",
		"/usr/share/doc/kernel_exporter/deploy",
		"/usr/share/kernel_exporter/prometheus/alerts.yml", "/usr/share/kernel_exporter/prometheus/recording.yml",
		"/usr/share/kernel_exporter/grafana/kernel_exporter.json"} {
		if !containsLine(listed, f) {
			t.Errorf("dpkg -L %s does not list %s:\n%s", debPackage, f, listed)
		}
		if _, err := os.Stat(f); err != nil {
			t.Errorf("after dpkg -i: %v", err)
		}
	}
	checkDebCopyright(t, "/usr/share/doc/kernel_exporter/copyright")
	checkDocLinks(t, "/usr/share/doc/kernel_exporter", "the .deb's doc directory")
	if conf := dpkg(t, "-s", debPackage); !strings.Contains(conf, "/etc/default/kernel_exporter") {
		t.Errorf("/etc/default/kernel_exporter is not a conffile:\n%s", conf)
	}
	if out, err := exec.Command("getent", "passwd", "kernel_exporter").Output(); err != nil {
		t.Errorf("postinst made no kernel_exporter user: %v", err)
	} else {
		t.Logf("user: %s", strings.TrimSpace(string(out)))
	}

	out, err := exec.Command("/usr/bin/kernel_exporter", "--version").Output()
	if err != nil {
		t.Fatalf("kernel_exporter --version: %v\n%s", err, out)
	}
	for _, want := range []string{"kernel_exporter, version " + version + " (", "branch: ", "revision: ",
		"build user:", "build date:", "go version:", "platform:"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("--version lacks %q:\n%s", want, out)
		}
	}
	t.Logf("--version:\n%s", out)

	unit := "/usr/lib/systemd/system/kernel_exporter.service"
	if _, err := exec.LookPath("systemd-analyze"); err == nil {
		// Only the unit's own lines: verify also reports missing
		// dependencies' units, which a container may lack.
		out, err := exec.Command("systemd-analyze", "verify", unit).CombinedOutput()
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, "kernel_exporter.service") {
				t.Errorf("systemd-analyze verify %s: %s", unit, line)
			}
		}
		t.Logf("systemd-analyze verify: err=%v %s", err, out)
	}
	checkDebNew(t)
	argv := unitCommand(t, unit)

	port := freePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	argv = append(argv, "--web.listen-address="+addr)
	t.Logf("unit command line: %q", argv)
	e := startArgv(t, addr, argv, nil, fmt.Sprintf("%q", argv))
	ms := e.Scrape()
	configs := ms.LabelValues("kernel_exporter_config_up", "config")
	if len(configs) == 0 {
		t.Fatalf("no kernel_exporter_config_up series\n%s", e.logs)
	}
	for _, c := range configs {
		if v := ms.Value("kernel_exporter_config_up", L("config", c)); v != 1 {
			t.Errorf("kernel_exporter_config_up{config=%q} = %v, want 1", c, v)
		}
	}
	t.Logf("kernel_exporter_config_up = 1 for %d configs: %v", len(configs), configs)
	if err := e.Stop(); err != nil {
		t.Errorf("stop: %v\n%s", err, e.logs)
	}

	dpkg(t, "-r", debPackage)
	if _, err := os.Stat("/usr/bin/kernel_exporter"); !os.IsNotExist(err) {
		t.Errorf("after dpkg -r, /usr/bin/kernel_exporter: %v (want it gone)", err)
	}
	if _, err := os.Stat(unit); !os.IsNotExist(err) {
		t.Errorf("after dpkg -r, %s: %v (want it gone)", unit, err)
	}
	if _, err := os.Stat("/etc/default/kernel_exporter"); err != nil {
		t.Errorf("dpkg -r removed the conffile /etc/default/kernel_exporter (only -P should): %v", err)
	}
	dpkg(t, "-P", debPackage)
	if _, err := os.Stat("/etc/default/kernel_exporter"); !os.IsNotExist(err) {
		t.Errorf("after dpkg -P, /etc/default/kernel_exporter: %v (want it gone)", err)
	}
}

// release is make release for this machine's architecture, built once for
// the package's tests that use it (TestReleaseDeb, TestReleaseAuthor) into
// a directory that removeRelease deletes when the tests end.
var release struct {
	once sync.Once
	dist string
	err  error
}

// buildRelease returns the directory make release wrote this machine's
// architecture's tarball, .deb and sha256sums.txt into, building them on
// the first call. The first build also downloads nfpm's modules (about
// 25 s).
func buildRelease(t *testing.T) string {
	t.Helper()
	release.once.Do(func() {
		dist, err := os.MkdirTemp("", "kernel_exporter-release-")
		if err != nil {
			release.err = err
			return
		}
		release.dist = dist
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		mk := exec.CommandContext(ctx, "make", "--no-print-directory", "release",
			"RELEASE_ARCHES="+runtime.GOARCH, "DIST="+dist)
		mk.Dir = repoRoot
		mk.Env = append(os.Environ(), "CGO_ENABLED=0")
		start := time.Now()
		if out, err := mk.CombinedOutput(); err != nil {
			release.err = fmt.Errorf("make release: %v\n%s", err, out)
			return
		}
		t.Logf("make release (%s) took %v", runtime.GOARCH, time.Since(start).Round(time.Second))
	})
	if release.err != nil {
		t.Fatal(release.err)
	}
	return release.dist
}

// removeRelease deletes what buildRelease built (TestMain calls it).
func removeRelease() {
	if release.dist != "" {
		_ = os.RemoveAll(release.dist)
	}
}

// unpackRelease unpacks this machine's architecture's tarball of dist into
// a new temporary directory and returns its top directory.
func unpackRelease(t *testing.T, dist, version string) string {
	t.Helper()
	top := "kernel_exporter-" + version + ".linux-" + runtime.GOARCH
	dir := t.TempDir()
	if out, err := exec.Command("tar", "-xzf", filepath.Join(dist, top+".tar.gz"), "-C", dir).CombinedOutput(); err != nil {
		t.Fatalf("tar -xzf %s.tar.gz: %v\n%s", top, err, out)
	}
	return filepath.Join(dir, top)
}

// checkDocLinks checks every relative link (file and #anchor) of every
// Markdown file under root (symbolic links to directories not followed)
// with mdlinks: each must resolve inside root. what names root in errors.
func checkDocLinks(t *testing.T, root, what string) {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") && d.Type().IsRegular() {
			rel, _ := filepath.Rel(root, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	errs, n := mdlinks.Check(root, files)
	for _, e := range errs {
		t.Errorf("%s: %v", what, e)
	}
	for _, want := range []string{"README.md", "docs/configuration.md", "examples/README.md"} {
		if !slices.Contains(files, want) {
			t.Errorf("%s: no %s (Markdown files: %v)", what, want, files)
		}
	}
	if n < 150 {
		t.Errorf("%s: %d relative links in %d Markdown files: fewer than README.md and docs/ have", what, n, len(files))
	}
	t.Logf("%s: %d relative links in %d Markdown files resolve inside it, %d broken", what, n, len(files), len(errs))
}

// dpkg runs dpkg with args and returns its output, failing t on error.
func dpkg(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("dpkg", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("dpkg %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func containsLine(text, line string) bool {
	for _, l := range strings.Split(text, "\n") {
		if strings.TrimSpace(l) == line {
			return true
		}
	}
	return false
}

// releaseVersion returns <version> from dist's
// kernel_exporter-<version>.linux-<arch>.tar.gz.
func releaseVersion(t *testing.T, dist string) string {
	t.Helper()
	suffix := ".linux-" + runtime.GOARCH + ".tar.gz"
	tars, _ := filepath.Glob(filepath.Join(dist, "kernel_exporter-*"+suffix))
	if len(tars) != 1 {
		t.Fatalf("want one kernel_exporter-<version>%s in %s, got %v", suffix, dist, tars)
	}
	v := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(tars[0]), "kernel_exporter-"), suffix)
	if v == "" || strings.HasPrefix(v, "v") {
		t.Fatalf("tarball %s: version %q is empty or keeps its leading v", tars[0], v)
	}
	return v
}

// unitCommand returns the unit's ExecStart as systemd would run it: each
// unbraced $VAR replaced by the whitespace-split words of that variable
// from its EnvironmentFile (read by sh, as the file is shell syntax).
func unitCommand(t *testing.T, unit string) []string {
	t.Helper()
	text, err := os.ReadFile(unit)
	if err != nil {
		t.Fatal(err)
	}
	var exec_, envFile string
	for _, line := range strings.Split(string(text), "\n") {
		if v, ok := strings.CutPrefix(line, "ExecStart="); ok {
			exec_ = v
		}
		if v, ok := strings.CutPrefix(line, "EnvironmentFile="); ok {
			envFile = strings.TrimPrefix(v, "-")
		}
	}
	if exec_ != "/usr/bin/kernel_exporter $ARGS" || envFile != "/etc/default/kernel_exporter" {
		t.Fatalf("%s: ExecStart=%q EnvironmentFile=%q, want /usr/bin/kernel_exporter $ARGS and /etc/default/kernel_exporter", unit, exec_, envFile)
	}
	out, err := exec.Command("sh", "-c", `set -a; . "$1"; printf '%s' "$ARGS"`, "sh", envFile).Output()
	if err != nil {
		t.Fatalf("read %s: %v", envFile, err)
	}
	var argv []string
	for _, w := range strings.Fields(exec_) {
		if w == "$ARGS" {
			argv = append(argv, strings.Fields(string(out))...)
			continue
		}
		argv = append(argv, w)
	}
	return argv
}

// releaseKit are the files every release tarball holds besides the binary,
// README.md and the unit: the licences, the kit for writing programs
// (headers, libbpf's among them, and the example) and docs/ (some of its
// pages; checkDocLinks proves README.md's links all resolve).
var releaseKit = []string{
	"LICENSE", "LICENSES/Apache-2.0.txt", "LICENSES/GPL-2.0-only.txt", "LICENSES/BSD-2-Clause.txt",
	"THIRD_PARTY_LICENSES",
	"include/vmlinux.h", "include/x86/vmlinux.h", "include/arm64/vmlinux.h",
	"include/kernel_exporter/maps.bpf.h", "include/kernel_exporter/usdt.bpf.h", "include/asm/errno.h",
	"include/bpf/bpf_helpers.h", "include/bpf/bpf_helper_defs.h", "include/bpf/bpf_tracing.h",
	"include/bpf/bpf_core_read.h", "include/bpf/bpf_endian.h", "include/bpf/COPYING", "LICENSES/LGPL-2.1.txt",
	"examples/README.md", "examples/syscall_errors.bpf.c", "examples/syscall_errors.yaml",
	"docs/configuration.md", "docs/programs.md", "docs/security.md", "docs/landing.png",
	"deploy/kernel_exporter.service", "deploy/kernel_exporter.sysusers",
	"deploy/prometheus/alerts.yml", "deploy/prometheus/recording.yml", "deploy/prometheus/tests.yml",
	"deploy/grafana/kernel_exporter.json",
}

// checkReleaseTarball checks that this architecture's tarball holds the
// binary, README.md, the licences and the kit, under one top directory.
func checkReleaseTarball(t *testing.T, dist, version string) {
	t.Helper()
	top := "kernel_exporter-" + version + ".linux-" + runtime.GOARCH
	f, err := os.Open(filepath.Join(dist, top+".tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	files := tarFiles(t, top+".tar.gz", zr, func(string) bool { return true }, 256)
	for _, want := range append([]string{"kernel_exporter", "README.md"}, releaseKit...) {
		if _, ok := files[top+"/"+want]; !ok {
			t.Errorf("%s.tar.gz lacks %s/%s", top, top, want)
		}
	}
	if !strings.Contains(files[top+"/LICENSE"], "Apache License") {
		t.Errorf("%s/LICENSE is not the Apache License: %q", top, files[top+"/LICENSE"])
	}
	t.Logf("%s.tar.gz: %d entries, the licences and the kit (%d files checked)", top, len(files), len(releaseKit))
}

// checkDebCopyright checks the installed copyright file against Debian's
// machine-readable format: the Format line, and a stand-alone License
// paragraph for every licence a Files paragraph names.
func checkDebCopyright(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	paras := strings.Split(strings.TrimSpace(string(b)), "\n\n")
	if !strings.HasPrefix(paras[0], "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n") {
		t.Errorf("%s: first paragraph lacks the Format line:\n%s", path, paras[0])
	}
	used, defined := map[string]bool{}, map[string]bool{}
	for _, p := range paras[1:] {
		first, _, _ := strings.Cut(p, "\n")
		lic := ""
		for _, line := range strings.Split(p, "\n") {
			if v, ok := strings.CutPrefix(line, "License: "); ok {
				lic = v
			}
		}
		switch {
		case strings.HasPrefix(first, "Files: "):
			for _, l := range strings.Split(lic, " or ") {
				used[l] = true
			}
		case strings.HasPrefix(first, "License: "):
			defined[lic] = true
		default:
			t.Errorf("%s: a paragraph that is neither Files nor License: %q", path, first)
		}
	}
	for l := range used {
		if !defined[l] {
			t.Errorf("%s: licence %q is used but has no License paragraph", path, l)
		}
	}
	for _, l := range []string{"Apache-2.0", "GPL-2", "BSD-2-clause", "LGPL-2.1"} {
		if !used[l] {
			t.Errorf("%s: no Files paragraph under %s", path, l)
		}
	}
}

// tarFiles reads the tar stream r (what names it in errors) and returns
// the entries whose name, without a leading "/", keep accepts, each with
// its first max bytes.
func tarFiles(t *testing.T, what string, r io.Reader, keep func(string) bool, max int64) map[string]string {
	t.Helper()
	files := map[string]string{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		name := strings.TrimPrefix(h.Name, "/")
		if !keep(name) {
			continue
		}
		body, err := io.ReadAll(io.LimitReader(tr, max))
		if err != nil {
			t.Fatalf("%s: %s: %v", what, name, err)
		}
		files[name] = string(body)
	}
}

// checkDebNew writes a program with the installed binary's new command: it
// must take the headers the package installed rather than write its own,
// name the package's docs/configuration.md#decoders, and the program must
// build with them (clang-19, libbpf-dev's headers hidden) and load (make
// check).
func checkDebNew(t *testing.T) {
	t.Helper()
	const inc = "/usr/share/kernel_exporter/include"
	dir := filepath.Join(t.TempDir(), "kedeb")
	out, err := exec.Command("/usr/bin/kernel_exporter", "new", "kedeb", "--dir", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("kernel_exporter new: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "headers: "+inc+"\n") {
		t.Errorf("kernel_exporter new did not take the installed headers:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "include")); !os.IsNotExist(err) {
		t.Errorf("kernel_exporter new wrote headers although the package installed them: %v", err)
	}
	if _, err := exec.LookPath("clang-19"); err != nil {
		// Not a skip: the rest of the package test still runs.
		if testenv.UnderCI() {
			t.Errorf("clang-19 not found (make test-deps installs it): cannot build the program new wrote")
		} else {
			t.Logf("clang-19 not found: the program new wrote from the .deb is not built")
		}
		return
	}
	const ref = "/usr/share/doc/kernel_exporter/docs/configuration.md#decoders"
	if c, err := os.ReadFile(filepath.Join(dir, "kedeb.bpf.c")); err != nil || !strings.Contains(string(c), " * "+ref+".") {
		t.Errorf("the program new wrote from the .deb does not name %s (err %v):\n%s", ref, err, c)
	}
	for _, target := range []string{"", "check"} {
		// Built with libbpf-dev's headers hidden: the package's are enough.
		argv := hideLibbpf("make", "--no-print-directory")
		if target != "" {
			argv = append(argv, target)
		}
		mk := exec.Command(argv[0], argv[1:]...)
		mk.Dir = dir
		out, err := mk.CombinedOutput()
		if err != nil {
			t.Fatalf("make %s in a program new wrote from the .deb: %v\n%s", target, err, out)
		}
		if target == "check" && !strings.Contains(string(out), "ok    kedeb ") {
			t.Errorf("make check:\n%s", out)
		}
	}
	t.Logf("kernel_exporter new from the .deb: headers from %s, built and checked", inc)
}

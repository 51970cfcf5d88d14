// SPDX-License-Identifier: Apache-2.0

package sourcetree

import (
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kernel-exporter/kernel_exporter/internal/testenv"
)

// repoFiles returns the repository's top directory and its tracked files.
func repoFiles(t *testing.T) (string, []string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		testenv.SkipOrFail(t, "git not found: the source tree tests list the tracked files with it (%v)", err)
	}
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		testenv.SkipOrFail(t, "not in a git checkout: %v", err)
	}
	root := strings.TrimSpace(string(out))
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = root
	out, err = cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	var files []string
	for _, f := range strings.Split(string(out), "\x00") {
		// A file deleted in the work tree but not yet in the index.
		if _, err := os.Lstat(filepath.Join(root, f)); f != "" && err == nil {
			files = append(files, f)
		}
	}
	return root, files
}

// Expected returns the licence a source file must declare, or "" for a file
// that is not source (data, docs, configs, fuzz corpora, objects).
func Expected(path string, head []byte) string {
	base := filepath.Base(path)
	switch {
	case strings.Contains(path, "/testdata/fuzz/"):
		return ""
	case strings.HasSuffix(path, "/vmlinux.h") && path != "include/vmlinux.h":
		return VmlinuxLicence
	case strings.HasSuffix(path, ".bpf.c"), strings.HasSuffix(path, ".bpf.c.tmpl"),
		strings.HasPrefix(path, "include/") && strings.HasSuffix(path, ".h"):
		return BPFLicence
	}
	switch filepath.Ext(base) {
	case ".go", ".c", ".h", ".sh", ".js", ".css", ".html":
		return GoLicence
	}
	if base == "Makefile" || bytes.HasPrefix(head, []byte("#!")) {
		return GoLicence
	}
	return ""
}

var spdxRE = regexp.MustCompile(`SPDX-License-Identifier: (.+?)\s*(\*/|-->)?\s*$`)

// declared returns the SPDX expression of the first five lines of head.
func declared(head []byte) string {
	lines := bytes.SplitN(head, []byte("\n"), 6)
	for _, l := range lines[:min(5, len(lines))] {
		if m := spdxRE.FindSubmatch(l); m != nil {
			return string(m[1])
		}
	}
	return ""
}

// TestSPDXHeaders: every source file declares the licence of its kind in
// its first five lines, and LICENSES/ holds the text of each licence named.
func TestSPDXHeaders(t *testing.T) {
	root, files := repoFiles(t)
	checked := map[string]int{}
	for _, f := range files {
		fh, err := os.Open(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		head := make([]byte, 1024)
		n, _ := fh.Read(head)
		fh.Close()
		head = head[:n]
		want := Expected(f, head)
		if want == "" {
			continue
		}
		got := declared(head)
		switch {
		case got == "":
			t.Errorf("%s: no SPDX-License-Identifier line in its first five lines (want %q)", f, want)
		case got != want:
			t.Errorf("%s: SPDX-License-Identifier %q, want %q", f, got, want)
		}
		checked[want]++
	}
	if checked[GoLicence] < 300 || checked[BPFLicence] < 50 || checked[VmlinuxLicence] != 2 {
		t.Errorf("checked %v: fewer files than the repository has (is git ls-files complete?)", checked)
	}
	t.Logf("source files checked, by licence: %v", checked)
	for _, expr := range []string{GoLicence, BPFLicence, VmlinuxLicence} {
		for _, id := range strings.Split(expr, " OR ") {
			if _, err := os.Stat(filepath.Join(root, "LICENSES", id+".txt")); err != nil {
				t.Errorf("licence %s is used but its text is missing: %v", id, err)
			}
		}
	}
	lic, err := os.ReadFile(filepath.Join(root, "LICENSE"))
	if err != nil || !bytes.Contains(lic, []byte("Apache License")) || !bytes.Contains(lic, []byte("Version 2.0, January 2004")) {
		t.Errorf("LICENSE is not the Apache License 2.0 (err %v)", err)
	}
}

// gplCompatible are the license strings the kernel counts as GPL-compatible
// (license_is_gpl_compatible, include/linux/license.h): a program whose
// object says anything else cannot call GPL-only helpers.
var gplCompatible = map[string]bool{
	"GPL": true, "GPL v2": true, "GPL and additional rights": true,
	"Dual BSD/GPL": true, "Dual MIT/GPL": true, "Dual MPL/GPL": true,
}

// kernelName is the license string for each SPDX expression of a BPF source.
var kernelName = map[string]string{BPFLicence: KernelLicence}

var licenseRE = regexp.MustCompile(`char LICENSE\[\] SEC\("license"\) = "([^"]*)";`)

// TestObjectLicences: every BPF source sets the license string of its SPDX
// expression, and every committed object holds its source's string.
func TestObjectLicences(t *testing.T) {
	root, files := repoFiles(t)
	sources, objects := 0, 0
	for _, f := range files {
		isSrc, isTmpl := strings.HasSuffix(f, ".bpf.c"), strings.HasSuffix(f, ".bpf.c.tmpl")
		if !isSrc && !isTmpl {
			continue
		}
		src, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		m := licenseRE.FindAllSubmatch(src, -1)
		if len(m) != 1 {
			t.Errorf("%s: want one char LICENSE[] SEC(\"license\") = \"...\"; line, found %d", f, len(m))
			continue
		}
		sources++
		str := string(m[0][1])
		if want := kernelName[declared(src)]; str != want {
			t.Errorf("%s: license string %q, want %q for SPDX %q", f, str, want, declared(src))
		}
		if !gplCompatible[str] {
			t.Errorf("%s: license string %q is not GPL-compatible for the kernel: GPL-only helpers would be refused", f, str)
		}
		if isTmpl {
			continue
		}
		obj := strings.TrimSuffix(f, ".c") + ".o"
		if _, err := os.Stat(filepath.Join(root, obj)); err != nil {
			continue // built by the test that uses it
		}
		objects++
		ef, err := elf.Open(filepath.Join(root, obj))
		if err != nil {
			t.Errorf("%s: %v", obj, err)
			continue
		}
		sec := ef.Section("license")
		var data []byte
		if sec != nil {
			data, err = sec.Data()
		}
		ef.Close()
		if sec == nil || err != nil {
			t.Errorf("%s: no readable license section (%v)", obj, err)
			continue
		}
		if got := string(bytes.TrimRight(data, "\x00")); got != str {
			t.Errorf("%s: license section %q, but %s sets %q: run make bpf", obj, got, f, str)
		}
	}
	if sources < 50 || objects < 30 {
		t.Errorf("checked %d sources and %d objects: fewer than the repository has", sources, objects)
	}
	t.Logf("%d BPF sources, %d committed objects: license %q", sources, objects, KernelLicence)
}

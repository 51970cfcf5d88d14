// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/config"
	"github.com/kernel-exporter/kernel_exporter/loader"
)

// matrixObjects are the precompiled test objects of the cgrp_storage and
// PCI matrix tests (the guests have no compiler; make bpf builds them).
//
//go:embed testdata/fallback/cgroup_id_map_cgrp_storage.bpf.o testdata/fallback/cgroup_id_map_cgrp_storage.yaml
//go:embed testdata/fallback/pci_config.bpf.o testdata/fallback/pci_config.yaml
var matrixObjects embed.FS

// writeMatrixObject writes testdata/fallback/<name>.bpf.o and <name>.yaml
// into dir, the YAML with old replaced by repl (which must be there when
// old is not empty), for --config.dir.
func writeMatrixObject(t *testing.T, dir, name, old, repl string) {
	t.Helper()
	obj, err := fs.ReadFile(matrixObjects, "testdata/fallback/"+name+".bpf.o")
	if err != nil {
		t.Fatal(err)
	}
	y, err := fs.ReadFile(matrixObjects, "testdata/fallback/"+name+".yaml")
	if err != nil {
		t.Fatal(err)
	}
	if old != "" {
		if !strings.Contains(string(y), old) {
			t.Fatalf("%s.yaml has no %q", name, old)
		}
		y = []byte(strings.Replace(string(y), old, repl, 1))
	}
	if err := os.WriteFile(filepath.Join(dir, name+".bpf.o"), obj, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".yaml"), y, 0o644); err != nil {
		t.Fatal(err)
	}
}

// getppidN makes arg getppid() calls (the child mode "getppids"); the Go
// runtime itself never calls getppid.
func getppidN(arg string) error {
	n, err := strconv.Atoi(arg)
	if err != nil || n < 1 || n > 1000000 {
		return fmt.Errorf("getppids: bad argument %q", arg)
	}
	for range n {
		unix.Getppid()
	}
	return nil
}

// TestMatrixCgroupIDMapCgrpStorage runs testdata/fallback/cgroup_id_map_cgrp_storage
// (a config in cloudflare/ebpf_exporter's format whose cgroup_id_map has
// type cgrp_storage) with its regexp replaced by one matching this test's
// cgroups "<name>-match" and "<name>-late", not "<name>-other". A child in
// match makes 300 getppid() calls and one in other 170: the program counts
// each call in the "match" metric when the caller's cgroup has the value 1
// in the cgrp_storage map, else in the "not match" one, by cgroup. match
// must move by exactly 300 in the first metric and other by 170 in the
// second, neither in the other. late, made while the exporter runs, must be
// counted as a match within 15 s (refresh interval 10 s). Before Linux 6.2
// (no BPF_MAP_TYPE_CGRP_STORAGE) the config must be down with a reason
// naming the map type and 6.2. It runs on this kernel and in the kernel
// matrix.
func TestMatrixCgroupIDMapCgrpStorage(t *testing.T) {
	const (
		name     = "cgroup_id_map_cgrp_storage"
		matched  = "kernel_cgrp_storage_getppid_total"
		notMatch = "kernel_cgrp_storage_getppid_not_match_total"
		nMatch   = 300
		nOther   = 170
	)
	r := matrixReport(t, "cgroup_id_map cgrp_storage (test)", "default")
	v2 := cgroup2Dir(t)
	base := randomName(t, "kx-cgst-")
	mkCgroup := func(suffix string) (procs, path string) { return v2.mkCgroup(t, base+"-"+suffix) }
	matchProcs, matchPath := mkCgroup("match")
	otherProcs, otherPath := mkCgroup("other")

	dir := t.TempDir()
	writeMatrixObject(t, dir, name, "    - ^.*(system.slice/.*)$\n", "    - ^/"+base+"-(match|late)$\n")
	e := Start(t, "--programs=none", "--config.dir="+dir, "--config.names="+name)
	a := e.Scrape()
	if v := a.Value("kernel_exporter_config_up", L("config", name)); v != 1 {
		reason := errorReason(a, name)
		if _, ver, err := loader.KernelRelease(); err == nil && ver.Less(config.KernelVersion{6, 2, 0}) {
			if !strings.Contains(reason, "map cgrp_storage_match: map type CgroupStorage (Linux 6.2) not supported by this kernel") {
				t.Fatalf("config down before 6.2 with reason %q, want the map type and 6.2 named", reason)
			}
			r.result = "unsupported: down before 6.2, map type named"
			t.Skipf("BPF_MAP_TYPE_CGRP_STORAGE is Linux 6.2: config down as it must be: %s", reason)
		}
		t.Fatalf("config_up{config=%s} = %v, want 1: %s\n%s", name, v, reason, e.Logs())
	}
	r.attach = "tp_btf (1 program)"
	for _, c := range []struct {
		procs string
		n     int
	}{{matchProcs, nMatch}, {otherProcs, nOther}} {
		if out, err := runChild(t, "getppids", strconv.Itoa(c.n), []string{c.procs}); err != nil {
			t.Fatalf("getppids child: %v\n%s", err, out)
		}
	}
	b := e.Scrape()
	for _, w := range []struct {
		metric, cgroup string
		want           float64
	}{
		{matched, matchPath, nMatch},
		{notMatch, matchPath, 0},
		{notMatch, otherPath, nOther},
		{matched, otherPath, 0},
	} {
		l := L("cgroup", w.cgroup)
		if d := b.Value(w.metric, l) - a.Value(w.metric, l); d != w.want {
			t.Errorf("%s{cgroup=%s} moved by %v, want %v\n%s\n%s", w.metric, w.cgroup, d, w.want, b.seriesDump(matched), b.seriesDump(notMatch))
		}
	}
	for _, v := range b.LabelValues(matched, "cgroup") {
		if v != matchPath {
			t.Errorf("%s has a series for cgroup %q, want only %s", matched, v, matchPath)
		}
	}
	t.Logf("%s{cgroup=%s} +%d, %s{cgroup=%s} +%d", matched, matchPath, nMatch, notMatch, otherPath, nOther)

	// A matching cgroup made after start is marked within an interval.
	lateProcs, latePath := mkCgroup("late")
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(v2.dir, base+"-late"), &st); err != nil {
		t.Fatal(err)
	}
	// Until the cgroup decoder's next walk names the new id, the label is
	// unknown_cgroup_id:<id>.
	lateID := "unknown_cgroup_id:" + strconv.FormatUint(st.Ino, 10)
	made := time.Now()
	var late float64
	Eventually(t, 15*time.Second, func() bool {
		if out, err := runChild(t, "getppids", "10", []string{lateProcs}); err != nil {
			t.Fatalf("getppids child: %v\n%s", err, out)
		}
		ms := e.Scrape()
		late = ms.Value(matched, L("cgroup", latePath)) + ms.Value(matched, L("cgroup", lateID))
		return late > 0
	}, "%s{cgroup=%s or %s} did not appear within 15 s of the cgroup's creation (refresh interval 10 s)\n%s", matched, latePath, lateID, e.Logs)
	if int(late)%10 != 0 {
		t.Errorf("%s for the late cgroup = %v, want a multiple of 10 (whole children counted)", matched, late)
	}
	lateAfter := time.Since(made).Round(100 * time.Millisecond)
	t.Logf("cgroup %s made after start: counted as a match %v later", latePath, lateAfter)
	r.result = fmt.Sprintf("moved: match +%d, other +%d as not match; new cgroup marked after %v", nMatch, nOther, lateAfter)
}

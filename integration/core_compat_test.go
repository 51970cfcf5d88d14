// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"gopkg.in/yaml.v3"
)

// ebpfExporterV2Keys are the YAML keys of ebpf_exporter v2 configs; the
// examples use nothing else, so they load in either exporter.
var ebpfExporterV2Keys = map[string]bool{
	"metrics": true, "counters": true, "histograms": true, "name": true, "help": true,
	"labels": true, "size": true, "decoders": true, "static_map": true, "allow_unknown": true,
	"regexps": true, "bucket_type": true, "bucket_min": true, "bucket_max": true,
	"bucket_multiplier": true, "bucket_keys": true, "perf_event_array": true,
	"flush_interval": true, "kaddrs": true, "cgroup_id_map": true, "tracing": true,
	"padding": true, "type": true, "spans": true, "ringbuf": true, "service": true,
}

// nonV2Keys returns the mapping keys of n (recursively) that ebpf_exporter
// v2 does not know. The entries of a static_map are data, not keys.
func nonV2Keys(n *yaml.Node) []string {
	var out []string
	switch n.Kind {
	case yaml.DocumentNode, yaml.SequenceNode:
		for _, c := range n.Content {
			out = append(out, nonV2Keys(c)...)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			if !ebpfExporterV2Keys[k] {
				out = append(out, k)
			}
			if k != "static_map" {
				out = append(out, nonV2Keys(n.Content[i+1])...)
			}
		}
	}
	return out
}

// buildExample compiles examples/<name>.bpf.c (compileBPF) into a temp
// directory and copies examples/<name>.yaml next to it, as a user would
// lay out --config.dir. It returns the directory.
func buildExample(t *testing.T, name string) string {
	t.Helper()
	return buildConfigDir(t, "examples", name)
}

// buildConfigDir is buildExample for the program <name> in the
// repository directory src (such as integration/testdata/compat), compiled
// with the extra compiler flags cflags. It fails the test when the config
// uses keys ebpf_exporter v2 does not know.
func buildConfigDir(t *testing.T, src, name string, cflags ...string) string {
	t.Helper()
	dir := t.TempDir()
	compileBPF(t, filepath.Join(src, name+".bpf.c"), filepath.Join(dir, name+".bpf.o"), cflags...)
	y, err := os.ReadFile(filepath.Join(repoRoot, src, name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(y, &doc); err != nil {
		t.Fatalf("%s/%s.yaml: %v", src, name, err)
	}
	if bad := nonV2Keys(&doc); len(bad) > 0 {
		t.Errorf("%s/%s.yaml uses keys ebpf_exporter v2 does not know: %v", src, name, bad)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".yaml"), y, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestExampleSyscallErrors builds the worked example (an ebpf_exporter v2
// style config: counters, labels with size and decoder chains uint→syscall
// and uint→errno), runs it as a user program, and checks that 200 failing
// openat calls on a missing path are counted as {syscall="openat",
// errno="ENOENT"}.
func TestExampleSyscallErrors(t *testing.T) {
	const (
		metric = "kernel_syscall_errors_total"
		calls  = 200
	)
	dir := buildExample(t, "syscall_errors")
	e := Start(t, "--programs=none", "--config.dir="+dir, "--config.names=syscall_errors")
	labels := L("syscall", "openat", "errno", "ENOENT")
	before := e.Scrape()
	if v := before.Value("kernel_exporter_config_up", L("config", "syscall_errors")); v != 1 {
		t.Fatalf("config_up{config=syscall_errors} = %v, want 1\n%s", v, e.Logs())
	}
	missing := filepath.Join(t.TempDir(), "does-not-exist")
	for i := range calls {
		fd, err := unix.Openat(unix.AT_FDCWD, missing, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != unix.ENOENT {
			if err == nil {
				unix.Close(fd)
			}
			t.Fatalf("openat #%d of %s: %v, want ENOENT", i, missing, err)
		}
	}
	var d float64
	Eventually(t, 5*time.Second, func() bool {
		d = e.Scrape().Value(metric, labels) - before.Value(metric, labels)
		return d >= calls
	}, "%s{syscall=openat,errno=ENOENT} moved by %v after %d failing openat calls, want >= %d", metric, d, calls, calls)
	t.Logf("%s{syscall=openat,errno=ENOENT}: +%v after %d failing openat calls", metric, d, calls)
}

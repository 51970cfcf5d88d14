// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestProgramExec runs two copies of /bin/true with unique names, one of
// exactly 15 bytes (the most a comm holds) and one longer, and checks that
// the exec program counted every run under the new program's comm: exactly
// n and m, the longer name truncated to its first 15 bytes. Exact because
// sched:sched_process_exec fires once per successful exec and the names
// are random, so no other process on the machine has them.
func TestProgramExec(t *testing.T) {
	const (
		n      = 25
		m      = 7
		metric = "kernel_process_execs_total"
	)
	dir := t.TempDir()
	src, err := os.ReadFile("/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	short := randomName(t, "kxexec-") // 7 + 8 = 15 bytes
	long := randomName(t, "kxlong") + "-truncated"
	for _, name := range []string{short, long} {
		if err := os.WriteFile(filepath.Join(dir, name), src, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	longComm := long[:15]

	e := Start(t, "--programs=exec")
	before := e.Scrape()
	if v := before.Value("kernel_exporter_config_up", L("config", "exec")); v != 1 {
		t.Fatalf("config_up{config=exec} = %v, want 1\n%s", v, e.Logs())
	}
	run := func(name string, times int) {
		for i := range times {
			if out, err := exec.Command(filepath.Join(dir, name)).CombinedOutput(); err != nil {
				t.Fatalf("run %s #%d: %v\n%s", name, i, err, out)
			}
		}
	}
	run(short, n)
	run(long, m)
	after := e.Scrape()

	for _, c := range []struct {
		comm string
		want float64
	}{{short, n}, {longComm, m}} {
		if d := after.Value(metric, L("comm", c.comm)) - before.Value(metric, L("comm", c.comm)); d != c.want {
			t.Errorf("%s{comm=%q} moved by %v, want exactly %v\n%s", metric, c.comm, d, c.want, after.seriesDump(metric))
		}
	}
	if after.Series(metric, L("comm", long)) != 0 {
		t.Errorf("comm %q was not truncated to 15 bytes", long)
	}
	// The overflow series is created by the first exec, before any name.
	if after.Series(metric, L("comm", "[other]")) != 1 {
		t.Errorf("no %s{comm=\"[other]\"} series\n%s", metric, after.seriesDump(metric))
	}

	// Bound: exec k more distinct names (hard links of the same file), more
	// than the map's 512 keys. The map fills up: exactly 512 series, and the
	// names that found it full are counted under [other]. At most 511 names
	// have their own key, so at least k-511 of our execs went to [other],
	// and every one of our k execs is counted somewhere.
	const k = 600
	names := make([]string, k)
	for i := range names {
		names[i] = filepath.Join(dir, fmt.Sprintf("kxb%04d%s", i, short[7:])) // 15 bytes
		if err := os.Link(filepath.Join(dir, short), names[i]); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range names {
		if out, err := exec.Command(name).CombinedOutput(); err != nil {
			t.Fatalf("run %s: %v\n%s", name, err, out)
		}
	}
	full := e.Scrape()
	if s := full.Series(metric, nil); s != 512 {
		t.Errorf("%s has %d series after %d distinct names, want 512 (the map's bound)", metric, s, k)
	}
	other := full.Value(metric, L("comm", "[other]")) - after.Value(metric, L("comm", "[other]"))
	var own float64
	for _, name := range names {
		own += full.Value(metric, L("comm", filepath.Base(name)))
	}
	if other < k-511 {
		t.Errorf("[other] moved by %v after %d new names, want >= %d", other, k, k-511)
	}
	if own+other < k {
		t.Errorf("our %d execs: %v under their own names + %v under [other] (which also has other processes' execs), want >= %d", k, own, other, k)
	}
	t.Logf("after %d distinct names: %d series, %v under own names, [other] +%v", k, full.Series(metric, nil), own, other)
}

// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestProgramOOMKill runs a child process (this test binary) that puts
// itself into a new cgroup limited to 32 MiB and touches 256 MiB, and checks
// that the OOM killer killed it and oomkill counted exactly one kill under
// the child's cgroup path. The child is alone in that cgroup, so it is the
// only possible victim, and no other task is ever in the cgroup.
func TestProgramOOMKill(t *testing.T) {
	const metric = "kernel_oom_kills_total"
	cg := newMemCgroup(t, 32<<20)
	e := Start(t, "--programs=oomkill")
	if v := e.Scrape().Value("kernel_exporter_config_up", L("config", "oomkill")); v != 1 {
		t.Fatalf("config_up{config=oomkill} = %v, want 1\n%s", v, e.Logs())
	}

	after := oomKill(t, e, cg, metric, 5*time.Second)
	if v := after.Value(metric, L("cgroup", cg.V2Path)); v != 1 {
		t.Errorf("%s{cgroup=%q} = %v, want exactly 1\n%s", metric, cg.V2Path, v, after.seriesDump(metric))
	}
	t.Logf("%s{cgroup=%q} = %v", metric, cg.V2Path, after.Value(metric, L("cgroup", cg.V2Path)))
}

// TestProgramDirectReclaim runs a child process in a new cgroup limited to
// 32 MiB that writes a 128 MiB file through the page cache and reads it
// back, and checks that direct_reclaim saw the memory cgroup reclaim.
//
// Every page of the file is charged to the cgroup when it enters the page
// cache; with 32 MiB allowed, the other 96 MiB or more must be freed while
// the child runs, and only reclaim frees page cache of a live file (the
// machine has plenty of memory, so kswapd does not run for it; the
// cgroup's limit is enforced by the charging task reclaiming from its own
// cgroup: try_to_free_mem_cgroup_pages, which fires memcg_reclaim_begin/end).
// Lower bounds, since other cgroups of the machine may reclaim too: at
// least one memcg reclaim, and at least half of those 96 MiB in pages freed
// (nr_reclaimed also counts pages of other caches, and reclaim rounds
// during write-back may free fewer pages than the file's size suggests).
func TestProgramDirectReclaim(t *testing.T) {
	const (
		seconds = "kernel_direct_reclaim_seconds"
		pages   = "kernel_direct_reclaim_pages_total"
		limit   = 32
		file    = 128
	)
	cg := newMemCgroup(t, limit<<20)
	dir := ioTempDir(t)
	e := Start(t, "--programs=direct_reclaim")
	before := e.Scrape()
	if v := before.Value("kernel_exporter_config_up", L("config", "direct_reclaim")); v != 1 {
		t.Fatalf("config_up{config=direct_reclaim} = %v, want 1\n%s", v, e.Logs())
	}
	start := time.Now()
	if out, err := runChild(t, "pagecache", filepath.Join(dir, "reclaim")+":"+strconv.Itoa(file), cg.Procs); err != nil {
		t.Fatalf("child writing %d MiB in a %d MiB cgroup: %v\n%s", file, limit, err, strings.TrimSpace(out))
	}
	t.Logf("child wrote and read %d MiB in %v", file, time.Since(start).Round(time.Millisecond))
	after := e.Scrape()

	memcg := L("kind", "memcg")
	c0, s0, _ := before.Hist(seconds, memcg, 1)
	c1, s1, _ := after.Hist(seconds, memcg, 1)
	freed := after.Value(pages, memcg) - before.Value(pages, memcg)
	t.Logf("memcg reclaims +%d, %.3f ms in all, %v pages freed", c1-c0, (s1-s0)*1e3, freed)
	if c1-c0 < 1 {
		t.Errorf("%s{kind=memcg} count moved by %d, want >= 1\n%s", seconds, c1-c0, after.seriesDump(seconds))
	}
	if s1-s0 <= 0 {
		t.Errorf("%s{kind=memcg} sum moved by %v s, want > 0", seconds, s1-s0)
	}
	if minPages := float64((file - limit) << 20 / 4096 / 2); freed < minPages {
		t.Errorf("%s{kind=memcg} moved by %v, want >= %v\n%s", pages, freed, minPages, after.seriesDump(pages))
	}
}

// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// reloadYAML exports testdata/ttl/getppid.bpf.c (getppid calls by
// process) as the counter kernel_<metric>.
func reloadYAML(metric, help string) string {
	return `metrics:
  counters:
    - name: ` + metric + `
      help: ` + help + `
      labels:
        - name: pid
          size: 4
          decoders:
            - name: uint
`
}

// progIDs returns the ids of the BPF programs the process pid holds a
// descriptor of (prog_id in /proc/<pid>/fdinfo).
func progIDs(t *testing.T, pid int) map[string]bool {
	t.Helper()
	dir := "/proc/" + strconv.Itoa(pid) + "/fdinfo"
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, ent := range ents {
		f, err := os.Open(filepath.Join(dir, ent.Name()))
		if err != nil {
			continue // closed meanwhile
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "prog_id:"); ok {
				ids[strings.TrimSpace(v)] = true
			}
		}
		f.Close()
	}
	return ids
}

// status fetches path with method and returns the status code.
func status(t *testing.T, method, url string) int {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestReload runs the reload scenario (reloadScenario) under each
// capability setting a user may run with: the default flags (everything
// but CAP_BPF dropped after start-up: the privileged helper loads the
// changed configs), the capability set of deploy/kernel_exporter.service
// as uid 65534 (the unit as installed), --capabilities.keep=perfmon (the
// helper still loads) and --capabilities.keep=all (no helper: the process
// loads itself). With the default flags and the unit's set, the exporter
// itself keeps CapEff CAP_BPF alone throughout.
func TestReload(t *testing.T) {
	for _, tc := range []struct {
		name string
		unit bool
		args []string
	}{
		{name: "default"},
		{name: "unit_caps", unit: true},
		{name: "keep_perfmon", args: []string{"--capabilities.keep=perfmon"}},
		{name: "keep_all", args: []string{"--capabilities.keep=all"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A directory uid 65534 may read (t.TempDir's parent is 0700).
			dir, err := os.MkdirTemp("", "kernel_exporter-reload-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			if err := os.Chmod(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			start := func(args ...string) *Exporter { return Start(t, append(args, tc.args...)...) }
			if tc.unit {
				wrapper, _ := unitCapsWrapper(t)
				start = func(args ...string) *Exporter { return startWrapped(t, wrapper, args...) }
			}
			reloadScenario(t, dir, start, tc.args == nil)
		})
	}
}

// reloadScenario runs two user configs of the getppid counter (rl, which the
// test edits, and rl2, which it leaves alone) and the bundled timers, in
// dir, with an exporter from start. It changes rl's help and sends SIGHUP: the new help is served, with a new
// map (its count starts again), rl2 and timers keep their programs (the kernel program ids the
// process holds lose exactly rl's one and gain one) and rl2's count goes
// on from where it was; timers' family is present in every one of the
// scrapes made back to back meanwhile, and the reload metrics show
// success with a newer timestamp. Then it breaks rl's YAML and POSTs
// /-/reload: 500, last_reload_successful 0, the failure logged, and rl's
// running version still counts. A third config, rl3, down at start with a
// broken YAML and fixed before the SIGHUP, is up after it. /-/healthy and /-/ready are 200.
// With dropped, the exporter's CapEff is CAP_BPF alone before and after
// the reload.
func reloadScenario(t *testing.T, dir string, start func(args ...string) *Exporter, dropped bool) {
	compileBPF(t, filepath.Join("integration", "testdata", "ttl", "getppid.bpf.c"), filepath.Join(dir, "rl.bpf.o"))
	// rl2's map (so metric) has another name: the preprocessor renames it.
	compileBPF(t, filepath.Join("integration", "testdata", "ttl", "getppid.bpf.c"), filepath.Join(dir, "rl2.bpf.o"), "-Dttl_calls_total=reload_kept_calls_total")
	writeProbeConfig(t, dir, "rl", reloadYAML("ttl_calls_total", "getppid calls (reload test, old version)"))
	writeProbeConfig(t, dir, "rl2", reloadYAML("reload_kept_calls_total", "getppid calls (reload test, unchanged)"))
	// rl3 is down at start (its YAML is broken), fixed before the reload.
	compileBPF(t, filepath.Join("integration", "testdata", "ttl", "getppid.bpf.c"), filepath.Join(dir, "rl3.bpf.o"), "-Dttl_calls_total=reload_late_calls_total")
	writeProbeConfig(t, dir, "rl3", "metrics: [\n")
	e := start("--config.dir="+dir, "--config.names=rl,rl2,rl3", "--programs=timers", "--web.enable-lifecycle")
	pid := exporterPid(t, e)
	checkCapEff := func(when string) {
		if !dropped {
			return
		}
		waitDropped(t, e)
		if got := procCaps(t, fmt.Sprintf("/proc/%d/status", pid))["CapEff"]; got != 1<<capBPF {
			t.Errorf("exporter CapEff %016x %s, want %016x (CAP_BPF alone)", got, when, uint64(1)<<capBPF)
		}
	}
	checkCapEff("before the reload")
	m := e.Scrape()
	for _, c := range []string{"rl", "rl2", "timers"} {
		if v := m.Value("kernel_exporter_config_up", L("config", c)); v != 1 {
			t.Fatalf("config %s is not up\n%s", c, e.Logs())
		}
	}
	if v := m.Value("kernel_exporter_config_up", L("config", "rl3")); v != 0 {
		t.Fatalf("config rl3 (broken) is up")
	}
	for _, p := range []string{"/-/healthy", "/-/ready"} {
		if c := status(t, http.MethodGet, e.URL+p); c != 200 {
			t.Fatalf("GET %s: %d, want 200", p, c)
		}
	}
	if c := status(t, http.MethodGet, e.URL+"/-/reload"); c != http.StatusMethodNotAllowed {
		t.Fatalf("GET /-/reload: %d, want 405", c)
	}
	if v := m.Value("kernel_exporter_config_last_reload_successful", nil); v != 1 {
		t.Fatalf("last_reload_successful after start-up %v, want 1", v)
	}
	ts0 := m.Value("kernel_exporter_config_last_reload_success_timestamp_seconds", nil)
	if ts0 <= 0 {
		t.Fatalf("last_reload_success_timestamp_seconds after start-up %v, want > 0", ts0)
	}

	const calls = 100
	for range calls {
		syscall.Getppid()
	}
	self := L("pid", strconv.Itoa(os.Getpid()))
	Eventually(t, 5*time.Second, func() bool {
		return e.Scrape().Value("kernel_reload_kept_calls_total", self) >= calls
	}, "rl2 did not count the %d getppid calls", calls)
	before := progIDs(t, pid)

	// Scrape back to back during the reload: timers' family is in each.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var scrapes, gaps int
	var mu sync.Mutex
	var sent time.Time
	var swapped time.Duration // from SIGHUP to the first scrape of the new help
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			resp, err := http.Get(e.URL + "/metrics")
			if err != nil {
				t.Error(err)
				return
			}
			p := expfmt.NewTextParser(model.UTF8Validation)
			fams, err := p.TextToMetricFamilies(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Error(err)
				return
			}
			scrapes++
			if _, ok := fams["kernel_timer_starts_total"]; !ok {
				gaps++
			}
			if f := fams["kernel_ttl_calls_total"]; f != nil && strings.Contains(f.GetHelp(), "new version") {
				mu.Lock()
				if swapped == 0 && !sent.IsZero() {
					swapped = time.Since(sent)
				}
				mu.Unlock()
			}
		}
	})
	oldCount := e.Scrape().Value("kernel_ttl_calls_total", self)
	writeProbeConfig(t, dir, "rl", reloadYAML("ttl_calls_total", "getppid calls (reload test, new version)"))
	writeProbeConfig(t, dir, "rl3", reloadYAML("reload_late_calls_total", "getppid calls (reload test, fixed)"))
	mu.Lock()
	sent = time.Now()
	mu.Unlock()
	if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	Eventually(t, 20*time.Second, func() bool {
		syscall.Getppid()
		m := e.Scrape()
		f := m["kernel_ttl_calls_total"]
		return f != nil && strings.Contains(f.GetHelp(), "new version") &&
			m.Value("kernel_exporter_config_last_reload_success_timestamp_seconds", nil) > ts0
	}, "rl's new version is not served after SIGHUP\n%s", e.Logs)
	time.Sleep(500 * time.Millisecond) // scrapes after the swap too
	close(stop)
	wg.Wait()
	t.Logf("%d scrapes during the reload, %d without timers' family; new version served %v after SIGHUP (%s)",
		scrapes, gaps, swapped.Round(time.Millisecond), logField(e.Logs(), "config reloaded", "took"))
	if gaps > 0 || scrapes < 5 {
		t.Fatalf("%d of %d scrapes during the reload lacked kernel_timer_starts_total (want 0 of at least 5)", gaps, scrapes)
	}
	m = e.Scrape()
	if v := m.Value("kernel_ttl_calls_total", self); v >= oldCount {
		t.Fatalf("rl's new version shows %v calls, want fewer than the old version's %v (a new map)", v, oldCount)
	}
	if v := m.Value("kernel_exporter_config_last_reload_successful", nil); v != 1 {
		t.Fatalf("last_reload_successful %v after a good reload, want 1", v)
	}
	if v := m.Value("kernel_reload_kept_calls_total", self); v < calls {
		t.Fatalf("rl2 (unchanged) shows %v calls after the reload, want at least %d: its map was replaced", v, calls)
	}
	if v := m.Value("kernel_exporter_config_up", L("config", "rl3")); v != 1 {
		t.Fatalf("rl3, down at start and fixed, is not up after the reload\n%s", e.Logs())
	}
	after := progIDs(t, pid)
	var kept int
	for id := range before {
		if after[id] {
			kept++
		}
	}
	t.Logf("program ids before %v, after %v", before, after)
	if len(after) != len(before)+1 || kept != len(before)-1 {
		t.Fatalf("program ids: %d before, %d after, %d kept; want one more (rl3's) with exactly one (rl's) replaced", len(before), len(after), kept)
	}
	if !strings.Contains(e.Logs(), "config reloaded") {
		t.Fatalf("no 'config reloaded' log line\n%s", e.Logs())
	}
	checkCapEff("after the reload")

	// A broken YAML: the reload fails, rl's running version stays.
	writeProbeConfig(t, dir, "rl", "metrics: [\n")
	if c := status(t, http.MethodPost, e.URL+"/-/reload"); c != http.StatusInternalServerError {
		t.Fatalf("POST /-/reload with a broken config: %d, want 500", c)
	}
	n0 := e.Scrape().Value("kernel_ttl_calls_total", self)
	for range calls {
		syscall.Getppid()
	}
	m = e.Scrape()
	if v := m.Value("kernel_exporter_config_last_reload_successful", nil); v != 0 {
		t.Fatalf("last_reload_successful %v after a failed reload, want 0", v)
	}
	if v := m.Value("kernel_exporter_config_up", L("config", "rl")); v != 1 {
		t.Fatalf("rl is down after a failed reload, want its old version up\n%s", e.Logs())
	}
	if v := m.Value("kernel_ttl_calls_total", self); v < n0+calls {
		t.Fatalf("rl's running version counted %v after %d more calls from %v: it should still count", v, calls, n0)
	}
	if !strings.Contains(e.Logs(), "config reload failed") {
		t.Fatalf("the failed reload is not logged\n%s", e.Logs())
	}
}

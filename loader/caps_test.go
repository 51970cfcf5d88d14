// SPDX-License-Identifier: Apache-2.0

package loader

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
)

func TestParseCapability(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
	}{
		{"CAP_BPF", CapBPF}, {"bpf", CapBPF}, {"cap_syslog", CapSyslog}, {" Cap_Perfmon ", CapPerfmon},
		{"chown", 0}, {"CAP_CHECKPOINT_RESTORE", 40}, {"sys_admin", CapSysAdmin}, {"DAC_READ_SEARCH", CapDacReadSearch},
	} {
		got, err := ParseCapability(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseCapability(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"cap_", "", "cap_bpff", "sysadmin", "39", strings.Repeat("x", 200)} {
		_, err := ParseCapability(bad)
		if err == nil {
			t.Errorf("ParseCapability(%q): no error", bad)
			continue
		}
		tok := bad
		if len(tok) > maxCapToken {
			tok = tok[:maxCapToken]
		}
		if !strings.Contains(err.Error(), tok) || len(err.Error()) > 200 {
			t.Errorf("ParseCapability(%q) error %q: want it to name the value (at most %d bytes of it)", bad, err, maxCapToken)
		}
	}
}

func TestParseKeep(t *testing.T) {
	for _, c := range []struct {
		in      string
		want    CapSet
		all     bool
		wantErr string
	}{
		{in: "", want: 0},
		{in: "none", want: 0},
		{in: "NONE", want: 0},
		{in: "all", all: true},
		{in: "cap_syslog", want: 1 << CapSyslog},
		{in: "CAP_SYSLOG, perfmon,,bpf", want: 1<<CapSyslog | 1<<CapPerfmon | 1<<CapBPF},
		{in: "cap_syslog,cap_bogus", wantErr: `"cap_bogus"`},
		{in: "all,bpf", wantErr: `"all"`},
	} {
		got, all, err := ParseKeep(c.in)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("ParseKeep(%q) error = %v, want one naming %s", c.in, err, c.wantErr)
			}
			continue
		}
		if err != nil || got != c.want || all != c.all {
			t.Errorf("ParseKeep(%q) = %v, %v, %v; want %v, %v", c.in, got, all, err, c.want, c.all)
		}
	}
}

func TestCapSetFormat(t *testing.T) {
	s := CapSet(1<<CapBPF | 1<<CapPerfmon | 1<<CapSyslog | 1<<CapDacReadSearch)
	if got, want := s.Hex(), "000000c400000004"; got != want {
		t.Errorf("Hex = %s, want %s (as /proc/self/status shows it)", got, want)
	}
	if got, want := s.String(), "CAP_DAC_READ_SEARCH,CAP_SYSLOG,CAP_PERFMON,CAP_BPF"; got != want {
		t.Errorf("String = %s, want %s", got, want)
	}
	if got := CapSet(0).String(); got != "none" {
		t.Errorf("empty set String = %q, want none", got)
	}
	if got, want := CapSet(1<<41|1).String(), "CAP_CHOWN,CAP_41"; got != want {
		t.Errorf("unknown number: String = %s, want %s", got, want)
	}
	for n := range capNames {
		if m, err := ParseCapability(CapName(n)); err != nil || m != n {
			t.Errorf("round trip of %d through %q: %d, %v", n, CapName(n), m, err)
		}
	}
}

// statusCaps is StatusCaps, failing t on an error.
func statusCaps(t *testing.T, path string) map[string]CapSet {
	t.Helper()
	caps, err := StatusCaps(path)
	if err != nil {
		t.Fatal(err)
	}
	return caps
}

// childReport is what the drop child prints.
type childReport struct {
	Drop        struct{ Before, After CapState }
	BoundingErr string
	Threads     []map[string]CapSet // /proc/thread-self/status of each locked thread, after the drop
	AllTasks    map[string]int      // CapEff hex -> tasks with it, over /proc/self/task
	Err         string
}

// TestDropCapabilitiesChild is the child process of the drop tests: it does
// something only when KE_CAPS_CHILD is set (to the capabilities to keep):
// drops, and prints a childReport as JSON. (Not a TestMain, which would
// clash with one another part may add to this package.)
func TestDropCapabilitiesChild(t *testing.T) {
	keepArg, ok := os.LookupEnv("KE_CAPS_CHILD")
	if !ok {
		return // run by runDropChild only
	}
	var rep childReport
	defer func() {
		b, _ := json.Marshal(rep)
		fmt.Println("REPORT " + string(b))
	}()
	keep, _, err := ParseKeep(keepArg)
	if err != nil {
		rep.Err = err.Error()
		return
	}
	// Several goroutines locked to their own threads before the drop, so
	// the process surely has threads other than the caller's; each reads
	// its own thread's status after the drop.
	const locked = 4
	var ready, dropped, done sync.WaitGroup
	ready.Add(locked)
	dropped.Add(1)
	done.Add(locked)
	rep.Threads = make([]map[string]CapSet, locked)
	for i := range locked {
		go func() {
			runtime.LockOSThread()
			defer done.Done()
			ready.Done()
			dropped.Wait()
			rep.Threads[i] = statusCaps(t, "/proc/thread-self/status")
		}()
	}
	ready.Wait()
	drop, err := DropCapabilities(keep)
	rep.Drop.Before, rep.Drop.After = drop.Before, drop.After
	if drop.BoundingErr != nil {
		rep.BoundingErr = drop.BoundingErr.Error()
	}
	if err != nil {
		rep.Err = err.Error()
	}
	dropped.Done()
	done.Wait()
	rep.AllTasks = map[string]int{}
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, task := range tasks {
		caps, err := StatusCaps("/proc/self/task/" + task.Name() + "/status")
		if errors.Is(err, os.ErrNotExist) {
			continue // the thread ended since the directory was read
		}
		if err != nil {
			t.Fatal(err)
		}
		rep.AllTasks[caps["CapEff"].Hex()]++
	}
}

// runDropChild runs TestDropCapabilitiesChild under wrapper (e.g. setpriv)
// with keep, and returns its report.
func runDropChild(t *testing.T, wrapper []string, keep string) childReport {
	t.Helper()
	argv := append(append([]string{}, wrapper...), os.Args[0], "-test.run=^TestDropCapabilitiesChild$", "-test.v", "-test.count=1")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "KE_CAPS_CHILD="+keep)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child %v: %v\n%s", argv, err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if j, ok := strings.CutPrefix(line, "REPORT "); ok {
			var rep childReport
			if err := json.Unmarshal([]byte(j), &rep); err != nil {
				t.Fatalf("child report %q: %v", j, err)
			}
			return rep
		}
	}
	t.Fatalf("child printed no report:\n%s", out)
	return childReport{}
}

// TestHardening13CapabilityDropAllThreads (finding 13: the process kept
// every root capability for its whole life) drops capabilities in a child
// process that has extra threads locked, and checks every thread ends with
// exactly the kept set: effective = permitted = ScrapeCapabilities plus
// keep, bounding the same, inheritable and ambient empty, no_new_privs set.
func TestHardening13CapabilityDropAllThreads(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("needs root (CI=true forbids skipping)")
		}
		t.Skip("needs root to have capabilities to drop")
	}
	for _, c := range []struct {
		keep string
		want CapSet
	}{
		{"none", ScrapeCapabilities},
		{"cap_syslog,perfmon", ScrapeCapabilities | 1<<CapSyslog | 1<<CapPerfmon},
	} {
		t.Run(c.keep, func(t *testing.T) {
			rep := runDropChild(t, nil, c.keep)
			if rep.Err != "" || rep.BoundingErr != "" {
				t.Fatalf("drop failed: %s; bounding: %s", rep.Err, rep.BoundingErr)
			}
			if bits := rep.Drop.Before.Effective; bits&^c.want == 0 {
				t.Fatalf("before: CapEff %s holds nothing to drop: test is meaningless", bits.Hex())
			}
			a := rep.Drop.After
			if a.Effective != c.want || a.Permitted != c.want || a.Bounding != c.want || a.Inheritable != 0 || a.Ambient != 0 {
				t.Errorf("after drop: eff %s prm %s bnd %s inh %s amb %s; want eff = prm = bnd = %s (%s), inh = amb = 0",
					a.Effective.Hex(), a.Permitted.Hex(), a.Bounding.Hex(), a.Inheritable.Hex(), a.Ambient.Hex(), c.want.Hex(), c.want)
			}
			for i, th := range rep.Threads {
				if th["CapEff"] != c.want || th["CapPrm"] != c.want || th["CapBnd"] != c.want || th["CapInh"] != 0 || th["CapAmb"] != 0 || th["NoNewPrivs"] != 1 {
					t.Errorf("locked thread %d after drop: %v; want CapEff = CapPrm = CapBnd = %s, CapInh = CapAmb = 0, NoNewPrivs 1", i, th, c.want.Hex())
				}
			}
			if len(rep.AllTasks) != 1 || rep.AllTasks[c.want.Hex()] == 0 {
				t.Errorf("threads by CapEff after drop: %v, want all %s", rep.AllTasks, c.want.Hex())
			}
			t.Logf("CapEff before %s (%s), after %s (%s), %d threads", rep.Drop.Before.Effective.Hex(), rep.Drop.Before.Effective,
				a.Effective.Hex(), a.Effective, rep.AllTasks[c.want.Hex()])
		})
	}
}

// TestHardening13CapabilityDropWithoutSetpcap runs the drop in a child with
// the unit's capabilities and no CAP_SETPCAP (as under systemd): the
// bounding set stays, with BoundingErr saying why, and the rest is dropped
// without an error.
func TestHardening13CapabilityDropWithoutSetpcap(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("needs root (CI=true forbids skipping)")
		}
		t.Skip("needs root to start a child with chosen capabilities")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("setpriv (util-linux) not found, and CI=true forbids skipping")
		}
		t.Skip("setpriv (util-linux) not found")
	}
	unit := CapSet(1<<CapBPF | 1<<CapPerfmon | 1<<CapSyslog | 1<<CapDacReadSearch)
	caps := "-all,+bpf,+perfmon,+syslog,+dac_read_search"
	rep := runDropChild(t, []string{setpriv, "--inh-caps=" + caps, "--bounding-set=" + caps, "--"}, "none")
	if rep.Err != "" {
		t.Fatalf("drop failed: %s", rep.Err)
	}
	if rep.BoundingErr == "" || !strings.Contains(rep.BoundingErr, "CAP_SETPCAP") {
		t.Errorf("BoundingErr = %q, want one naming CAP_SETPCAP", rep.BoundingErr)
	}
	b, a := rep.Drop.Before, rep.Drop.After
	if b.Effective != unit {
		t.Fatalf("child started with CapEff %s, want the unit's %s", b.Effective.Hex(), unit.Hex())
	}
	if a.Effective != ScrapeCapabilities || a.Permitted != ScrapeCapabilities || a.Bounding != unit || a.Inheritable != 0 || a.Ambient != 0 {
		t.Errorf("after: eff %s prm %s bnd %s inh %s amb %s; want eff = prm = %s, bnd %s (kept), inh = amb = 0",
			a.Effective.Hex(), a.Permitted.Hex(), a.Bounding.Hex(), a.Inheritable.Hex(), a.Ambient.Hex(), ScrapeCapabilities.Hex(), unit.Hex())
	}
	if len(rep.AllTasks) != 1 || rep.AllTasks[ScrapeCapabilities.Hex()] == 0 {
		t.Errorf("threads by CapEff after drop: %v, want all %s", rep.AllTasks, ScrapeCapabilities.Hex())
	}
}

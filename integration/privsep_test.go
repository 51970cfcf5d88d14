// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kernel-exporter/kernel_exporter/internal/proctest"
	"github.com/kernel-exporter/kernel_exporter/loader"
	"github.com/kernel-exporter/kernel_exporter/privsep"
)

// helperPids returns the pids of e's privileged helper: its supervisor
// (the exporter's one child) and the worker (the supervisor's one child),
// waiting up to 10 s for both.
func helperPids(t *testing.T, e *Exporter) (supervisor, worker int) {
	t.Helper()
	pid := e.cmd.Process.Pid
	Eventually(t, 10*time.Second, func() bool {
		kids := proctest.Children(pid)
		if len(kids) != 1 {
			return false
		}
		w := proctest.Children(kids[0])
		if len(w) != 1 {
			return false
		}
		supervisor, worker = kids[0], w[0]
		return true
	}, "exporter %d: no privileged helper (supervisor and worker)\n%s", pid, e.Logs)
	return supervisor, worker
}

// procFDs is proctest.FDs, failing t on an error.
func procFDs(t *testing.T, pid int) map[int]string {
	t.Helper()
	fds, err := proctest.FDs(pid)
	if err != nil {
		t.Fatal(err)
	}
	return fds
}

// onlyHelperFDs checks that pid holds 0, 1 and 2, its socket as 3, and
// nothing else but the Go runtime's own poller (anon_inode:[eventpoll]
// and [eventfd], opened close-on-exec by the helper itself) and the BPF
// objects the worker made itself (ownBPF), and none of the targets in
// foreign. It returns the descriptors.
func onlyHelperFDs(t *testing.T, what string, pid int, foreign ...string) map[int]string {
	t.Helper()
	fds := procFDs(t, pid)
	for n, target := range fds {
		ok := n <= 2 || n == 3 && strings.HasPrefix(target, "socket:") ||
			target == "anon_inode:[eventpoll]" || target == "anon_inode:[eventfd]" ||
			ownBPF(t, pid, n, target, foreign)
		if !ok || slices.Contains(foreign, target) {
			t.Errorf("%s %d holds descriptor %d -> %s: want only 0, 1, 2, its socket and the Go runtime's poller", what, pid, n, target)
		}
	}
	for n := range 4 {
		if _, ok := fds[n]; !ok {
			t.Errorf("%s %d has no descriptor %d", what, pid, n)
		}
	}
	return fds
}

// ownBPF reports whether descriptor n (-> target) of pid is a BPF object
// the helper made itself: the iterators the worker loads to list the
// host's BPF objects for the host BPF collector (bpf_objects), a program,
// its link and its BTF, whose ids (prog_id, link_id, btf_id in fdinfo) are
// none of those foreign lists as "bpf:<kind>:<id>" (the exporter's).
func ownBPF(t *testing.T, pid, n int, target string, foreign []string) bool {
	t.Helper()
	var key string
	switch target {
	case "anon_inode:bpf-prog":
		key = "prog_id"
	case "anon_inode:bpf_link":
		key = "link_id"
	case "anon_inode:btf":
		key = "btf_id"
	default:
		return false
	}
	info, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%d", pid, n))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(info), "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			return !slices.Contains(foreign, "bpf:"+key+":"+strings.TrimSpace(v))
		}
	}
	return false
}

// exporterBPF lists the BPF objects pid holds as "bpf:<kind>:<id>", for
// ownBPF.
func exporterBPF(t *testing.T, pid int) []string {
	t.Helper()
	var out []string
	dir := fmt.Sprintf("/proc/%d/fdinfo", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, ent := range ents {
		b, err := os.ReadFile(filepath.Join(dir, ent.Name()))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			for _, key := range []string{"prog_id", "link_id", "btf_id"} {
				if v, ok := strings.CutPrefix(line, key+":"); ok {
					out = append(out, "bpf:"+key+":"+strings.TrimSpace(v))
				}
			}
		}
	}
	return out
}

// TestPrivilegedHelperFDs starts the exporter as systemd socket
// activation does, with two listening sockets, from a shell that leaves
// a descriptor 9 open: the exporter holds them, and neither process of
// its privileged helper (which keeps CAP_SYS_ADMIN) holds any of them:
// only its standard streams, its socket and the Go runtime's poller, and
// the worker the BPF iterators it made itself to list the host's BPF
// objects (none of the exporter's programs, links or BTF).
func TestPrivilegedHelperFDs(t *testing.T) {
	tool := probeNeedTool(t, "socket activation", "systemd-socket-activate")
	marker := filepath.Join(t.TempDir(), "fd9-marker")
	if err := os.WriteFile(marker, []byte("the parent shell's descriptor 9\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	second := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	t.Setenv("TOOL", tool)
	t.Setenv("SECOND", second)
	// startWrapped appends the binary and --web.listen-address=<addr>:
	// systemd-socket-activate listens on both addresses and, at the first
	// connection, execs a shell that opens descriptor 9 and execs the
	// exporter (one pid throughout: LISTEN_PID holds).
	inner := `exec 9<'` + marker + `'; exec "$0" "$@"`
	script := `a=${1#--web.listen-address=}; exec "$TOOL" -l "$a" -l "$SECOND" sh -c "$INNER" "$0" "$@"`
	t.Setenv("INNER", inner)
	e := startWrapped(t, []string{"sh", "-c", script}, "--web.systemd-socket", "--programs=timers")
	pid := exporterPid(t, e)
	parent := procFDs(t, pid)
	var sockets []string
	for _, target := range parent {
		if strings.HasPrefix(target, "socket:") {
			sockets = append(sockets, target)
		}
	}
	if parent[9] != marker || !strings.Contains(e.Logs(), "address="+second) {
		t.Fatalf("exporter %d: descriptor 9 -> %q, second address served: %v: want the marker and %s (the test's setup)\n%v\n%s",
			pid, parent[9], strings.Contains(e.Logs(), "address="+second), second, parent, e.Logs())
	}
	if len(proctest.Children(pid)) == 0 {
		t.Fatalf("exporter %d started no privileged helper\n%s", pid, e.Logs())
	}
	// Let the worker run its start-up (the CPU budget's first window
	// turns statistics on through it).
	time.Sleep(time.Second)
	// The exporter's sockets (listening ones, connections, its ends of the
	// helper's socketpairs): a helper holds none of them. Every process
	// the exporter started is checked.
	foreign := append(append(sockets, marker), exporterBPF(t, pid)...)
	var report []string
	for _, kid := range proctest.Children(pid) {
		for _, p := range append([]int{kid}, proctest.Children(kid)...) {
			fds := onlyHelperFDs(t, "helper", p, foreign...)
			report = append(report, fmt.Sprintf("%d: %v", p, fds))
		}
	}
	t.Logf("exporter %d holds 9 -> %s and sockets %v; its helpers: %s", pid, parent[9], sockets, strings.Join(report, "; "))
}

// TestPrivilegedHelperRestart kills the privileged helper's worker under
// the default flags: kernel_exporter_privileged_helper_up goes to 0, a new
// worker starts after the backoff with the same capabilities, up is 1
// again with restarts_total 1, a WARN line says so, and the new worker
// serves: a reload of a changed config loads through it.
func TestPrivilegedHelperRestart(t *testing.T) {
	dir := t.TempDir()
	compileBPF(t, filepath.Join("integration", "testdata", "ttl", "getppid.bpf.c"), filepath.Join(dir, "rl.bpf.o"))
	writeProbeConfig(t, dir, "rl", reloadYAML("ttl_calls_total", "getppid calls (restart test, old version)"))
	e := Start(t, "--config.dir="+dir, "--config.names=rl", "--programs=timers")
	waitDropped(t, e)
	const up, restarts = "kernel_exporter_privileged_helper_up", "kernel_exporter_privileged_helper_restarts_total"
	m := e.Scrape()
	if m.Value(up, nil) != 1 || m.Series(restarts, nil) != 1 || m.Value(restarts, nil) != 0 {
		t.Fatalf("%s %v, %s %v (%d series): want 1 and 0\n%s", up, m.Value(up, nil), restarts, m.Value(restarts, nil), m.Series(restarts, nil), e.Logs())
	}
	_, first := helperPids(t, e)
	before := procCaps(t, fmt.Sprintf("/proc/%d/status", first))
	t0 := time.Now()
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var down, again time.Duration
	for time.Since(t0) < 30*time.Second && again == 0 {
		m = e.Scrape()
		switch v := m.Value(up, nil); {
		case v == 0 && down == 0:
			down = time.Since(t0)
		case v == 1 && down > 0:
			again = time.Since(t0)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if down == 0 || again == 0 {
		t.Fatalf("after killing worker %d: %s 0 seen after %v, 1 again after %v (want both)\n%s", first, up, down, again, e.Logs())
	}
	if v := m.Value(restarts, nil); v != 1 {
		t.Errorf("%s %v, want 1", restarts, v)
	}
	_, second := helperPids(t, e)
	t.Logf("worker %d killed: %s 0 within %v, worker %d up %v after the kill (first backoff %v)",
		first, up, down.Round(time.Millisecond), second, again.Round(time.Millisecond), privsep.RestartBackoff)
	if second == first {
		t.Fatalf("worker pid %d unchanged", second)
	}
	after := procCaps(t, fmt.Sprintf("/proc/%d/status", second))
	for _, k := range []string{"CapEff", "CapPrm", "CapBnd", "NoNewPrivs"} {
		if after[k] != before[k] {
			t.Errorf("new worker %s %016x, the first had %016x", k, after[k], before[k])
		}
	}
	if after["CapEff"] != uint64(privsep.HelperCapabilities)&procCaps(t, "/proc/self/status")["CapEff"] {
		t.Errorf("new worker CapEff %016x, want %016x (%s)", after["CapEff"], uint64(privsep.HelperCapabilities), privsep.HelperCapabilities)
	}
	if !strings.Contains(e.Logs(), "privileged helper exited") || !strings.Contains(e.Logs(), "privileged helper restarted") {
		t.Errorf("no log lines of the exit and the restart\n%s", e.Logs())
	}
	// The new worker loads a reload.
	writeProbeConfig(t, dir, "rl", reloadYAML("ttl_calls_total", "getppid calls (restart test, new version)"))
	if err := syscall.Kill(e.cmd.Process.Pid, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	Eventually(t, 20*time.Second, func() bool {
		// The new version's map starts empty: a getppid call makes its
		// first series (the family is absent until then).
		syscall.Getppid()
		f := e.Scrape()["kernel_ttl_calls_total"]
		return f != nil && strings.Contains(f.GetHelp(), "new version")
	}, "the reload after the restart is not served\n%s", e.Logs)
	if got := procCaps(t, fmt.Sprintf("/proc/%d/status", e.cmd.Process.Pid))["CapEff"]; got != uint64(loader.ScrapeCapabilities) {
		t.Errorf("exporter CapEff %016x after the reload, want %016x", got, uint64(loader.ScrapeCapabilities))
	}
}

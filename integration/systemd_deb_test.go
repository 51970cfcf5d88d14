// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/kernel-exporter/kernel_exporter/internal/proctest"
	"github.com/kernel-exporter/kernel_exporter/internal/testenv"
)

// debianTree is the Debian 12 tree the systemd tests boot, built once by
// tools/nspawn/debian-tree.sh (about 200 MB).
const debianTree = ".cache/nspawn/debian12"

// TestSystemdDeb installs the .deb in a real systemd: Debian 12's, booted
// with systemd-nspawn -b in a throwaway copy of debianTree (--ephemeral),
// with the host's network, every capability, bpf() and perf_event_open()
// allowed by its seccomp filter, and the host's tracefs. Programs loaded
// in it are the host's, checked from here by id.
//
//   - dpkg -i of 1.0.0 neither enables nor starts the service;
//   - enabled and started (systemctl enable --now, the port set in
//     /etc/default/kernel_exporter), it serves /metrics with every default
//     config up;
//   - dpkg -i of 1.0.1 (a rebuilt binary) restarts the running service: a
//     new main process whose executable is the new binary (SHA-256), which
//     reports version 1.0.1, and the old process's programs are gone;
//   - systemctl stop logs nothing at warning or above for the unit
//     (journalctl -p warning, the whole run included) and leaves none of
//     its BPF programs, maps or links;
//   - dpkg -i of 1.0.2 (the same binary, another package version) leaves
//     the stopped service stopped;
//   - dpkg -r keeps it enabled for a reinstall, dpkg -P forgets that.
func TestSystemdDeb(t *testing.T) {
	for _, tool := range []string{"systemd-nspawn", "debootstrap", "nsenter", "dpkg-deb", "make", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.SkipOrFail(t, "%s not found: the systemd test needs systemd-nspawn (systemd-container), debootstrap and a Go toolchain, which make test-deps installs (%v)", tool, err)
		}
	}
	if _, err := os.Stat("/sys/kernel/tracing/events"); err != nil {
		if err := syscall.Mount("tracefs", "/sys/kernel/tracing", "tracefs", 0, ""); err != nil {
			t.Fatalf("mount tracefs on /sys/kernel/tracing (the container sees the host's): %v", err)
		}
	}

	// The tree, built on first use.
	tree := filepath.Join(repoRoot, debianTree)
	start := time.Now()
	if out, err := exec.Command(filepath.Join(repoRoot, "tools/nspawn/debian-tree.sh"), tree).CombinedOutput(); err != nil {
		t.Fatalf("tools/nspawn/debian-tree.sh %s: %v\n%s", tree, err, out)
	}
	t.Logf("Debian 12 tree %s ready after %v", debianTree, time.Since(start).Round(time.Second))

	// Three packages repacked from the release the package's tests share
	// (buildRelease): 1.0.0 and 1.0.1 with binaries built with those
	// versions; 1.0.2 the same binary as 1.0.1.
	base := buildRelease(t)
	baseDebs, _ := filepath.Glob(filepath.Join(base, "kernel_exporter_*_"+runtime.GOARCH+".deb"))
	if len(baseDebs) != 1 {
		t.Fatalf("want one kernel_exporter_<version>_%s.deb in %s, got %v", runtime.GOARCH, base, baseDebs)
	}
	baseDeb := baseDebs[0]
	dist := t.TempDir()
	start = time.Now()
	make_ := func(args ...string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		mk := exec.CommandContext(ctx, "make", append([]string{"--no-print-directory"}, args...)...)
		mk.Dir = repoRoot
		mk.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := mk.CombinedOutput(); err != nil {
			t.Fatalf("make %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	debs := map[string]string{}
	for _, v := range []string{"1.0.0", "1.0.1"} {
		bin := filepath.Join(dist, "kernel_exporter-"+v)
		make_("build", "VERSION=v"+v, "BINARY="+bin)
		debs[v] = rebuildDeb(t, baseDeb, v, bin, filepath.Join(dist, v))
	}
	debs["1.0.2"] = rebuildDeb(t, debs["1.0.1"], "1.0.2", "", filepath.Join(dist, "1.0.2"))
	t.Logf("two builds and three repacked .debs: %v", time.Since(start).Round(time.Second))

	c := bootNspawn(t, tree, dist)
	unit := "kernel_exporter.service"
	deb := func(v string) string { return "/dist/" + v + "/" + filepath.Base(debs[v]) }

	// A first install: the user enables and starts it.
	c.must(t, "dpkg", "-i", deb("1.0.0"))
	if st := c.show(t, unit, "ActiveState"); st != "inactive" {
		t.Errorf("after a first dpkg -i the service is %s, want inactive (never started unasked)", st)
	}
	if out, _ := c.run("systemctl", "is-enabled", unit); strings.TrimSpace(out) != "disabled" {
		t.Errorf("after a first dpkg -i, systemctl is-enabled: %q, want disabled", out)
	}
	port := freePort(t)
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	c.must(t, "sed", "-i", fmt.Sprintf(`s/^ARGS=.*/ARGS="--web.listen-address=127.0.0.1:%d"/`, port), "/etc/default/kernel_exporter")
	c.must(t, "systemctl", "enable", "--now", unit)
	v1 := c.serving(t, unit, url, "1.0.0")

	// An upgrade while it runs: restarted on the new binary.
	c.must(t, "dpkg", "-i", deb("1.0.1"))
	if st := c.show(t, unit, "ActiveState"); st != "active" {
		t.Fatalf("after the upgrade to 1.0.1 the service is %s, want active\n%s", st, c.journal(t, unit, ""))
	}
	v2 := c.serving(t, unit, url, "1.0.1")
	if v2.pid == v1.pid || v2.exe == v1.exe {
		t.Errorf("after the upgrade: main process %d exe %s, before %d exe %s: want a new process on the new binary", v2.pid, v2.exe[:12], v1.pid, v1.exe[:12])
	}
	if installed := c.digest(t, "/usr/bin/kernel_exporter"); v2.exe != installed {
		t.Errorf("the restarted process runs %s, the installed binary is %s", v2.exe[:12], installed[:12])
	}
	bpfGone(t, "the process before the upgrade", v1.held)
	t.Logf("upgrade 1.0.0 -> 1.0.1: main pid %d -> %d, exe %s -> %s", v1.pid, v2.pid, v1.exe[:12], v2.exe[:12])

	// A stop: quiet, and nothing left in the kernel.
	c.must(t, "systemctl", "stop", unit)
	if st := c.show(t, unit, "ActiveState"); st != "inactive" {
		t.Errorf("after systemctl stop the service is %s, want inactive", st)
	}
	bpfGone(t, "after systemctl stop", v2.held)
	if w := c.journal(t, unit, "warning"); strings.TrimSpace(w) != "-- No entries --" {
		t.Errorf("journalctl -u %s -p warning, over two starts, a restart and a stop: want no entries, got\n%s\nthe whole journal of the unit:\n%s", unit, w, c.journal(t, unit, ""))
	}

	// An upgrade while it is stopped: it stays stopped.
	c.must(t, "dpkg", "-i", deb("1.0.2"))
	if st, pid := c.show(t, unit, "ActiveState"), c.show(t, unit, "MainPID"); st != "inactive" || pid != "0" {
		t.Errorf("after the upgrade to 1.0.2 of a stopped service: %s, main pid %s, want inactive and 0", st, pid)
	}

	// Removal keeps the admin's choices; purge forgets them.
	wants := "/etc/systemd/system/multi-user.target.wants/" + unit
	c.must(t, "dpkg", "-r", "kernel_exporter")
	if _, err := c.run("test", "-L", wants); err != nil {
		t.Errorf("dpkg -r removed the enablement link %s (only purge should)", wants)
	}
	c.must(t, "dpkg", "-P", "kernel_exporter")
	if _, err := c.run("test", "-L", wants); err == nil {
		t.Errorf("dpkg -P left the enablement link %s", wants)
	}
	if st := c.show(t, unit, "LoadState"); st != "not-found" {
		t.Errorf("after dpkg -P the unit is %s, want not-found", st)
	}
}

// rebuildDeb writes a copy of deb with package version version, and
// binary as /usr/bin/kernel_exporter unless it is "", into dir.
func rebuildDeb(t *testing.T, deb, version, binary, dir string) string {
	t.Helper()
	x := filepath.Join(t.TempDir(), "x")
	if out, err := exec.Command("dpkg-deb", "-R", deb, x).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -R %s: %v\n%s", deb, err, out)
	}
	if binary != "" {
		b, err := os.ReadFile(binary)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(x, "usr/bin/kernel_exporter"), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	control := filepath.Join(x, "DEBIAN", "control")
	b, err := os.ReadFile(control)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "Version: ") {
			l = "Version: " + version
		}
		lines = append(lines, l)
	}
	if err := os.WriteFile(control, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "kernel_exporter_"+version+"_"+runtime.GOARCH+".deb")
	// --nocheck: dpkg-deb refuses to build the name kernel_exporter
	// (Debian's names have no "_"), which nfpm builds and dpkg installs.
	if b, err := exec.Command("dpkg-deb", "--nocheck", "-Zgzip", "-b", x, out).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -b: %v\n%s", err, b)
	}
	return out
}

// nspawn is a booted systemd-nspawn container.
type nspawn struct {
	cmd  *exec.Cmd
	init int // its systemd, as a host pid
	logs *syncBuffer
}

// bootNspawn boots tree (a copy of it, dropped at the end) with dist
// read-only at /dist and waits until its systemd runs; the container is
// powered off at cleanup.
func bootNspawn(t *testing.T, tree, dist string) *nspawn {
	t.Helper()
	start := time.Now()
	c := &nspawn{logs: &syncBuffer{}}
	c.cmd = exec.Command("systemd-nspawn", "--quiet", "-D", tree, "--ephemeral", "--boot",
		// No machined or systemd on the host to register with.
		"--register=no", "--keep-unit", "--console=pipe",
		"--machine="+fmt.Sprintf("ke-test-%d", os.Getpid()),
		// What the unit grants the exporter, and the system calls
		// nspawn's own filter refuses.
		"--capability=all", "--system-call-filter=bpf perf_event_open",
		"--bind=/sys/kernel/tracing", "--bind-ro="+dist+":/dist")
	c.cmd.Stdout, c.cmd.Stderr = c.logs, c.logs
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	t.Cleanup(func() {
		// SIGTERM: nspawn asks the container's systemd to power off.
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = c.cmd.Process.Kill()
			<-done
			t.Errorf("the container did not power off within 30 s of SIGTERM\n%s", c.logs)
		}
	})
	deadline := time.Now().Add(2 * time.Minute)
	state := ""
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("systemd-nspawn exited: %v\n%s", err, c.logs)
		default:
		}
		if c.init == 0 {
			c.init = containerInit(c.cmd.Process.Pid)
		}
		if c.init != 0 {
			out, _ := c.run("systemctl", "is-system-running")
			state = strings.TrimSpace(out)
			if state == "running" || state == "degraded" {
				break
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	if state != "running" && state != "degraded" {
		t.Fatalf("the container's systemd is %q 2 min after the start\n%s", state, c.logs)
	}
	if state == "degraded" {
		out, _ := c.run("systemctl", "--failed", "--no-pager")
		t.Logf("the container runs, degraded:\n%s", out)
	}
	t.Logf("container booted (systemd %s, host pid %d) in %v", state, c.init, time.Since(start).Round(100*time.Millisecond))
	return c
}

// containerInit returns the host pid of the container's PID 1 among the
// descendants of nspawn's pid (nspawn forks an outer child that may still
// be copying the --ephemeral tree, which then starts the container's init
// in a new PID namespace and exits), or 0 while there is none yet.
func containerInit(nspawn int) int {
	queue := proctest.Children(nspawn)
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(strings.TrimPrefix(l, "NSpid:")); strings.HasPrefix(l, "NSpid:") && len(f) == 2 && f[1] == "1" {
				return pid
			}
		}
		queue = append(queue, proctest.Children(pid)...)
	}
	return 0
}

// run runs argv in the container (its mount, UTS, IPC, PID and cgroup
// namespaces) and returns its output.
func (c *nspawn) run(argv ...string) (string, error) {
	args := append([]string{"-t", strconv.Itoa(c.init), "-m", "-u", "-i", "-p", "-C", "--"}, argv...)
	out, err := exec.Command("nsenter", args...).CombinedOutput()
	return string(out), err
}

func (c *nspawn) must(t *testing.T, argv ...string) string {
	t.Helper()
	out, err := c.run(argv...)
	if err != nil {
		t.Fatalf("in the container, %s: %v\n%s", strings.Join(argv, " "), err, out)
	}
	return out
}

// show returns a property of unit (systemctl show --value).
func (c *nspawn) show(t *testing.T, unit, prop string) string {
	t.Helper()
	return strings.TrimSpace(c.must(t, "systemctl", "show", "--value", "-p", prop, unit))
}

// journal returns the unit's journal, at priority and above ("" for all).
func (c *nspawn) journal(t *testing.T, unit, priority string) string {
	t.Helper()
	argv := []string{"journalctl", "--no-pager", "-u", unit}
	if priority != "" {
		argv = append(argv, "-p", priority)
	}
	out, _ := c.run(argv...)
	return out
}

// digest is the SHA-256 of a file of the container, read from the host.
func (c *nspawn) digest(t *testing.T, path string) string {
	t.Helper()
	return fileSHA256(t, fmt.Sprintf("/proc/%d/root%s", c.init, path))
}

// hostPID returns the host pid of the container's process pid.
func (c *nspawn) hostPID(t *testing.T, pid int) int {
	t.Helper()
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", c.init))
	if err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		host, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", host)); err != nil || l != ns {
			continue
		}
		f, err := os.Open(fmt.Sprintf("/proc/%d/status", host))
		if err != nil {
			continue
		}
		s := bufio.NewScanner(f)
		for s.Scan() {
			if v, ok := strings.CutPrefix(s.Text(), "NSpid:"); ok {
				if f := strings.Fields(v); len(f) > 1 && f[len(f)-1] == strconv.Itoa(pid) {
					f0, _ := strconv.Atoi(f[0])
					return f0
				}
			}
		}
		f.Close()
	}
	t.Fatalf("no host process is the container's pid %d", pid)
	return 0
}

// served is the service's main process as seen from the host.
type served struct {
	pid  int                        // host pid
	exe  string                     // SHA-256 of its executable
	held map[string]map[uint32]bool // its BPF objects (bpfFDs)
}

// serving waits until unit's main process serves url with every config
// up, reports version, and holds its programs; it returns that process.
func (c *nspawn) serving(t *testing.T, unit, url, version string) served {
	t.Helper()
	var ms Metrics
	var body string
	Eventually(t, time.Minute, func() bool {
		body = httpGet(url + "/metrics")
		if body == "" || stillLoading(body) {
			return false
		}
		ms = parseMetrics(t, body)
		return len(ms.LabelValues("kernel_exporter_config_up", "config")) > 0
	}, "%s serves no loaded configs on %s\n%s", unit, url, func() string { return c.journal(t, unit, "") })
	configs := ms.LabelValues("kernel_exporter_config_up", "config")
	for _, cfg := range []string{"biolatency", "runqlat", "timers"} {
		if v := ms.Value("kernel_exporter_config_up", L("config", cfg)); v != 1 {
			t.Errorf("kernel_exporter_config_up{config=%q} = %v, want 1 (configs %v)", cfg, v, configs)
		}
	}
	if v := ms.Value("kernel_exporter_build_info", L("version", version)); v != 1 {
		t.Errorf("kernel_exporter_build_info{version=%q} = %v, want 1", version, v)
	}
	attached := ms.Value("kernel_exporter_program_attached", nil)
	pid, err := strconv.Atoi(c.show(t, unit, "MainPID"))
	if err != nil || pid == 0 {
		t.Fatalf("%s MainPID: %v", unit, err)
	}
	var s served
	s.pid = c.hostPID(t, pid)
	s.exe = fileSHA256(t, fmt.Sprintf("/proc/%d/exe", s.pid))
	s.held = bpfFDs(t, s.pid)
	if float64(len(s.held["prog_id"])) < attached || attached < 1 {
		t.Errorf("the main process %d holds programs %v, want at least the %v attached", s.pid, sortedIDs(s.held["prog_id"]), attached)
	}
	t.Logf("%s %s: main pid %d (host %d), %v programs attached, configs %v", unit, version, pid, s.pid, attached, configs)
	return s
}

// bpfGone waits up to 10 s for the BPF objects of held to leave the kernel.
func bpfGone(t *testing.T, what string, held map[string]map[uint32]bool) {
	t.Helper()
	var left []string
	Eventually(t, 10*time.Second, func() bool {
		left = stillLoaded(held, "prog_id", "map_id")
		return len(left) == 0
	}, "%s, still in the kernel: %v", what, func() string { return strings.Join(left, ", ") })
}

// httpGet returns url's body, or "" if it does not answer 200.
func httpGet(url string) string {
	client := http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return ""
	}
	return string(b)
}

// parseMetrics parses a /metrics body.
func parseMetrics(t *testing.T, body string) Metrics {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return Metrics(mfs)
}

// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// loadDelayEnv is exporter.TestLoadDelayEnv: "<config>=<duration>" makes a
// config's load sleep first, standing in for a slow load.
const loadDelayEnv = "KERNEL_EXPORTER_TEST_LOAD_DELAY"

// timersConfig writes the bundled timers program as config name in dir.
func timersConfig(t *testing.T, dir, name string) {
	t.Helper()
	for _, ext := range []string{".yaml", ".bpf.o"} {
		b, err := os.ReadFile(filepath.Join(repoRoot, "programs", "timers"+ext))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+ext), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestHardening05ObjectFIFO and TestHardening09ObjectDevZero: a config whose
// object is a FIFO, or a symlink to /dev/zero, is down promptly with a
// reason naming the path; the good config beside it runs.
func TestHardening05ObjectFIFO(t *testing.T) {
	badObject(t, func(path string) error { return syscall.Mkfifo(path, 0o644) }, "not a regular file")
}

func TestHardening09ObjectDevZero(t *testing.T) {
	badObject(t, func(path string) error { return os.Symlink("/dev/zero", path) }, "not a regular file")
}

func badObject(t *testing.T, mk func(path string) error, why string) {
	dir := t.TempDir()
	timersConfig(t, dir, "good")
	timersConfig(t, dir, "bad")
	obj := filepath.Join(dir, "bad.bpf.o")
	if err := os.Remove(obj); err != nil {
		t.Fatal(err)
	}
	if err := mk(obj); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	e := Start(t, "--programs=none", "--config.dir="+dir, "--config.names=bad,good")
	var ms Metrics
	Eventually(t, 10*time.Second, func() bool {
		ms = e.Scrape()
		return ms.Value("kernel_exporter_config_loading", nil) == 0
	}, "configs still loading after 10s\n%s", e.Logs)
	t.Logf("both configs settled %v after start", time.Since(start).Round(time.Millisecond))
	if v := ms.Value("kernel_exporter_config_up", L("config", "good")); v != 1 {
		t.Errorf("config_up{good} = %v, want 1\n%s", v, e.Logs())
	}
	if v := ms.Value("kernel_exporter_config_up", L("config", "bad")); v != 0 {
		t.Errorf("config_up{bad} = %v, want 0", v)
	}
	if r := errorReason(ms, "bad"); !strings.Contains(r, obj) || !strings.Contains(r, why) {
		t.Errorf("reason of bad = %q, want it to name %s and say %q", r, obj, why)
	}
}

// TestHardening04TelemetryPathFlag checks a telemetry path without a leading
// / (which made http.ServeMux panic) exits 2 naming the flag and value.
func TestHardening04TelemetryPathFlag(t *testing.T) {
	for _, p := range []string{"metrics", "/"} {
		_, errOut, code := runExporter(t, "--programs=timers", fmt.Sprintf("--web.listen-address=127.0.0.1:%d", freePort(t)), "--web.telemetry-path="+p)
		if code != 2 || strings.Contains(errOut, "panic") || !strings.Contains(errOut, fmt.Sprintf(`--web.telemetry-path "%s"`, p)) {
			t.Errorf("--web.telemetry-path=%s: exit %d, want 2 with an error naming flag and value, no panic:\n%s", p, code, errOut)
		}
	}
}

// spawn starts the binary with extra environment on a free port, without
// waiting, and returns the command, its base URL and its output.
func spawn(t *testing.T, env []string, args ...string) (*exec.Cmd, string, *syncBuffer) {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cmd := exec.Command(binary, append([]string{"--web.listen-address=" + addr}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd, "http://" + addr, logs
}

// waitPort polls url (the landing page, which never waits for loads) until
// it answers, and returns how long that took.
func waitPort(t *testing.T, url string, logs *syncBuffer) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < 20*time.Second {
		if resp, err := http.Get(url + "/"); err == nil {
			resp.Body.Close()
			return time.Since(start)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("port not open after 20s\n%s", logs)
	return 0
}

// waitExit waits up to d for cmd to exit and returns how long it took, or
// -1 when it did not.
func waitExit(cmd *exec.Cmd, d time.Duration) (time.Duration, error) {
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return time.Since(start), err
	case <-time.After(d):
		return -1, nil
	}
}

// TestHardening07PortFirst starts timers beside a config that takes 30 s to
// load: the port opens at once, timers serves data while the slow one
// shows loading (config_up 0, config_loading 1, "loading" on the landing
// page), and a SIGTERM during that start-up ends the process at once with
// exit code 0.
func TestHardening07PortFirst(t *testing.T) {
	cmd, url, logs := spawn(t, []string{loadDelayEnv + "=runqlat=30s"}, "--programs=timers,runqlat")
	open := waitPort(t, url, logs)
	t.Logf("port open %v after start (runqlat loads for 30s)", open.Round(time.Millisecond))
	if open > 5*time.Second {
		t.Errorf("port opened after %v, want before the slow config's load ends", open)
	}
	e := &Exporter{t: t, URL: url, logs: logs}
	var ms Metrics
	Eventually(t, 10*time.Second, func() bool {
		ms = e.Scrape()
		return ms.Value("kernel_exporter_config_up", L("config", "timers")) == 1
	}, "timers not up within 10s\n%s", logs)
	if v := ms.Value("kernel_exporter_config_loading", L("config", "runqlat")); v != 1 {
		t.Errorf("config_loading{runqlat} = %v, want 1", v)
	}
	if v := ms.Value("kernel_exporter_config_up", L("config", "runqlat")); v != 0 || ms.Series("kernel_exporter_config_up", L("config", "runqlat")) != 1 {
		t.Errorf("config_up{runqlat} = %v, want one series at 0", v)
	}
	if n := ms.Series("kernel_timer_starts_total", nil); n == 0 {
		t.Errorf("timers serves no series while runqlat loads")
	}
	if row := landingRow(e.Get("/"), "runqlat"); !strings.Contains(row, `class="loading">loading<`) {
		t.Errorf("landing page row of runqlat %q, want loading", row)
	}
	start := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	d, err := waitExit(cmd, 10*time.Second)
	t.Logf("SIGTERM during start-up: exit after %v (%v)", d.Round(time.Millisecond), err)
	if d < 0 || d > 2*time.Second || err != nil {
		t.Errorf("SIGTERM during start-up: exit after %v with %v (sent %v ago), want exit 0 within 2s\n%s", d, err, time.Since(start), logs)
	}
}

// TestHardening07LoadTimeout checks a config whose load outlasts
// --config.load-timeout is down with a reason naming the timeout, the
// others up.
func TestHardening07LoadTimeout(t *testing.T) {
	t.Setenv(loadDelayEnv, "runqlat=8s")
	start := time.Now()
	e := Start(t, "--programs=timers,runqlat", "--config.load-timeout=2s")
	var ms Metrics
	Eventually(t, 6*time.Second, func() bool {
		ms = e.Scrape()
		return ms.Value("kernel_exporter_config_loading", nil) == 0
	}, "still loading 6s after start with a 2s load timeout\n%s", e.Logs)
	t.Logf("slow config marked down %v after start", time.Since(start).Round(time.Millisecond))
	if v := ms.Value("kernel_exporter_config_up", L("config", "timers")); v != 1 {
		t.Errorf("config_up{timers} = %v, want 1", v)
	}
	want := "load did not finish within 2s (--config.load-timeout)"
	if r := errorReason(ms, "runqlat"); r != want {
		t.Errorf("reason of runqlat = %q, want %q", r, want)
	}
	// The load ends later: its objects are closed, it stays down.
	time.Sleep(7 * time.Second)
	ms = e.Scrape()
	if v := ms.Value("kernel_exporter_config_up", L("config", "runqlat")); v != 0 || errorReason(ms, "runqlat") != want {
		t.Errorf("after the late load ended: config_up{runqlat} = %v, reason %q", v, errorReason(ms, "runqlat"))
	}
	if !strings.Contains(e.Logs(), "config load ended after its timeout: closed") {
		t.Errorf("no log of the late load being closed:\n%s", e.Logs())
	}
}

// halfRequest opens a connection and sends half a request: the headers of a
// POST and 3 of its 1000 body bytes. The handler answers, then the server
// reads the rest of the body to reuse the connection, which stays active
// (not idle) for as long as the client sends nothing. (Half the headers
// alone would not do: the server counts a connection that has not sent its
// headers as idle, and shutdown closes it after 5 s.)
func halfRequest(t *testing.T, url string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write([]byte("POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nabc")); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestHardening08SlowlorisShutdown checks that a client holding half a
// request does not hold shutdown: SIGTERM ends the process within the
// shutdown deadline (5 s) and the connection is closed.
func TestHardening08SlowlorisShutdown(t *testing.T) {
	e := Start(t, "--programs=timers")
	halfRequest(t, e.URL)
	time.Sleep(200 * time.Millisecond)
	d, ok, err := signalAndWait(t, e, "SIGTERM with a half-open request")
	if ok && (d > 7*time.Second || err != nil) {
		t.Errorf("exit after %v with %v, want exit 0 within the 5s shutdown deadline", d, err)
	}
}

// signalAndWait sends SIGTERM to e and waits up to 15 s for it to exit,
// returning how long that took and the exit error (exited false, the test
// failed and the process killed, when it did not exit).
func signalAndWait(t *testing.T, e *Exporter, what string) (d time.Duration, exited bool, err error) {
	t.Helper()
	start := time.Now()
	e.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err = <-e.done:
		e.done <- err
		d = time.Since(start)
		t.Logf("exit %v after %s (%v)", d.Round(time.Millisecond), what, err)
		return d, true, err
	case <-time.After(15 * time.Second):
		t.Errorf("no exit 15s after %s\n%s", what, e.Logs())
		e.cmd.Process.Kill()
		return 0, false, nil
	}
}

// TestHardening08SecondSignal checks that a second SIGTERM while shutdown
// waits exits at once: well before the 5 s shutdown deadline (the kernel's
// release of the BPF links as the process exits takes up to about a second
// on a busy machine).
func TestHardening08SecondSignal(t *testing.T) {
	e := Start(t, "--programs=timers")
	halfRequest(t, e.URL)
	time.Sleep(200 * time.Millisecond)
	e.cmd.Process.Signal(syscall.SIGTERM)
	time.Sleep(300 * time.Millisecond)
	d, ok, _ := signalAndWait(t, e, "a second SIGTERM")
	if ok && (d > 3*time.Second || !strings.Contains(e.Logs(), "second signal: exiting at once")) {
		t.Errorf("exit %v after the second SIGTERM, want at once (well before the 5s shutdown deadline)\n%s", d, e.Logs())
	}
}

// openFDs counts the open file descriptors of pid.
func openFDs(t *testing.T, pid int) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestHardening08ConnectionCap opens 400 connections that send nothing
// against --web.max-connections=50: the process holds at most 50 of them
// (since TCP_DEFER_ACCEPT, none: they wait in the kernel until they send;
// TestHardening25PartialRequests has connections that do), and scrapes
// work again once they go. Under a file-descriptor limit of 256 the cap is
// lowered to 128.
func TestHardening08ConnectionCap(t *testing.T) {
	e := Start(t, "--programs=timers", "--web.max-connections=50")
	pid := e.cmd.Process.Pid
	before := openFDs(t, pid)
	var conns []net.Conn
	for range 400 {
		c, err := net.Dial("tcp", strings.TrimPrefix(e.URL, "http://"))
		if err != nil {
			t.Fatalf("dial #%d: %v", len(conns), err)
		}
		conns = append(conns, c)
	}
	time.Sleep(500 * time.Millisecond)
	during := openFDs(t, pid)
	t.Logf("open fds: %d before, %d with 400 idle connections (cap 50)", before, during)
	if during-before > 50 {
		t.Errorf("open fds grew by %d with 400 idle connections, want at most 50", during-before)
	}
	for _, c := range conns {
		c.Close()
	}
	if v := e.Scrape().Value("kernel_exporter_config_up", L("config", "timers")); v != 1 {
		t.Errorf("config_up{timers} = %v after the idle connections went", v)
	}

	low := startWrapped(t, []string{"prlimit", "--nofile=256:256", "--"}, "--programs=timers")
	if !strings.Contains(low.Logs(), "max_connections=128") {
		t.Errorf("under RLIMIT_NOFILE 256 the cap is not lowered to 128:\n%s", low.Logs())
	}
}

// TestHardening08ExporterMetrics checks the process_* and go_* collectors
// are served, and left out with --web.disable-exporter-metrics.
func TestHardening08ExporterMetrics(t *testing.T) {
	ms := Start(t, "--programs=timers").Scrape()
	if ms.Value("process_open_fds", nil) < 1 || ms.Value("go_goroutines", nil) < 1 {
		t.Errorf("process_open_fds = %v, go_goroutines = %v, want both > 0", ms.Value("process_open_fds", nil), ms.Value("go_goroutines", nil))
	}
	ms = Start(t, "--programs=timers", "--web.disable-exporter-metrics").Scrape()
	for name := range ms {
		if strings.HasPrefix(name, "process_") || strings.HasPrefix(name, "go_") {
			t.Errorf("%s served with --web.disable-exporter-metrics", name)
		}
	}
}

// TestHardening12DuplicateMetricAcrossConfigs runs two configs serving the
// same metric: the first listed keeps running, the other is down with a
// reason naming both configs and the metric.
func TestHardening12DuplicateMetricAcrossConfigs(t *testing.T) {
	dir := t.TempDir()
	timersConfig(t, dir, "first")
	timersConfig(t, dir, "second")
	e := Start(t, "--programs=none", "--config.dir="+dir, "--config.names=first,second")
	var ms Metrics
	Eventually(t, 10*time.Second, func() bool {
		ms = e.Scrape()
		return ms.Value("kernel_exporter_config_loading", nil) == 0
	}, "configs still loading after 10s\n%s", e.Logs)
	upA := ms.Value("kernel_exporter_config_up", L("config", "first"))
	upB := ms.Value("kernel_exporter_config_up", L("config", "second"))
	if upA+upB != 1 {
		t.Fatalf("config_up first = %v, second = %v: want exactly one up\n%s", upA, upB, e.Logs())
	}
	winner, loser := "first", "second"
	if upB == 1 {
		t.Errorf("config second serves the metric: want the first listed")
		winner, loser = loser, winner
	}
	want := fmt.Sprintf("metric kernel_timer_starts_total of config %s is also defined by config %s, which is listed first (--programs, then --config.names) and so serves it", loser, winner)
	if r := errorReason(ms, loser); r != want {
		t.Errorf("reason of %s = %q, want %q", loser, r, want)
	}
	if ms.Series("kernel_timer_starts_total", nil) == 0 {
		t.Errorf("kernel_timer_starts_total not served by %s", winner)
	}
}

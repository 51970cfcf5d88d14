// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kernel-exporter/kernel_exporter/loader"
)

// Finding 13: the process kept every root capability for its whole life,
// and the systemd unit in deploy/ lacked CAP_SYSLOG (and CAP_DAC_READ_SEARCH),
// so timers showed no series under it.

// capBPF is CAP_BPF's number (linux/capability.h): the one capability the
// exporter keeps after attach by default (loader.ScrapeCapabilities).
const capBPF = 39

// unitPath is the systemd unit the tests take their capability set from.
const unitPath = "deploy/kernel_exporter.service"

// unitCaps returns the capabilities of deploy/kernel_exporter.service, in
// setpriv's spelling ("bpf", "syslog"): CapabilityBoundingSet= and
// AmbientCapabilities= must both be given and name the same set (the
// service runs as a non-root user, so what it holds is exactly its ambient
// set, and the bounding set must allow it).
func unitCaps(t *testing.T) []string {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, unitPath))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sets := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		if !ok || (k != "CapabilityBoundingSet" && k != "AmbientCapabilities") {
			continue
		}
		if strings.HasPrefix(v, "~") {
			t.Fatalf("%s: %s=%s: an inverted set is not supported by this test", unitPath, k, v)
		}
		for _, c := range strings.Fields(v) {
			name := strings.TrimPrefix(strings.ToLower(c), "cap_")
			if !slices.Contains(sets[k], name) {
				sets[k] = append(sets[k], name)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	b, a := sets["CapabilityBoundingSet"], sets["AmbientCapabilities"]
	slices.Sort(b)
	slices.Sort(a)
	if len(b) == 0 || !slices.Equal(a, b) {
		t.Fatalf("%s: CapabilityBoundingSet %v and AmbientCapabilities %v must be given and equal", unitPath, b, a)
	}
	return b
}

// procCaps is loader.StatusCaps as plain numbers, failing t on an error.
func procCaps(t *testing.T, path string) map[string]uint64 {
	t.Helper()
	caps, err := loader.StatusCaps(path)
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]uint64, len(caps))
	for k, v := range caps {
		out[k] = uint64(v)
	}
	return out
}

// checkThreadsCapEff checks that every thread of pid has CapEff want.
func checkThreadsCapEff(t *testing.T, pid int, want uint64) {
	t.Helper()
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatal(err)
	}
	bad := 0
	for _, task := range tasks {
		caps, err := loader.StatusCaps(fmt.Sprintf("/proc/%d/task/%s/status", pid, task.Name()))
		if errors.Is(err, os.ErrNotExist) {
			continue // the thread ended since the directory was read
		}
		if err != nil {
			t.Fatal(err)
		}
		if got := uint64(caps["CapEff"]); got != want {
			bad++
			t.Errorf("thread %s of %d: CapEff %016x, want %016x: capabilities are per thread, every one must drop", task.Name(), pid, got, want)
		}
	}
	if bad == 0 {
		t.Logf("%d threads, each with CapEff %016x", len(tasks), want)
	}
}

// logField returns the value of key=value in the first log line holding
// msg, or "" if no line does.
func logField(logs, msg, key string) string {
	for _, line := range strings.Split(logs, "\n") {
		if !strings.Contains(line, msg) {
			continue
		}
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, key+"="); ok {
				return strings.Trim(v, `"`)
			}
		}
	}
	return ""
}

// dropMsg is the log message of the capability drop.
const dropMsg = "capabilities dropped after attach"

// waitDropped waits until e has logged its capability drop, which follows
// the end of loading (what Start waits for) by a moment.
func waitDropped(t *testing.T, e *Exporter) {
	t.Helper()
	Eventually(t, 10*time.Second, func() bool { return strings.Contains(e.Logs(), dropMsg) },
		"no %q logged within 10s\n%s", dropMsg, e.Logs)
}

// publicCopy copies the exporter binary into a fresh directory that any
// user may enter, for a process running as nobody (the harness builds it
// in a private directory).
func publicCopy(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "kernel_exporter-caps-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(binary)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	path := filepath.Join(dir, "kernel_exporter")
	dst, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// exporterPid returns the pid of the exporter e runs, checking that the
// wrappers exec'd into it (so the pid is the exporter's own).
func exporterPid(t *testing.T, e *Exporter) int {
	t.Helper()
	pid := e.cmd.Process.Pid
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(comm)); got != "kernel_exporter" {
		t.Fatalf("pid %d is %q, not kernel_exporter: a wrapper did not exec", pid, got)
	}
	return pid
}

// checkDefaultProgramsData drives the workloads of the core tests (loopback
// TCP, O_DIRECT I/O, two busy loops on one CPU) and checks that each
// default program counted them: timers with function names decoded through
// kallsyms (not hex, no decoder errors), biolatency, runqlat.
func checkDefaultProgramsData(t *testing.T, e *Exporter) {
	t.Helper()
	const (
		timers = "kernel_timer_starts_total"
		bio    = "kernel_bio_latency_seconds"
		runq   = "kernel_run_queue_latency_seconds"
		conns  = 200
	)
	ms := e.Scrape()
	for _, c := range []string{"timers", "biolatency", "runqlat"} {
		if v := ms.Value("kernel_exporter_config_up", L("config", c)); v != 1 {
			t.Errorf("config_up{config=%q} = %v, want 1\n%s", c, v, e.Logs())
		}
	}
	if v := ms.Value("kernel_exporter_program_attached", nil); v != 6 {
		t.Errorf("attached programs = %v, want 6", v)
	}
	dir := ioTempDir(t)
	disk, err := diskOf(dir)
	if err != nil {
		t.Fatal(err)
	}
	before := e.Scrape()
	tcpPingPong(t, conns, 10)
	writes, reads := directIO(t, dir, 256, 64<<10)
	stop := busyOnOneCPU(t, 2)
	time.Sleep(time.Second)
	stop()

	fn := "reqsk_timer_handler"
	var d float64
	Eventually(t, 5*time.Second, func() bool {
		d = e.Scrape().Value(timers, L("function", fn)) - before.Value(timers, L("function", fn))
		return d >= conns
	}, "%s{function=%q} moved by %v after %d loopback connections, want >= %d (ksym decoding needs CAP_SYSLOG)\n%s",
		timers, fn, d, conns, conns, e.Logs)
	after := e.Scrape()
	names := after.LabelValues(timers, "function")
	for _, n := range names {
		if strings.HasPrefix(n, "0x") || n == "" {
			t.Errorf("%s{function=%q}: an address, not a name: kallsyms addresses were hidden", timers, n)
		}
	}
	if v := after.Value("kernel_exporter_decoder_errors_total", L("config", "timers")); v != 0 {
		t.Errorf("decoder_errors_total{config=\"timers\"} = %v, want 0", v)
	}
	for _, c := range []struct {
		op   string
		want int
	}{{"write", writes}, {"read", reads}} {
		labels := L("device", disk, "operation", c.op)
		// 90%: the kernel completes a few requests without the program
		// running (see TestBioLatencyDirectIO).
		dc, _ := waitBioCount(e, before, bio, labels, uint64(c.want))
		if dc < uint64(c.want)*9/10 {
			t.Errorf("%s{device=%q,operation=%q}: count +%d after %d O_DIRECT %ss, want >= 90%%", bio, disk, c.op, dc, c.want, c.op)
		}
	}
	c0, _, _ := before.Hist(runq, nil, 0)
	c1, _, _ := after.Hist(runq, nil, 0)
	if c1-c0 < 100 {
		t.Errorf("%s: count +%d after 1 s of two busy loops on one CPU, want >= 100", runq, c1-c0)
	}
	t.Logf("timers: %d functions, %s +%v; runqlat count +%d", len(names), fn, d, c1-c0)
}

// unitCapsWrapper returns a startWrapped wrapper that runs a public copy
// of the exporter as nobody under setpriv with exactly the capabilities
// of deploy/kernel_exporter.service (bounding, inheritable and ambient
// sets), in a mount namespace where tracefs is mounted as systemd's
// sys-kernel-tracing.mount does at boot; and the unit's set as CapEff,
// as setpriv gives it to a process.
func unitCapsWrapper(t *testing.T) (wrapper []string, unitSet uint64) {
	t.Helper()
	caps := unitCaps(t)
	setpriv := probeNeedTool(t, "run as another user with chosen capabilities", "setpriv")
	probeNeedTool(t, "a private mount namespace for tracefs", "unshare")
	var list []string
	for _, c := range caps {
		list = append(list, "+"+c)
	}
	capArg := "-all," + strings.Join(list, ",")
	setprivArgs := []string{setpriv, "--reuid=65534", "--regid=65534", "--clear-groups",
		"--inh-caps=" + capArg, "--ambient-caps=" + capArg, "--bounding-set=" + capArg, "--"}
	out, err := exec.Command(setpriv, append(setprivArgs[1:], "grep", "^CapEff:", "/proc/self/status")...).CombinedOutput()
	if err != nil {
		t.Fatalf("setpriv with the unit's capabilities %s: %v\n%s", capArg, err, out)
	}
	unitSet, err = strconv.ParseUint(strings.TrimSpace(strings.TrimPrefix(string(out), "CapEff:")), 16, 64)
	if err != nil {
		t.Fatalf("CapEff under setpriv: %q: %v", out, err)
	}
	// The harness appends its binary and flags to the wrapper: the script
	// drops the former ($1) and runs the public copy under setpriv with
	// the latter.
	var quoted []string
	for _, a := range append(setprivArgs, publicCopy(t)) {
		quoted = append(quoted, "'"+strings.ReplaceAll(a, "'", `'\''`)+"'")
	}
	script := "mountpoint -q /sys/kernel/tracing || mount -t tracefs tracefs /sys/kernel/tracing || exit 1\n" +
		"shift\nexec " + strings.Join(quoted, " ") + ` "$@"`
	return []string{"unshare", "-m", "--propagation", "private", "--", "sh", "-c", script, "sh"}, unitSet
}

// TestHardening13SetprivUnitCaps runs the exporter as nobody under setpriv
// with exactly the capabilities of deploy/kernel_exporter.service (bounding,
// inheritable and ambient sets), in a mount namespace where tracefs is
// mounted as systemd's sys-kernel-tracing.mount does at boot. Every default
// program must be up and count its workload, timers with function names;
// after start-up CapEff must be the unit's set reduced to CAP_BPF, on every
// thread, and the log must show the larger set before the drop.
func TestHardening13SetprivUnitCaps(t *testing.T) {
	caps := unitCaps(t)
	wrapper, unitSet := unitCapsWrapper(t)
	want := unitSet & (1 << capBPF)
	t.Logf("unit capabilities %v: CapEff %016x; expected after the drop: %016x", caps, unitSet, want)
	e := startWrapped(t, wrapper)
	waitDropped(t, e)
	pid := exporterPid(t, e)

	st := procCaps(t, fmt.Sprintf("/proc/%d/status", pid))
	if st["CapEff"] != want || st["CapPrm"] != want || st["CapInh"] != 0 || st["CapAmb"] != 0 || st["NoNewPrivs"] != 1 {
		t.Errorf("exporter under the unit's set after start-up: CapEff %016x CapPrm %016x CapInh %016x CapAmb %016x NoNewPrivs %d; want CapEff = CapPrm = %016x, CapInh = CapAmb = 0, NoNewPrivs 1\n%s",
			st["CapEff"], st["CapPrm"], st["CapInh"], st["CapAmb"], st["NoNewPrivs"], want, e.Logs())
	}
	// No CAP_SETPCAP in the unit: the bounding set stays the unit's.
	if st["CapBnd"] != unitSet {
		t.Errorf("CapBnd %016x, want the unit's %016x", st["CapBnd"], unitSet)
	}
	checkThreadsCapEff(t, pid, want)
	b, a := logField(e.Logs(), dropMsg, "cap_eff_before"), logField(e.Logs(), dropMsg, "cap_eff_after")
	if b != fmt.Sprintf("%016x", unitSet) || a != fmt.Sprintf("%016x", want) {
		t.Errorf("log %q: cap_eff_before=%q cap_eff_after=%q, want %016x and %016x\n%s", dropMsg, b, a, unitSet, want, e.Logs())
	}
	t.Logf("CapEff before attach %s, after %s", b, a)

	checkDefaultProgramsData(t, e)
}

// TestHardening13CapabilityDrop starts the exporter as root: after
// start-up every thread holds only CAP_BPF (effective, permitted and
// bounding; no_new_privs set), the log shows the full set before, and
// scraping still returns decoded data. --capabilities.keep adds to the kept
// set, "all" keeps everything, and an unknown name is refused at start.
func TestHardening13CapabilityDrop(t *testing.T) {
	self := procCaps(t, "/proc/self/status")
	t.Run("default", func(t *testing.T) {
		e := Start(t)
		waitDropped(t, e)
		pid := exporterPid(t, e)
		const want = uint64(1) << capBPF
		st := procCaps(t, fmt.Sprintf("/proc/%d/status", pid))
		if st["CapEff"] != want || st["CapPrm"] != want || st["CapBnd"] != want || st["CapInh"] != 0 || st["CapAmb"] != 0 || st["NoNewPrivs"] != 1 {
			t.Errorf("after start-up: CapEff %016x CapPrm %016x CapBnd %016x CapInh %016x CapAmb %016x NoNewPrivs %d; want CapEff = CapPrm = CapBnd = %016x (CAP_BPF), CapInh = CapAmb = 0, NoNewPrivs 1",
				st["CapEff"], st["CapPrm"], st["CapBnd"], st["CapInh"], st["CapAmb"], st["NoNewPrivs"], want)
		}
		checkThreadsCapEff(t, pid, want)
		b, a := logField(e.Logs(), dropMsg, "cap_eff_before"), logField(e.Logs(), dropMsg, "cap_eff_after")
		if b != fmt.Sprintf("%016x", self["CapEff"]) || a != fmt.Sprintf("%016x", want) {
			t.Errorf("log %q: cap_eff_before=%q cap_eff_after=%q, want %016x (the test's own) and %016x\n%s", dropMsg, b, a, self["CapEff"], want, e.Logs())
		}
		t.Logf("CapEff before attach %s, after %s", b, a)
		checkDefaultProgramsData(t, e)
	})
	t.Run("keep", func(t *testing.T) {
		e := Start(t, "--programs=timers", "--capabilities.keep=cap_syslog,PERFMON")
		waitDropped(t, e)
		want := uint64(1)<<capBPF | 1<<34 | 1<<38 // + CAP_SYSLOG, CAP_PERFMON
		if got := procCaps(t, fmt.Sprintf("/proc/%d/status", exporterPid(t, e)))["CapEff"]; got != want {
			t.Errorf("--capabilities.keep=cap_syslog,PERFMON: CapEff %016x, want %016x", got, want)
		}
	})
	t.Run("all", func(t *testing.T) {
		e := Start(t, "--programs=timers", "--capabilities.keep=all")
		if got := procCaps(t, fmt.Sprintf("/proc/%d/status", exporterPid(t, e)))["CapEff"]; got != self["CapEff"] {
			t.Errorf("--capabilities.keep=all: CapEff %016x, want %016x (nothing dropped)", got, self["CapEff"])
		}
		if strings.Contains(e.Logs(), dropMsg) {
			t.Errorf("--capabilities.keep=all logged %q", dropMsg)
		}
	})
	t.Run("unknown", func(t *testing.T) {
		_, stderr, code := runExporter(t, "--programs=timers", "--capabilities.keep=cap_syslog,cap_bogus")
		if code != 2 || !strings.Contains(stderr, "cap_bogus") {
			t.Errorf("--capabilities.keep=cap_syslog,cap_bogus: exit %d, stderr %q; want exit 2 naming cap_bogus", code, stderr)
		}
	})
}

// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/loader"
	"github.com/kernel-exporter/kernel_exporter/privsep"
)

// Thread names of the getpids child (see childMain): spin.bpf.c spins on
// the syscalls of threads named budgetSpinComm, and only counts those of
// budgetTickComm.
const (
	budgetSpinComm = "kx-budget-spin"
	budgetTickComm = "kx-budget-tick"
)

// getpidThreads runs two threads named comm making getpid() calls for d
// (two, so that the spinning program's rate is well above the default
// budget, 0.5, even on a busy 2-CPU machine), printing "spinning" once
// both are named.
func getpidThreads(d time.Duration, comm string) error {
	deadline := time.Now().Add(d)
	errc := make(chan error, 2)
	for range 2 {
		go func() {
			runtime.LockOSThread()
			name, _ := unix.BytePtrFromString(comm)
			if err := unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(name)), 0, 0, 0); err != nil {
				errc <- fmt.Errorf("PR_SET_NAME: %w", err)
				return
			}
			errc <- nil
			for time.Now().Before(deadline) {
				for range 1000 {
					unix.Getpid()
				}
			}
			errc <- nil
		}()
	}
	for range 2 {
		if err := <-errc; err != nil {
			return err
		}
	}
	fmt.Println("spinning")
	<-errc
	<-errc
	return nil
}

// spinYAML exports budget_spins_total of testdata/budget/spin.bpf.c.
const spinYAML = `metrics:
  counters:
    - name: budget_spins_total
      help: Syscalls the budget test program spun on
    - name: budget_getpids_total
      help: getpid() calls of the budget test's threads
`

// startSpinner starts the spinner for secs seconds and returns once it
// spins; it is killed at cleanup.
func startSpinner(t *testing.T, secs int) *exec.Cmd {
	t.Helper()
	return startBudgetProc(t, secs, budgetSpinComm)
}

// startBudgetProc starts this binary as a spinner whose threads are named
// comm (budgetSpinComm or budgetTickComm).
func startBudgetProc(t *testing.T, secs int, comm string) *exec.Cmd {
	t.Helper()
	cmd := childCmd(t, "getpids", strconv.Itoa(secs)+":"+comm, nil)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "spinning\n" {
		t.Fatalf("spinner did not start: %q %v", line, err)
	}
	return cmd
}

// TestBudgetCPU loads every bundled program and a user program that spins
// 20 µs at each syscall entry of two threads of one process, with the
// default budget, period, window and capabilities (everything but CAP_BPF
// dropped after attach), under the integration tests' load (execs and
// loopback TCP as in TestPerfLoad, O_DIRECT I/O) plus the spinner's
// syscalls. After the drop the exporter's CapEff is CAP_BPF alone and its
// privileged helper worker's exactly privsep.HelperCapabilities. The spinning
// config is detached within 60 s of the spinner's start, with every signal
// (config_up 0, a reason saying "budget" with the measured rate,
// budget_exceeded_total{resource="cpu"} 1, a WARN line, the landing page);
// its series stay in /metrics with their values frozen; it is attached
// again after --bpf.budget-backoff, its tracepoint program through the
// helper, and its counts move on from where they were. No bundled config
// is ever detached.
func TestBudgetCPU(t *testing.T) {
	dir := t.TempDir()
	compileBPF(t, filepath.Join("integration", "testdata", "budget", "spin.bpf.c"), filepath.Join(dir, "spin.bpf.o"), "-DSPIN_NS=20000")
	writeProbeConfig(t, dir, "spin", spinYAML)
	e := Start(t, "--programs=all", "--config.dir="+dir, "--config.names=spin", "--bpf.budget-backoff=1s")
	ms := e.Scrape()
	if v := ms.Value("kernel_exporter_config_up", L("config", "spin")); v != 1 {
		t.Fatalf("spin config not up\n%s", e.Logs())
	}
	checkPrivsepCaps(t, e)
	var bundled []string
	for _, c := range ms.LabelValues("kernel_exporter_config_up", "config") {
		if c != "spin" && ms.Value("kernel_exporter_config_up", L("config", c)) == 1 {
			bundled = append(bundled, c)
		}
	}
	if len(bundled) < 3 {
		t.Fatalf("only %d bundled configs up: %v", len(bundled), bundled)
	}
	stopLoad := loadWorkload(t)
	defer stopLoad()
	ioDir := t.TempDir()
	ioDone := make(chan struct{})
	go func() {
		defer close(ioDone)
		for i := 0; i < 200; i++ {
			if _, _, err := runDirectIO(ioDir, 64, 4096); err != nil {
				return
			}
		}
	}()
	defer func() { <-ioDone }()

	spinner := startSpinner(t, 90)
	t0 := time.Now()
	var detachedAfter time.Duration
	for detachedAfter == 0 {
		ms = e.Scrape()
		if ms.Value("kernel_exporter_config_up", L("config", "spin")) == 0 {
			detachedAfter = time.Since(t0)
			break
		}
		if time.Since(t0) > 60*time.Second {
			t.Fatalf("spin config not detached within 60 s of going over\n%s", e.Logs())
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("over budget to detached: %v (default period 30 s, window 1 s)", detachedAfter.Round(100*time.Millisecond))
	reasons := ms.LabelValues("kernel_exporter_config_error_info", "reason")
	var reason string
	for _, r := range reasons {
		if strings.Contains(r, "CPU budget") {
			reason = r
		}
	}
	if !strings.Contains(reason, "budget") || !strings.Contains(reason, "CPU s/s measured") || !strings.Contains(reason, "budget 0.5") {
		t.Errorf("error_info reason %q: want it to say budget and the measured figure", reason)
	}
	t.Logf("reason: %s", reason)
	if v := ms.Value("kernel_exporter_budget_exceeded_total", L("config", "spin", "resource", "cpu")); v != 1 {
		t.Errorf("budget_exceeded_total{config=spin,resource=cpu} = %v, want 1", v)
	}
	if v := ms.Value("kernel_exporter_program_attached", L("config", "spin", "program", "budget_getpid")); v != 0 {
		t.Errorf("program_attached{budget_getpid} = %v while detached, want 0", v)
	}
	if !strings.Contains(e.Logs(), "level=WARN") || !strings.Contains(e.Logs(), "config detached: over budget") {
		t.Errorf("no WARN line for the detach\n%s", e.Logs())
	}
	if row := landingRow(e.Get("/"), "spin"); !strings.Contains(row, "over its cpu budget") {
		t.Errorf("landing page row of spin does not mark it over budget: %s", row)
	}
	// The series stay, frozen, while the spinner still makes its syscalls.
	spins, getpids := ms.Value("kernel_budget_spins_total", nil), ms.Value("kernel_budget_getpids_total", nil)
	if ms.Series("kernel_budget_spins_total", nil) != 1 || spins == 0 || getpids == 0 {
		t.Errorf("detached: spins_total %v getpids_total %v (%d series), want both kept and non-zero", spins, getpids, ms.Series("kernel_budget_spins_total", nil))
	}
	time.Sleep(2 * time.Second)
	ms = e.Scrape()
	if s, g := ms.Value("kernel_budget_spins_total", nil), ms.Value("kernel_budget_getpids_total", nil); s != spins || g != getpids {
		t.Errorf("detached: spins_total %v -> %v, getpids_total %v -> %v in 2 s of spinning, want frozen", spins, s, getpids, g)
	}
	t.Logf("frozen while detached: spins_total %v, getpids_total %v", spins, getpids)
	// Nothing spins any more: the program is detached.
	spinner.Process.Kill()
	spinner.Wait()

	// Re-attached at the first window after the 1 s backoff: within one
	// period (30 s) and the load.
	t1 := time.Now()
	Eventually(t, 45*time.Second, func() bool {
		ms = e.Scrape()
		return ms.Value("kernel_exporter_config_up", L("config", "spin")) == 1
	}, "spin config not re-attached after its backoff\n%s", e.Logs)
	t.Logf("re-attached %v after the detach was seen", time.Since(t1).Round(100*time.Millisecond))
	if row := landingRow(e.Get("/"), "spin"); strings.Contains(row, "over its") {
		t.Errorf("landing page still marks spin after the re-attach: %s", row)
	}
	if v := ms.Value("kernel_exporter_program_attached", L("config", "spin", "program", "budget_getpid")); v != 1 {
		t.Errorf("program_attached{budget_getpid} = %v after the re-attach, want 1", v)
	}
	// The tracepoint program (re-linked through the helper) counts again,
	// from where it was: the ticker's threads do not spin.
	ticker := startBudgetProc(t, 2, budgetTickComm)
	ticker.Wait()
	ms = e.Scrape()
	if g := ms.Value("kernel_budget_getpids_total", nil); g <= getpids {
		t.Errorf("getpids_total %v after the re-attach and 2 s of getpid(), want more than %v", g, getpids)
	} else {
		t.Logf("getpids_total %v -> %v after the re-attach", getpids, g)
	}
	if s := ms.Value("kernel_budget_spins_total", nil); s < spins {
		t.Errorf("spins_total %v after the re-attach, want at least %v (no reset)", s, spins)
	}
	stopLoad()
	// No bundled config went over the default budget.
	for _, c := range bundled {
		if v := ms.Value("kernel_exporter_config_up", L("config", c)); v != 1 {
			t.Errorf("bundled config %s down: %v", c, ms.LabelValues("kernel_exporter_config_error_info", "reason"))
		}
	}
	if got := ms.LabelValues("kernel_exporter_budget_exceeded_total", "config"); len(got) != 1 || got[0] != "spin" {
		t.Errorf("budget_exceeded_total configs %v, want only spin", got)
	}
}

// checkPrivsepCaps checks, once the capabilities are dropped, that every
// thread of the exporter has CapEff CAP_BPF alone, that its one child, the
// privileged helper's supervisor, holds privsep.HelperCapabilities only to
// pass them on (permitted, inheritable, ambient; none effective), and that
// the supervisor's one child, the worker, has exactly
// privsep.HelperCapabilities (effective, permitted and bounding), both
// with no_new_privs.
func checkPrivsepCaps(t *testing.T, e *Exporter) {
	t.Helper()
	pid := e.cmd.Process.Pid
	want := uint64(loader.ScrapeCapabilities)
	Eventually(t, 10*time.Second, func() bool {
		return procCaps(t, fmt.Sprintf("/proc/%d/status", pid))["CapEff"] == want
	}, "exporter CapEff is not CAP_BPF after start-up\n%s", e.Logs)
	checkThreadsCapEff(t, pid, want)
	sup, worker := helperPids(t, e)
	helper := uint64(privsep.HelperCapabilities) & procCaps(t, "/proc/self/status")["CapEff"]
	caps := procCaps(t, fmt.Sprintf("/proc/%d/status", worker))
	for _, k := range []string{"CapEff", "CapPrm", "CapBnd"} {
		if caps[k] != helper {
			t.Errorf("helper worker %d: %s %016x, want %016x (%s)", worker, k, caps[k], helper, privsep.HelperCapabilities)
		}
	}
	if caps["CapInh"] != 0 || caps["CapAmb"] != 0 || caps["NoNewPrivs"] != 1 {
		t.Errorf("helper worker %d: CapInh %x CapAmb %x NoNewPrivs %d, want 0 0 1", worker, caps["CapInh"], caps["CapAmb"], caps["NoNewPrivs"])
	}
	scaps := procCaps(t, fmt.Sprintf("/proc/%d/status", sup))
	if scaps["CapEff"] != 0 || scaps["CapPrm"] != helper || scaps["CapInh"] != helper || scaps["CapAmb"] != helper || scaps["NoNewPrivs"] != 1 {
		t.Errorf("helper supervisor %d: CapEff %x CapPrm %x CapInh %x CapAmb %x NoNewPrivs %d, want 0, then %x three times, and 1",
			sup, scaps["CapEff"], scaps["CapPrm"], scaps["CapInh"], scaps["CapAmb"], scaps["NoNewPrivs"], helper)
	}
	t.Logf("exporter %d CapEff %016x; helper supervisor %d CapPrm %016x, worker %d CapEff %016x (%s)", pid, want, sup, scaps["CapPrm"], worker, caps["CapEff"], privsep.HelperCapabilities)
}

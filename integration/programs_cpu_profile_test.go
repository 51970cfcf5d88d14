// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kernel-exporter/kernel_exporter/internal/proftest"
)

// TestProgramCPUProfile runs a getpid() storm for 10 s in a process with a
// unique command name, under the bundled cpu_profile program (software
// cpu-clock, 19 Hz per CPU), and checks its counters under that comm:
//
//   - the samples add up to the process's CPU time (/proc/<pid>/schedstat)
//     times 19, within 30% (or 6 samples): each sample stands for 1/19 s of
//     CPU time, and the machine is shared, so the process's own CPU time is
//     the reference, not the wall clock;
//   - at least half of them are in the kernel (function is not "[user]"): a
//     getpid() loop lives in system calls;
//   - some have a leaf that serves getpid() (__x64_sys_getpid, its alias
//     __ia32_sys_getpid, __do_sys_getpid, or __task_pid_nr_ns, which it
//     calls), resolved through /proc/kallsyms by the ksym decoder: 5 to
//     13% of the samples in runs here, so about 10 to 25 of the 190 a
//     busy 10 s gives. The rest of a getpid() is the system-call entry and
//     exit, and whatever other BPF programs on the syscall tracepoints
//     cost (other tests' and tools', on a shared machine), which is why
//     only the presence is asserted.
func TestProgramCPUProfile(t *testing.T) {
	const (
		metric  = "kernel_cpu_profile_samples_total"
		hz      = 19
		seconds = "10"
	)
	comm := randomName(t, "kxprof-") // 7 + 8 = 15 bytes
	src, err := os.ReadFile(proftest.Build(t, filepath.Join(repoRoot, "profile/testdata/workload.c")))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), comm)
	if err := os.WriteFile(bin, src, 0o755); err != nil {
		t.Fatal(err)
	}

	e := Start(t, "--programs=cpu_profile")
	if ms := e.Scrape(); ms.Value("kernel_exporter_config_up", L("config", "cpu_profile")) != 1 {
		t.Fatalf("config_up{config=cpu_profile} != 1\n%s\n%s", ms.seriesDump("kernel_exporter_config_error_info"), e.Logs())
	}
	w := proftest.Start(t, bin, "getpid", seconds)
	w.Begin()
	elapsed := w.Wait()
	cpu := schedstatSeconds(t, w.PID)
	ms := e.Scrape()
	w.End()

	getpid := []string{"__x64_sys_getpid", "__ia32_sys_getpid", "__do_sys_getpid", "__task_pid_nr_ns"}
	var total, user, served float64
	var rows []string
	for _, m := range ms[metric].GetMetric() {
		labels := map[string]string{}
		for _, lp := range m.GetLabel() {
			labels[lp.GetName()] = lp.GetValue()
		}
		if labels["comm"] != comm {
			continue
		}
		v := m.GetCounter().GetValue()
		total += v
		switch fn := labels["function"]; {
		case fn == "[user]":
			user += v
		case slices.Contains(getpid, fn):
			served += v
		}
		rows = append(rows, fmt.Sprintf("%s %v", labels["function"], v))
	}
	slices.Sort(rows)
	want := cpu * hz
	t.Logf("comm %s: ran %v, %.2f CPU s; %v samples (want %.1f), %v in user mode, %v in getpid's functions: %s",
		comm, elapsed, cpu, total, want, user, served, strings.Join(rows, ", "))
	if slack := math.Max(0.3*want, 6); math.Abs(total-want) > slack {
		t.Errorf("%s{comm=%q} summed to %v samples, want %.1f ± %.1f (%.2f CPU s at %d Hz)", metric, comm, total, want, slack, cpu, hz)
	}
	if total > 0 && (total-user)/total < 0.5 {
		t.Errorf("%v of %v samples in the kernel, want at least half for a getpid() loop", total-user, total)
	}
	if served == 0 {
		t.Errorf("none of %v samples with a leaf in %v, want some", total, getpid)
	}
}

// schedstatSeconds returns the CPU time of process pid's main thread, from
// the first field of /proc/<pid>/schedstat (nanoseconds on a CPU).
func schedstatSeconds(t *testing.T, pid uint32) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) < 1 {
		t.Fatalf("/proc/%d/schedstat: %q", pid, b)
	}
	ns, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil {
		t.Fatalf("/proc/%d/schedstat: %v", pid, err)
	}
	return float64(ns) / 1e9
}

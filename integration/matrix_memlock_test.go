// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/internal/proctest"
	"github.com/kernel-exporter/kernel_exporter/loader"
)

// podCapsEnv makes this test binary a wrapper (podCapsExec) instead of a
// test run.
const podCapsEnv = "KE_POD_CAPS_EXEC"

// podCaps is the Helm chart's capabilities.add (values.yaml; chart_test.go
// checks the list), as containerd gives them to a root container: the
// bounding, permitted and effective sets.
var podCaps = []int{loader.CapBPF, loader.CapPerfmon, loader.CapSysAdmin, loader.CapSyslog, loader.CapDacReadSearch, loader.CapSysResource}

// podMemlock is the hard RLIMIT_MEMLOCK the wrapper sets: 64 KiB, the
// default of the kernels that charge BPF memory to it, which a pod
// inherits from the container runtime and Kubernetes cannot change.
const podMemlock = 64 << 10

// podCapsExec runs as the wrapper when podCapsEnv is set: on one locked
// thread it lowers RLIMIT_MEMLOCK to podMemlock (soft and hard), drops
// every capability outside podCaps from the bounding set, empties the
// inheritable set, and execs its arguments (the exporter and its flags).
// As root the exporter then starts with exactly podCaps, as in the
// chart's pod. It returns only on failure.
func podCapsExec() int {
	runtime.LockOSThread()
	fail := func(what string, err error) int {
		fmt.Fprintf(os.Stderr, "pod-caps wrapper: %s: %v\n", what, err)
		return 1
	}
	if len(os.Args) < 2 {
		return fail("arguments", fmt.Errorf("want the program to run"))
	}
	if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &unix.Rlimit{Cur: podMemlock, Max: podMemlock}); err != nil {
		return fail("setrlimit", err)
	}
	var keep loader.CapSet
	for _, c := range podCaps {
		keep |= 1 << c
	}
	for n := 0; n < 64; n++ {
		if keep.Has(n) {
			continue
		}
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(n), 0, 0, 0); err != nil {
			if err == unix.EINVAL {
				break // past the kernel's last capability
			}
			return fail("drop "+loader.CapName(n)+" from the bounding set", err)
		}
	}
	st, err := loader.CurrentCapabilities()
	if err != nil {
		return fail("capget", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	data := [2]unix.CapUserData{
		{Effective: uint32(st.Effective), Permitted: uint32(st.Permitted)},
		{Effective: uint32(st.Effective >> 32), Permitted: uint32(st.Permitted >> 32)},
	}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fail("capset", err)
	}
	os.Unsetenv(podCapsEnv)
	return fail("exec", syscall.Exec(os.Args[1], os.Args[1:], os.Environ()))
}

// TestMatrixMemlockPodCaps runs the exporter with the chart's pod
// capability set (SYS_RESOURCE included) under a hard RLIMIT_MEMLOCK of
// 64 KiB, as a pod on a node gets it. On a kernel that charges BPF memory
// to RLIMIT_MEMLOCK (before 5.11: Debian 11's 5.10 in make test-kernels)
// the exporter must detect it, raise the limit to unlimited and load;
// on later kernels leave it at 64 KiB and load. Either way timers is up
// and serves series, the exporter has dropped CAP_SYS_RESOURCE at start
// and holds CAP_BPF alone after attach, and the privileged helper's
// worker, which inherits the raised limit, holds the pod's set without
// SYS_RESOURCE (effective and permitted).
func TestMatrixMemlockPodCaps(t *testing.T) {
	_, v, err := loader.KernelRelease()
	if err != nil {
		t.Fatal(err)
	}
	charges := v.Less([3]int{5, 11, 0})
	t.Setenv(podCapsEnv, "1")
	e := startWrapped(t, []string{os.Args[0]}, "--programs=timers")
	pid := exporterPid(t, e)
	waitDropped(t, e)
	ms := e.Scrape()
	if v := ms.Value("kernel_exporter_config_up", L("config", "timers")); v != 1 {
		t.Fatalf("timers is down (reasons %v)\n%s", ms.LabelValues("kernel_exporter_config_error_info", "reason"), e.Logs())
	}
	if n := ms.Series("kernel_timer_starts_total", nil); n == 0 {
		t.Fatalf("timers serves no series\n%s", e.Logs())
	}
	wantLine := fmt.Sprintf("charges_memlock=%v", charges)
	var line string
	for _, l := range strings.Split(e.Logs(), "\n") {
		if strings.Contains(l, "msg=memlock") {
			line = l
		}
	}
	// The pod's set is what this process' bounding set allows: a sandbox
	// whose root lacks CAP_SYS_RESOURCE (this project's CI) gives the
	// exporter none to drop.
	self, err := loader.CurrentCapabilities()
	if err != nil {
		t.Fatal(err)
	}
	held := self.Bounding.Has(loader.CapSysResource)
	if !held {
		t.Logf("this machine's root lacks CAP_SYS_RESOURCE (CapBnd %s): the exporter starts without it", self.Bounding.Hex())
	}
	wantDrop := fmt.Sprintf("cap_sys_resource_dropped=%v", held)
	if !strings.Contains(line, wantLine) || !strings.Contains(line, wantDrop) {
		t.Fatalf("memlock log line %q, want %s and %s\n%s", line, wantLine, wantDrop, e.Logs())
	}
	limits, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		t.Fatal(err)
	}
	var memlock string
	for _, l := range strings.Split(string(limits), "\n") {
		if strings.HasPrefix(l, "Max locked memory") {
			memlock = strings.Join(strings.Fields(l)[3:5], " ")
		}
	}
	want := strconv.Itoa(podMemlock) + " " + strconv.Itoa(podMemlock)
	if charges {
		want = "unlimited unlimited"
	}
	if memlock != want {
		t.Errorf("exporter's RLIMIT_MEMLOCK (soft hard) %q, want %q", memlock, want)
	}
	caps := procCaps(t, fmt.Sprintf("/proc/%d/status", pid))
	if caps["CapEff"] != 1<<capBPF || caps["CapPrm"] != 1<<capBPF {
		t.Errorf("exporter CapEff %016x CapPrm %016x, want CAP_BPF alone", caps["CapEff"], caps["CapPrm"])
	}
	var pod uint64
	for _, c := range podCaps {
		pod |= 1 << c
	}
	pod &= uint64(self.Bounding)
	wantWorker := pod &^ (1 << loader.CapSysResource)
	sup := proctest.Children(pid)
	if len(sup) != 1 {
		t.Fatalf("exporter children %v, want the helper's supervisor", sup)
	}
	workers := proctest.Children(sup[0])
	if len(workers) != 1 {
		t.Fatalf("supervisor children %v, want its worker", workers)
	}
	wcaps := procCaps(t, fmt.Sprintf("/proc/%d/status", workers[0]))
	// The bounding set keeps SYS_RESOURCE (dropping from it needs
	// CAP_SETPCAP, which a pod lacks); no_new_privs keeps it from
	// coming back.
	if wcaps["CapEff"] != wantWorker || wcaps["CapPrm"] != wantWorker || wcaps["NoNewPrivs"] != 1 {
		t.Errorf("helper worker CapEff %016x CapPrm %016x NoNewPrivs %d, want CapEff = CapPrm = %016x (the pod's set without CAP_SYS_RESOURCE), NoNewPrivs 1", wcaps["CapEff"], wcaps["CapPrm"], wcaps["NoNewPrivs"], wantWorker)
	}
	t.Logf("kernel %v: %s; exporter RLIMIT_MEMLOCK %s, CapEff %016x; worker CapEff %016x", v, line, memlock, caps["CapEff"], wcaps["CapEff"])
}

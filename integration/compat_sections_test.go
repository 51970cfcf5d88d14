// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"net"
	"os/exec"
	"testing"
	"time"
)

// TestCompatSections runs testdata/compat/compat_sections, whose programs
// carry their target in the section name as ebpf_exporter's examples do:
// uprobe/<path>:ke_work (built for this run's ke_target),
// perf_event/type=1,config=0,frequency=1000 and xdp/lo, under
// --compat.ebpf-exporter. ke_target calls ke_work(1..50): 50 calls and an
// argument sum of 1275. 200 UDP datagrams to 127.0.0.1:31337 are 200
// udp_test packets on lo. ke_target spinning on CPU 0 gets 1000 ± 25%
// cpu-clock samples per second of CPU time it used.
func TestCompatSections(t *testing.T) {
	const calls, datagrams = 50, 200
	bin := buildProbeTarget(t, t.TempDir(), "-O2")
	e := startCompat(t, "compat_sections", `-DUPROBE_SECTION="uprobe/`+bin+`:ke_work"`)

	startProbeTarget(t, bin, calls).run()
	c, err := net.ListenUDP("udp4", nil)
	if err != nil {
		t.Fatal(err)
	}
	for range datagrams {
		if _, err := c.WriteToUDP([]byte("kernel_exporter compat test"), &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 31337}); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	taskset := probeNeedTool(t, "pin the busy loop to CPU 0", "taskset")
	spin := exec.Command(taskset, "-c", "0", bin, "spin", "1000")
	if out, err := spin.CombinedOutput(); err != nil {
		t.Fatalf("ke_target spin: %v\n%s", err, out)
	}
	cpuTime := (spin.ProcessState.UserTime() + spin.ProcessState.SystemTime()).Seconds()

	var ms Metrics
	Eventually(t, 5*time.Second, func() bool {
		ms = e.Scrape()
		return ms.Value("ebpf_exporter_compat_xdp_packets_total", L("kind", "udp_test")) >= datagrams &&
			ms.Value("ebpf_exporter_compat_uprobe_calls_total", L("what", "calls")) >= calls
	}, "uprobe calls or xdp packets not counted:\n%s%s", e.Scrape().seriesDump("ebpf_exporter_compat_uprobe_calls_total"), e.Scrape().seriesDump("ebpf_exporter_compat_xdp_packets_total"))
	checkCounters(t, ms, "ebpf_exporter_compat_uprobe_calls_total", map[string]float64{
		`what="calls"`: calls, `what="arg_sum"`: calls * (calls + 1) / 2,
	})
	if v := ms.Value("ebpf_exporter_compat_xdp_packets_total", L("kind", "udp_test")); v != datagrams {
		t.Errorf(`ebpf_exporter_compat_xdp_packets_total{kind="udp_test"} = %v, want %d`, v, datagrams)
	}
	samples := ms.Value("ebpf_exporter_compat_perf_samples_total", L("comm", "ke_target"))
	if samples < 750*cpuTime || samples > 1250*cpuTime {
		t.Errorf(`ebpf_exporter_compat_perf_samples_total{comm="ke_target"} = %v for %.3f s of CPU time at 1000 Hz, want %.0f..%.0f`, samples, cpuTime, 750*cpuTime, 1250*cpuTime)
	}
	t.Logf("uprobe: %d calls; xdp/lo: %d datagrams; perf_event: %v samples of ke_target for %.3f s of CPU time", calls, datagrams, samples, cpuTime)
}

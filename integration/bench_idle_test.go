// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkIdle measures the default set at rest: the exporter with its
// default programs (timers, biolatency, runqlat) serves, is scraped 5
// times, and then gets no request for KE_IDLE_SECONDS (default 300). It
// reports RSS-MiB (VmRSS after the scrapes), and the CPU time of the
// exporter's own process (utime + stime of /proc/<pid>/stat, all threads:
// BPF programs run in the kernel on behalf of other tasks and are not in
// it) over the idle time, as cpu-% of one core and cpu-ms, and the same
// from the threads' schedstat, in nanoseconds (sched-cpu-ms). It is a
// benchmark, run by hand (make bench-idle), not a timed test.
func BenchmarkIdle(b *testing.B) {
	if b.N > 1 {
		b.Skip("one run per process: use -benchtime 1x")
	}
	idle := 300 * time.Second
	if v, err := strconv.Atoi(os.Getenv("KE_IDLE_SECONDS")); err == nil && v > 0 {
		idle = time.Duration(v) * time.Second
	}
	p := startBenchProcess(b, binary)
	client := &http.Client{Timeout: time.Minute}
	for range 5 {
		resp, err := client.Get(p.url + "/metrics")
		if err != nil {
			b.Fatalf("%v\n%s", err, p.logs)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	client.CloseIdleConnections()
	pid := p.cmd.Process.Pid
	b.ReportMetric(float64(statusKB(b, pid, "VmRSS"))/1024, "RSS-MiB")
	start, t0 := cpuTicks(b, pid), time.Now()
	ns, _ := cpuTime(b, pid)
	time.Sleep(idle)
	ticks, took := cpuTicks(b, pid)-start, time.Since(t0)
	ns1, _ := cpuTime(b, pid)
	cpu := ns1 - ns
	// USER_HZ is 100 on Linux (sysconf(_SC_CLK_TCK)): a tick is 10 ms.
	b.ReportMetric(float64(ticks*10), "cpu-ms")
	b.ReportMetric(float64(ticks*10)*float64(time.Millisecond)/float64(took)*100, "cpu-%")
	b.ReportMetric(float64(cpu)/float64(time.Millisecond), "sched-cpu-ms")
	b.ReportMetric(float64(statusKB(b, pid, "VmRSS"))/1024, "RSS-end-MiB")
}

// BenchmarkStartup measures the time from exec to the first scrape
// answered with status 200, polling every 2 ms, with the default programs
// (issue 5's bound: 300 ms on the 2-CPU machine kind). Each iteration is a
// new process, stopped before the next; ns/op is the mean, and fastest-ms
// and slowest-ms the extremes. It is a benchmark, run by hand (make
// bench-startup), not a timed test.
func BenchmarkStartup(b *testing.B) {
	var fastest, slowest time.Duration
	for i := 0; b.Loop(); i++ {
		d, p := timeStartup(b)
		b.StopTimer()
		p.stop()
		if i == 0 || d < fastest {
			fastest = d
		}
		slowest = max(slowest, d)
		b.StartTimer()
	}
	b.ReportMetric(float64(fastest)/float64(time.Millisecond), "fastest-ms")
	b.ReportMetric(float64(slowest)/float64(time.Millisecond), "slowest-ms")
}

// cpuTicks returns utime + stime of a process (all its threads), in clock
// ticks.
func cpuTicks(b *testing.B, pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The command name, in parentheses, may hold spaces: fields count
	// from the last ')'. utime and stime are fields 14 and 15.
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		b.Fatalf("/proc/%d/stat: %q", pid, s)
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("/proc/%d/stat: %q", pid, s)
	}
	return u + st
}

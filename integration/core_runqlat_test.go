// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// busyOnOneCPU starts n shell busy loops pinned to one CPU (the first the
// test may run on) and returns a function that kills them. They are also
// killed at test cleanup.
func busyOnOneCPU(t *testing.T, n int) (stop func()) {
	t.Helper()
	var allowed, one unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		t.Fatalf("sched_getaffinity: %v", err)
	}
	cpu := 0
	for !allowed.IsSet(cpu) {
		cpu++
	}
	one.Set(cpu)
	var cmds []*exec.Cmd
	stop = func() {
		for _, c := range cmds {
			if c.ProcessState == nil {
				_ = c.Process.Kill()
				_ = c.Wait()
			}
		}
	}
	t.Cleanup(stop)
	for range n {
		c := exec.Command("sh", "-c", "while :; do :; done")
		if err := c.Start(); err != nil {
			t.Fatalf("start busy loop: %v", err)
		}
		cmds = append(cmds, c)
		if err := unix.SchedSetaffinity(c.Process.Pid, &one); err != nil {
			t.Fatalf("pin busy loop %d to CPU %d: %v", c.Process.Pid, cpu, err)
		}
	}
	return stop
}

// TestRunQueueLatency pins two busy loops to one CPU for 2 s: each spends
// about half the time runnable but waiting for the other's time slice, so
// the run-queue latency histogram must gain many observations above 1 ms.
//
// Lower bound: the scheduler preempts a CPU hog once its slice is used up,
// which takes at least a base slice (0.75 ms × (1 + log2 CPUs)) and in
// practice up to a scheduler tick; every switch between the two loops makes
// the other one wait about that long, >1 ms. Measured on the 2-CPU
// development VM (Linux 6.18): +530 and +602 observations above
// le=0.001048576 s in 2 s (one every ~3.5 ms), out of +1483 and +3827 in
// total. 100 leaves a wide margin for a slow or noisy machine.
func TestRunQueueLatency(t *testing.T) {
	const (
		metric   = "kernel_run_queue_latency_seconds"
		minAbove = 100
	)
	e := Start(t, "--programs=runqlat")
	c0, a0, le := e.Scrape().histAbove(metric, nil, 1e-3)
	stop := busyOnOneCPU(t, 2)
	time.Sleep(2 * time.Second)
	stop()
	var c1, a1 uint64
	Eventually(t, 5*time.Second, func() bool {
		c1, a1, _ = e.Scrape().histAbove(metric, nil, 1e-3)
		return a1-a0 >= minAbove
	}, "%s: %d observations above le=%v after 2 s of two busy loops on one CPU, want >= %d", metric, a1-a0, le, minAbove)
	if c1-c0 < a1-a0 {
		t.Errorf("%s: count moved by %d, less than the %d observations above %v", metric, c1-c0, a1-a0, le)
	}
	t.Logf("%s: count +%d, above le=%v s: +%d", metric, c1-c0, le, a1-a0)
}

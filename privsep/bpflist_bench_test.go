// SPDX-License-Identifier: Apache-2.0

package privsep

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/internal/testenv"
)

// procCPU returns the user and system CPU time of pid (/proc/<pid>/stat,
// in clock ticks of 10 ms).
func procCPU(b *testing.B, pid int) time.Duration {
	b.Helper()
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	ut, _ := strconv.ParseUint(f[11], 10, 64)
	st, _ := strconv.ParseUint(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// BenchmarkListBPF lists the host's BPF objects through the real helper
// with 100 and 1000 more programs (each with a map) loaded: the round trip
// a scrape of the host BPF collector pays (the worker's listing, the
// memfd, Decode). ns/op is the wall time; cpu-ns/op the exporter side's
// CPU, helper-cpu-ns/op the worker's (both user and system).
func BenchmarkListBPF(b *testing.B) {
	if os.Geteuid() != 0 {
		testenv.SkipOrFail(b, "needs root for the helper's capabilities")
	}
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("programs=%d", n), func(b *testing.B) {
			for i := 0; i < n; i++ {
				m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Hash, KeySize: 4, ValueSize: 8, MaxEntries: 64})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { m.Close() })
				p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "ke_bench", Type: ebpf.SocketFilter, License: "GPL",
					Instructions: asm.Instructions{asm.LoadMapPtr(asm.R1, m.FD()), asm.Mov.Imm(asm.R0, 0), asm.Return()}})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { p.Close() })
			}
			c, err := Start(Options{Path: os.Args[0], Stderr: io.Discard, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			l, err := c.ListBPF(context.Background()) // loads the holders iterator
			if err != nil {
				b.Fatal(err)
			}
			worker := c.Pid()
			var ru0 unix.Rusage
			_ = unix.Getrusage(unix.RUSAGE_SELF, &ru0)
			w0 := procCPU(b, worker)
			for b.Loop() {
				if _, err := c.ListBPF(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
			var ru1 unix.Rusage
			_ = unix.Getrusage(unix.RUSAGE_SELF, &ru1)
			self := time.Duration(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()) / time.Duration(b.N)
			b.ReportMetric(float64(self), "cpu-ns/op")
			b.ReportMetric(float64((procCPU(b, worker)-w0)/time.Duration(b.N)), "helper-cpu-ns/op")
			b.ReportMetric(float64(len(l.Programs)), "programs")
		})
	}
}

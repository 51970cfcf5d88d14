// SPDX-License-Identifier: Apache-2.0

package profile

// BenchmarkProfileCost measures what a CPU profile of the whole host costs
// at 19 and 99 Hz (make bench-profile; root):
//
//	KE_PROFILE_SECONDS=30 go test -run '^$' -bench ProfileCost -benchtime 1x ./profile/
//
// Two workload processes burn both CPUs for the whole run, so that every
// sample lands on a task (the idle tasks' samples are dropped at the start
// of the BPF program, so an idle host costs less). KE_PROFILE_SCOPE=host
// (the default) profiles every process of the host as well: on a machine
// where builds start new binaries all the time, reading their symbols is
// most of the cost; KE_PROFILE_SCOPE=workload keeps only the two
// workload processes (--pid), the cost on a host whose binaries do not
// change (the BPF program still runs, and returns at once, for the other
// processes' samples). Each sub-benchmark takes two profiles of
// KE_PROFILE_SECONDS (default 20) with one Symbolizer, as the server does:
// "cold" reads kallsyms and every ELF file for the first time, "warm"
// finds them cached. Reported, per profile:
//
//	bpf-ns/sample   BPF run time per program run (kernel.bpf_stats_enabled
//	                through BPF_ENABLE_STATS while the profile runs)
//	bpf-%cpu        BPF run time over wall time, in percent of one CPU
//	user-%cpu       this process's CPU time (getrusage: reading the maps,
//	                resolving and aggregating the stacks) over wall time
//	total-%cpu      the two together: the cost of profiling
//	samples/s       samples counted
//	rss-added-MiB   peak resident memory (VmHWM, reset before) above the
//	                resident memory before the profile
//	user-resolved-% share of user frames resolved to a function
//	elf-read-%cpu   CPU time spent reading ELF symbol tables not cached
//	                (new files: on this shared machine, the other builds'
//	                fresh binaries), in percent of the profile's length
//	                (part of user-%cpu)
//	elf-files/s     such files read per second

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/internal/proftest"
	"github.com/kernel-exporter/kernel_exporter/profile/symbolize"
)

func BenchmarkProfileCost(b *testing.B) {
	needRoot(b)
	secs := 20
	if s, err := strconv.Atoi(os.Getenv("KE_PROFILE_SECONDS")); err == nil && s > 0 {
		secs = s
	}
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		b.Fatalf("BPF_ENABLE_STATS: %v", err)
	}
	defer stats.Close()
	for _, hz := range []int{19, 99} {
		b.Run(fmt.Sprintf("%dHz", hz), func(b *testing.B) {
			sym := symbolize.New(symbolize.Options{})
			for _, phase := range []string{"cold", "warm"} {
				b.Run(phase, func(b *testing.B) {
					for range b.N {
						measureProfile(b, hz, time.Duration(secs)*time.Second, sym)
					}
				})
			}
		})
	}
}

func measureProfile(b *testing.B, hz int, d time.Duration, sym *symbolize.Symbolizer) {
	var burners []*proftest.Workload
	for range runtime.NumCPU() {
		w := startWorkload(b, "burn", "0.5", strconv.Itoa(int(d/time.Second)+5))
		w.Begin()
		burners = append(burners, w)
	}
	runtime.GC()
	debug.FreeOSMemory()
	rss0 := statusKiB(b, "VmRSS")
	// Reset VmHWM to the current RSS (proc(5): clear_refs 5).
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		b.Fatalf("reset VmHWM: %v", err)
	}
	var runTime time.Duration
	var runs uint64
	var f Filter
	if os.Getenv("KE_PROFILE_SCOPE") == "workload" {
		for _, w := range burners {
			f.PIDs = append(f.PIDs, w.PID)
		}
	}
	s, err := NewSession(Options{Kind: CPU, Duration: d, Frequency: hz, Symbolizer: sym, Filter: f})
	if err != nil {
		b.Fatal(err)
	}
	// The program's statistics, read after every interval (it is closed
	// when Run returns).
	s.o.OnInterval = func(*Profile) {
		for _, p := range s.Programs() {
			if st, err := p.Stats(); err == nil {
				runTime, runs = st.Runtime, st.RunCount
			}
		}
	}
	var ru0, ru1 unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &ru0)
	start := time.Now()
	p, err := s.Run(context.Background())
	wall := time.Since(start)
	_ = unix.Getrusage(unix.RUSAGE_SELF, &ru1)
	if err != nil {
		b.Fatal(err)
	}
	hwm := statusKiB(b, "VmHWM")
	for _, w := range burners {
		w.End()
	}
	cpu := time.Duration(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()) * time.Nanosecond
	bpfPct := 100 * runTime.Seconds() / wall.Seconds()
	userPct := 100 * cpu.Seconds() / wall.Seconds()
	if runs > 0 {
		b.ReportMetric(float64(runTime.Nanoseconds())/float64(runs), "bpf-ns/sample")
	}
	b.ReportMetric(bpfPct, "bpf-%cpu")
	b.ReportMetric(userPct, "user-%cpu")
	b.ReportMetric(bpfPct+userPct, "total-%cpu")
	b.ReportMetric(float64(p.Stats.Samples)/wall.Seconds(), "samples/s")
	b.ReportMetric(float64(hwm-rss0)/1024, "rss-added-MiB")
	b.ReportMetric(100*p.Stats.Symbols.FileReadTime.Seconds()/wall.Seconds(), "elf-read-%cpu")
	b.ReportMetric(float64(p.Stats.Symbols.FilesRead)/wall.Seconds(), "elf-files/s")
	if u := p.Stats.Symbols.UserFrames; u > 0 {
		b.ReportMetric(100*float64(p.Stats.Symbols.UserResolved)/float64(u), "user-resolved-%")
	}
	b.Logf("%s; BPF %v in %d runs; process CPU %v over %v; RSS %d KiB before, peak %d KiB", Summary(p), runTime, runs, cpu, wall.Round(time.Millisecond), rss0, hwm)
}

// statusKiB returns a "<field>: <n> kB" line of /proc/self/status.
func statusKiB(b *testing.B, field string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				b.Fatalf("%s: %v", field, err)
			}
			return n
		}
	}
	b.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// SPDX-License-Identifier: Apache-2.0

package bpfstats

import (
	"os"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/internal/testenv"
)

// TestStatsProbe: while this test holds BPF_ENABLE_STATS, the kernel
// counts every run of the probe (within the runs in flight); the probe
// runs about every ProbePeriod on each CPU.
func TestStatsProbe(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.SkipOrFail(t, "needs root to load the probe")
	}
	p, err := NewStatsProbe()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		t.Fatal(err)
	}
	k0, o0, slack, err := p.Read()
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	k1, o1, _, err := p.Read()
	stats.Close()
	if err != nil {
		t.Fatal(err)
	}
	dk, do := k1-k0, o1-o0
	st, _ := p.prog.Stats()
	t.Logf("statistics on for 1 s: the kernel counted %d runs of the probe, the probe %d (%d CPUs); %v of run time in %d runs since load",
		dk, do, p.cpus, st.Runtime, st.RunCount)
	if want := uint64(p.cpus) * uint64(time.Second/ProbePeriod); do < want/2 || do > 2*want {
		t.Errorf("the probe ran %d times in 1 s on %d CPUs, want about %d", do, p.cpus, want)
	}
	if dk+slack < do || do+slack < dk {
		t.Errorf("statistics on: the kernel counted %d runs, the probe %d: want equal within %d", dk, do, slack)
	}
}

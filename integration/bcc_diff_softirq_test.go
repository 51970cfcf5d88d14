// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestDiffSoftirq compares the softirq program with Debian's libbpf-tools
// softirqs -d on the same softirqs, over the same window, during a loopback
// packet storm (UDP datagrams of 16 bytes to 32 KiB sent as fast as two
// threads can, in a private network namespace, received by a third: each
// one raises and runs NET_RX on the sending CPU), and both with the
// kernel's own count.
//
// What both measure is the service time of each vector's handler, from
// softirq_entry to softirq_exit: that is compared per vector, totals for
// every vector and bucket by bucket (issue 24's criteria, compareHist) for
// NET_RX, the storm's, with runs under 4,096 ns as one bucket. softirqs
// runs twice, attached before and after the exporter, because two programs
// on the same events read the clock apart by what the programs between
// their timestamps cost (see compareHist): with datagrams of one size,
// whose NET_RX runs all took about 2 µs, 15% of all runs fell on the other
// side of the 2,048 ns edge between softirqs attached before ours and
// ours, hence datagrams of every size. The criteria are required against
// the instance attached after ours: the one before puts its softirq_entry
// program (a map update through a helper, slow when its cache lines are
// cold, as after the timer interrupt that raises TIMER, RCU and SCHED)
// between our two timestamps, which moved 10-20% of those vectors' runs
// across microsecond edges; that comparison is logged. It runs with -N, nanosecond
// slots, whose edges are ours one slot down (nsecsShift), where its
// microsecond slots would be 2.4% off ours (usecsShift). softirqs clamps
// at its 20th slot (2^19 ns, 524 µs), so ours above that is compared in
// one bucket. What ours measured besides, the raise-to-entry latency, is
// the softirq_raise program's, which no libbpf-tools tool measures; it is
// checked against the kernel's count by TestMatrixSoftirqRaise.
//
// /proc/softirqs counts each handler run where softirq_entry fires: read
// at each mark of the first softirqs, its per-vector delta over the window
// must match ours within max(3 + CPUs, 2%) (a run in flight per CPU at each
// end, and the few milliseconds between the tool's read, our scrape and
// the read of /proc/softirqs). softirqs must not count more than that
// (the window would be wrong); a softirqs below it lost runs, which is
// logged: the test fails only when ours is wrong.
func TestDiffSoftirq(t *testing.T) {
	const (
		metric    = "kernel_softirq_duration_seconds"
		stressFor = 5 * time.Second
		slots     = 20 // softirqs' MAX_SLOTS
	)
	readProc := func() (any, error) { return readProcSoftirqs() }
	_, before, after := startAround(t, "softirq", readProc, "softirqs", "-d", "-N", "-T", "1")
	runs := []*scrapedRun{before, after}
	a := nextMarks(t, runs...)
	sent := udpStorm(t, stressFor)
	b := nextMarks(t, runs...)
	t.Logf("loopback storm: %d datagrams in %v", sent, stressFor)

	var ours, refs [2]map[string][]uint64
	var procDelta map[string]uint64
	for i, r := range runs {
		ma, mb, xa, xb, tables := r.window(t, a[i], b[i])
		ours[i], refs[i] = map[string][]uint64{}, map[string][]uint64{}
		theirs := parseLog2Tables(t, tables)
		for _, vec := range softirqVectors {
			want := L("vector", vec)
			ours[i][vec] = alignOurs(subSlots(t, mb.expSlots(t, metric, want), ma.expSlots(t, metric, want)), slots, nsecsShift)
			refs[i][vec] = alignRef(theirs[strings.ToLower(vec)], slots)
		}
		for name := range theirs {
			if !containsWord(strings.ToUpper(strings.Join(softirqVectors, " ")), strings.ToUpper(name)) {
				t.Errorf("softirqs printed a vector %q that is not one of %v", name, softirqVectors)
			}
		}
		if i == 0 {
			pa, pb := xa.(map[string]uint64), xb.(map[string]uint64)
			procDelta = map[string]uint64{}
			for vec, n := range pb {
				procDelta[vec] = n - pa[vec]
			}
		}
	}
	cpus := float64(runtime.NumCPU())
	for _, vec := range softirqVectors {
		var total [2]uint64
		for k := range 2 {
			for _, n := range ours[k][vec] {
				total[k] += n
			}
		}
		var ref uint64
		for _, n := range refs[0][vec] {
			ref += n
		}
		if total[0]+total[1]+ref == 0 && procDelta[vec] == 0 {
			continue
		}
		// Bucket by bucket: the storm's vector, against softirqs attached
		// after ours (see the doc comment); the others are logged.
		storm := vec == "NET_RX"
		compareHist(t, "softirq "+vec+" service time, ours against softirqs -d -N", nsecsHist(slots),
			[2][]uint64{ours[0][vec], ours[1][vec]}, [2][]uint64{refs[0][vec], refs[1][vec]}, 4096, [2]bool{false, storm})
		p := procDelta[vec]
		allowed := math.Max(3+cpus, 0.02*float64(p))
		t.Logf("%s: /proc/softirqs +%d, ours +%d, softirqs +%d (window of the first softirqs)", vec, p, total[0], ref)
		if math.Abs(float64(total[0])-float64(p)) > allowed || float64(ref) > float64(p)+allowed {
			t.Errorf("%s: /proc/softirqs counted %d runs, ours %d, softirqs %d: not within max(%.0f, 2%%)", vec, p, total[0], ref, 3+cpus)
		} else if float64(ref) < float64(p)-allowed {
			// The kernel's count is the truth: a softirqs below it lost
			// runs, which is the peer's fault, not ours.
			t.Logf("%s: softirqs counted %d runs, below /proc/softirqs' %d by more than max(%.0f, 2%%): softirqs lost %d", vec, ref, p, 3+cpus, p-ref)
		}
	}
	if procDelta["NET_RX"] < 10000 {
		t.Errorf("the storm ran only %d NET_RX softirqs in the window", procDelta["NET_RX"])
	}
}

// udpStorm sends UDP datagrams over the loopback of a private network
// namespace from two threads, received by a third, for d, and returns how
// many were sent.
func udpStorm(t *testing.T, d time.Duration) uint64 {
	t.Helper()
	ns := newNetns(t)
	var rx int
	var tx [2]int
	inNetns(t, ns, func() (err error) {
		if rx, err = udpSocket(t, loopback4(0)); err != nil {
			return err
		}
		for i := range tx {
			if tx[i], err = udpSocket(t, loopback4(0)); err != nil {
				return err
			}
		}
		return nil
	})
	port, err := localPort(rx)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.SetsockoptTimeval(rx, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 100000}); err != nil {
		t.Fatal(err)
	}
	var sent atomic.Uint64
	send := func(fd int) func() error {
		buf := make([]byte, 32<<10)
		to := loopback4(port)
		return func() error {
			for i := range 1000 {
				// Sizes from 16 bytes to 32 KiB (12 octaves, and a few
				// bytes more or less): NET_RX runs of every length, so
				// that no bucket edge holds a large share.
				size := min(16<<(i%12)+(i*7919)%(16<<(i%12)), len(buf))
				// A full receive buffer drops the datagram: still a NET_RX run.
				if err := unix.Sendto(fd, buf[:size], 0, to); err != nil && !errors.Is(err, unix.ENOBUFS) {
					return fmt.Errorf("sendto: %w", err)
				}
			}
			sent.Add(1000)
			return nil
		}
	}
	buf := make([]byte, 64<<10)
	receive := func() error {
		if _, _, err := unix.Recvfrom(rx, buf, 0); err != nil && !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("recvfrom: %w", err)
		}
		return nil
	}
	if err := storm(d, send(tx[0]), send(tx[1]), receive); err != nil {
		t.Fatal(err)
	}
	return sent.Load()
}

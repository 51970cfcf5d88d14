// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestTermHist runs kernel_exporter hist biolatency --interval 1s in a tmux
// pane while the test writes then reads 200 blocks of 64 KiB with
// O_DIRECT. Every table has bcc's layout (parseHist checks ranges and bar
// lengths); the counts of the write and read tables of the file's disk,
// over every interval printed, add up to at least the syscalls made (less
// 1% for the completions the kernel runs without the BPF program, see
// TestBioLatencyDirectIO) and to at most the requests the kernel completed
// on that disk from before the command started to after it exited. C-c
// ends it with status 0 and no program of it stays loaded.
func TestTermHist(t *testing.T) {
	const blocks, block = 200, 64 << 10
	dir := ioTempDir(t)
	disk, err := diskOf(dir)
	if err != nil {
		t.Fatal(err)
	}
	r0, w0 := diskStat(disk)
	p := startTmux(t, "hist", "biolatency", "--interval", "1s")
	headers := func(s string) int {
		n := 0
		for _, l := range strings.Split(s, "\n") {
			if histTimeRe.MatchString(l) {
				n++
			}
		}
		return n
	}
	p.waitFor(60*time.Second, true, "first interval", func(s string) bool { return headers(s) >= 1 })
	held := p.held()
	writes, reads := directIO(t, dir, blocks, block)
	n := headers(p.screen(true))
	// The interval holding the last I/O is printed at the next tick.
	p.waitFor(5*time.Second, true, "two more intervals", func(s string) bool { return headers(s) >= n+2 })
	if code := p.interrupt(); code != 0 {
		t.Errorf("exit status %d after C-c, want 0\n%s", code, p.screen(false))
	}
	r1, w1 := diskStat(disk)
	out := p.screen(true)
	sums := map[string]int{}
	for _, tb := range parseHist(t, out) {
		if tb.device == disk {
			for _, c := range tb.counts {
				sums[tb.op] += c
			}
		}
	}
	for _, c := range []struct {
		op       string
		syscalls int
		kernel   uint64
	}{{"write", writes, w1 - w0}, {"read", reads, r1 - r0}} {
		t.Logf("%s %s: %d syscalls, %d counted in the tables, %d requests completed by the kernel meanwhile", disk, c.op, c.syscalls, sums[c.op], c.kernel)
		if sums[c.op] < c.syscalls-c.syscalls/100 || uint64(sums[c.op]) > c.kernel {
			t.Errorf("%s %s: the tables count %d, want %d O_DIRECT syscalls (less 1%%) to %d (the kernel's requests)", disk, c.op, sums[c.op], c.syscalls, c.kernel)
		}
	}
	if !strings.Contains(out, "     usecs               : count     distribution") {
		t.Errorf("no bcc column header in the output:\n%s", out)
	}
	if t.Failed() {
		t.Logf("output:\n%s", out)
	}
	logFrame(t, "hist", out)
	checkNothingLeft(t, dumpRun{held: held}, nil)
}

// TestTermTop runs kernel_exporter top syscalls --interval 1s in a tmux
// pane while the test makes 3,000 failing chdir calls a second (a missing
// directory: ENOENT) for 5 s. A frame redrawn in place fits the 40-row
// pane, starts with its header, and shows the row of
// kernel_syscall_errors_total{syscall="chdir",errno="ENOENT"} at 3,000/s
// ±33% in some frame; then it makes 2,000 at once right after a frame is
// drawn: the next frame shows them (rate 2,000/s ±33%), with a total that
// is every call made (up to 5 more from elsewhere). C-c leaves the alternate screen, exits with
// status 0 and no program of it stays loaded.
func TestTermTop(t *testing.T) {
	const (
		perTick = 300
		tick    = 100 * time.Millisecond
		ticks   = 50
		burst   = 2000
		rate    = perTick * int(time.Second/tick)
	)
	p := startTmux(t, "top", "syscalls", "--interval", "1s")
	header := regexp.MustCompile(`^kernel_exporter top syscalls  interval 1s  \d\d:\d\d:\d\d  \d+ series$`)
	p.waitFor(60*time.Second, false, "first frame", func(s string) bool { return header.MatchString(strings.SplitN(s, "\n", 2)[0]) })
	held := p.held()

	row := regexp.MustCompile(`(?m)^ +([\d.]+) +(\d+)  kernel_syscall_errors_total +syscall=chdir errno=ENOENT$`)
	missing := t.TempDir() + "/missing"
	done := make(chan int)
	go func() {
		calls := 0
		tk := time.NewTicker(tick)
		defer tk.Stop()
		for range ticks {
			<-tk.C
			for range perTick {
				if err := unix.Chdir(missing); err != unix.ENOENT {
					panic("chdir of a missing directory: " + err.Error())
				}
				calls++
			}
		}
		done <- calls
	}()
	var rates []float64
	var frame string
	var calls int
	for driving := true; driving; {
		select {
		case calls = <-done:
			driving = false
		case <-time.After(700 * time.Millisecond):
			s := p.screen(false)
			if m := row.FindStringSubmatch(s); m != nil {
				r, _ := strconv.ParseFloat(m[1], 64)
				if len(rates) == 0 || r != rates[len(rates)-1] {
					rates = append(rates, r)
				}
				if r > 0 {
					frame = s
				}
			}
		}
	}
	// A last burst right after a frame is drawn: the next frame shows it
	// high in the list, with a total that holds every call.
	first := func(s string) string { return strings.SplitN(s, "\n", 2)[0] }
	drawn := first(p.screen(false))
	drawn = first(p.waitFor(5*time.Second, false, "new frame", func(s string) bool { return first(s) != drawn }))
	for range burst {
		if err := unix.Chdir(missing); err != unix.ENOENT {
			t.Fatalf("chdir of a missing directory: %v", err)
		}
	}
	calls += burst
	last := p.waitFor(5*time.Second, false, "new frame", func(s string) bool { return first(s) != drawn })
	lines := strings.Split(last, "\n")
	if !header.MatchString(lines[0]) || len(lines) > 40 || !strings.HasPrefix(lines[len(lines)-1], "... ") {
		t.Errorf("frame: %d lines, first %q, last %q: want the header first, at most 40 lines, and the count of rows left out last\n%s", len(lines), lines[0], lines[len(lines)-1], last)
	}
	if !strings.Contains(last, "    RATE/s         TOTAL  METRIC") {
		t.Errorf("no column header in the frame:\n%s", last)
	}
	plausible := false
	for _, r := range rates {
		plausible = plausible || (r >= float64(rate)*2/3 && r <= float64(rate)*4/3)
	}
	t.Logf("chdir ENOENT: %d calls at %d/s, then %d at once; rates shown %v", calls-burst, rate, burst, rates)
	if !plausible {
		t.Errorf("no frame showed chdir ENOENT at %d/s ±33%%: rates %v\n%s", rate, rates, frame)
	}
	m := row.FindStringSubmatch(last)
	if m == nil {
		t.Fatalf("the frame after the burst has no chdir ENOENT row:\n%s", last)
	}
	if total, _ := strconv.Atoi(m[2]); total < calls || total > calls+5 {
		t.Errorf("chdir ENOENT total %d in the frame after the burst, want the %d calls made (up to 5 more)", total, calls)
	}
	if r, _ := strconv.ParseFloat(m[1], 64); r < burst*2/3 || r > burst*4/3 {
		t.Errorf("chdir ENOENT rate %v in the frame after the burst, want %d ±33%% (%d calls in a 1 s interval)", r, burst, burst)
	}
	if code := p.interrupt(); code != 0 {
		t.Errorf("exit status %d after C-c, want 0", code)
	}
	if after := p.screen(false); strings.Contains(after, "kernel_exporter top syscalls") {
		t.Errorf("after C-c the pane still shows the frame (alternate screen not left):\n%s", after)
	}
	logFrame(t, "top", frame)
	checkNothingLeft(t, dumpRun{held: held}, nil)
}

// TestTermHistKillSession kills the tmux session of a running hist (its
// process gets SIGHUP, as when a terminal is closed): no program of it
// stays loaded.
func TestTermHistKillSession(t *testing.T) {
	p := startTmux(t, "hist", "biolatency.bio_latency_seconds", "--interval", "100ms")
	p.waitFor(60*time.Second, true, "first interval", func(s string) bool { return strings.Contains(s, " kernel_bio_latency_seconds\n") })
	held := p.held()
	p.run("kill-session", "-t", "term")
	checkNothingLeft(t, dumpRun{held: held}, nil)
}

// logFrame logs a captured frame, for docs/terminal.md.
func logFrame(t *testing.T, what, frame string) {
	t.Logf("captured %s frame:\n%s", what, frame)
}

// TestTermHistRunqlatUsecs (issue 31): docs/terminal.md said hist runqlat
// prints usecs as bcc's runqlat does, but it printed nsecs. One interval
// of hist runqlat, with two busy loops on one CPU, is headed usecs (no
// nsecs anywhere), its rows' bounds are runqlat's 2^k ns buckets in µs
// (1.024 -> 2.048 ...), and they count the run-queue waits.
func TestTermHistRunqlatUsecs(t *testing.T) {
	stop := busyOnOneCPU(t, 2)
	defer stop()
	stdout, stderr, code := runExporter(t, "hist", "runqlat", "--interval=1s", "--count=1")
	if code != 0 {
		t.Fatalf("hist runqlat: exit %d\n%s", code, stderr)
	}
	if !strings.Contains(stdout, "     usecs               : count     distribution") || strings.Contains(stdout, "nsecs") {
		t.Errorf("hist runqlat is not headed usecs, as bcc's runqlat:\n%s", stdout)
	}
	row := regexp.MustCompile(`^\s*([0-9.]+) -> ([0-9.]+|inf)\s+: (\d+)\s+\|`)
	total, rows := 0, 0
	for _, line := range strings.Split(stdout, "\n") {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		rows++
		lo, _ := strconv.ParseFloat(m[1], 64)
		if ns := uint64(math.Round(lo * 1000)); lo > 0 && (math.Abs(lo*1000-float64(ns)) > 1e-6 || ns&(ns-1) != 0) {
			t.Errorf("row %q: low bound %v µs is not a power of two of nanoseconds", line, lo)
		}
		n, _ := strconv.Atoi(m[3])
		total += n
	}
	if rows == 0 || total < 100 {
		t.Errorf("hist runqlat: %d rows counting %d waits in 1 s of two busy loops on one CPU, want >= 100:\n%s", rows, total, stdout)
	}
	t.Logf("hist runqlat: %d rows, %d waits\n%s", rows, total, stdout)
}

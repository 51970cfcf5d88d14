// SPDX-License-Identifier: Apache-2.0

package term

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/kernel-exporter/kernel_exporter/bpfstats"
)

// fakeView counts its calls and fails at frame failAt (0: never).
type fakeView struct {
	baselines, frames, failAt int
	elapsed                   []time.Duration
}

func (v *fakeView) Baseline() error { v.baselines++; return nil }

func (v *fakeView) Frame(w io.Writer, now time.Time, elapsed time.Duration, height, width int) error {
	v.frames++
	v.elapsed = append(v.elapsed, elapsed)
	if v.frames == v.failAt {
		return errors.New("gone \x1b[2J")
	}
	_, err := fmt.Fprintf(w, "frame %d\n", v.frames)
	return err
}

// TestRedraw checks the redraw loop off a terminal: a baseline, then
// --count frames separated by blank lines, each with the time since the
// previous one; a view's error ends it with ExitFailed and a printable
// line on stderr.
func TestRedraw(t *testing.T) {
	var out, errs strings.Builder
	clock := time.Unix(100, 0)
	now := func() time.Time { clock = clock.Add(time.Second); return clock }
	v := &fakeView{}
	code := Redraw(context.Background(), RedrawOptions{Name: "fake", Interval: MinInterval, Count: 3, Stdout: &out, Stderr: &errs, Now: now}, v)
	if code != ExitOK || v.baselines != 1 || v.frames != 3 || out.String() != "frame 1\n\nframe 2\n\nframe 3\n" {
		t.Errorf("exit %d, %d baselines, %d frames, output %q", code, v.baselines, v.frames, out.String())
	}
	for _, e := range v.elapsed {
		if e != time.Second {
			t.Errorf("elapsed %v, want the 1 s between two reads of the clock", e)
		}
	}
	v = &fakeView{failAt: 2}
	errs.Reset()
	code = Redraw(context.Background(), RedrawOptions{Name: "fake", Interval: MinInterval, Count: 3, Stdout: io.Discard, Stderr: &errs}, v)
	if code != ExitFailed || errs.String() != "kernel_exporter top fake: gone \\x1b[2J\n" {
		t.Errorf("failing view: exit %d, stderr %q", code, errs.String())
	}
}

// TestWriteBPF checks top bpf's frame: the title with the total CPU,
// aligned columns, "-" for a program without runs or owner, values made
// printable, and rows cut to the height with a count of the rest.
func TestWriteBPF(t *testing.T) {
	usage := []bpfstats.ProgramUsage{
		{ID: 57, Name: "spin", Type: "tracepoint", Owner: "spinner", Runs: 10000, PerSecond: 10000, NsPerRun: 2507, CPU: 0.02507},
		{ID: 1234, Name: "cil_from_netdev", Type: "sched_cls", Owner: "evil\x1b[31m", Runs: 3, PerSecond: 3, NsPerRun: 100, CPU: 3e-7},
		{ID: 9, Name: "idle", Type: "xdp"},
	}
	var b strings.Builder
	if err := WriteBPF(&b, time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC), time.Second, usage, 0, 24, 0); err != nil {
		t.Fatal(err)
	}
	want := `kernel_exporter top bpf  15:04:05  interval 1s  3 programs  BPF: 2.51% of one CPU
  ID  PROGRAM          TYPE        OWNER         EVENTS/s  NS/EVENT  CPU%
  57  spin             tracepoint  spinner          10000      2507  2.51
1234  cil_from_netdev  sched_cls   evil\x1b[31m         3       100  0.00
   9  idle             xdp         -                    0         -  0.00
`
	if b.String() != want {
		t.Errorf("frame:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	WriteBPF(&b, time.Unix(0, 0), time.Second, usage, 2, 4, 0)
	if !strings.Contains(b.String(), "5 programs  BPF: 2.51% of one CPU  (2 not listed)") {
		t.Errorf("title with 2 programs not listed:\n%s", b.String())
	}
	b.Reset()
	WriteBPF(&b, time.Unix(0, 0), time.Second, usage, 2, 4, 30)
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 4 || lines[3] != "... 2 more" {
		t.Errorf("frame of height 4 with 2 programs not listed:\n%s", b.String())
	}
	for _, l := range lines {
		if len([]rune(l)) > 30 {
			t.Errorf("line of %d runes over a width of 30: %q", len([]rune(l)), l)
		}
	}
}

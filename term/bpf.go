// SPDX-License-Identifier: Apache-2.0

package term

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/bpfstats"
	"github.com/kernel-exporter/kernel_exporter/internal/plural"
)

// BPFView is top bpf: every BPF program of the host, as bpftop shows
// them, one row per program sorted by CPU: id, name, type, owner (the
// command name of the process holding it), events per second (runs of
// the interval), ns per event (mean run time) and CPU % (of one CPU: run
// time of the interval over its length; over 100 when the program keeps
// more than one CPU busy). It lists the programs itself (as root:
// BPF_PROG_GET_FD_BY_ID needs CAP_SYS_ADMIN) and keeps BPF run-time
// statistics on while it runs (BPF_ENABLE_STATS; off again on exit),
// which adds the cost of two clock reads to every program run on the
// host meanwhile.
var BPFView = Builtin{
	Name: "bpf",
	Help: "every BPF program of the host, by CPU (as bpftop): events/s, ns per event, CPU %, owner",
	Open: openBPF,
}

func openBPF(log *slog.Logger) (View, func(), error) {
	e := bpfstats.NewEnumerator(bpfstats.Limits{})
	var stats io.Closer
	if c, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME)); err != nil {
		log.Warn("top bpf: cannot turn BPF run-time statistics on (BPF_ENABLE_STATS needs CAP_SYS_ADMIN): programs advance only while kernel.bpf_stats_enabled is 1", "err", err)
	} else {
		stats = c
	}
	release := func() {
		if stats != nil {
			stats.Close()
		}
		e.Close()
	}
	return &bpfView{lister: e}, release, nil
}

// bpfListTimeout bounds one listing of top bpf.
const bpfListTimeout = 10 * time.Second

// bpfView is BPFView's View.
type bpfView struct {
	lister bpfstats.Lister
	prev   *bpfstats.Listing
	prevAt time.Time
}

// list lists the host's programs and returns when their statistics were
// read: the middle of the listing. A listing takes from milliseconds to
// a few hundred (the first loads the iterators; a loaded host is slow),
// so the rates are over the time between two listings, not between two
// ticks of the interval (which put rates 5-7% high on a host at load
// 20 with a 4 s interval).
func (v *bpfView) list() (*bpfstats.Listing, time.Time, error) {
	ctx, cancel := context.WithTimeout(context.Background(), bpfListTimeout)
	defer cancel()
	t0 := time.Now()
	l, err := v.lister.List(ctx)
	t1 := time.Now()
	return l, t0.Add(t1.Sub(t0) / 2), err
}

func (v *bpfView) Baseline() error {
	l, at, err := v.list()
	v.prev, v.prevAt = l, at
	return err
}

// bpfColumns are top bpf's columns.
var bpfColumns = []Column{
	{Title: "ID", Right: true}, {Title: "PROGRAM"}, {Title: "TYPE"}, {Title: "OWNER"},
	{Title: "EVENTS/s", Right: true}, {Title: "NS/EVENT", Right: true}, {Title: "CPU%", Right: true},
}

func (v *bpfView) Frame(w io.Writer, now time.Time, elapsed time.Duration, height, width int) error {
	cur, at, err := v.list()
	if err != nil {
		return err
	}
	if v.prev != nil && !v.prevAt.IsZero() {
		elapsed = at.Sub(v.prevAt)
	}
	usage := bpfstats.Usage(v.prev, cur, elapsed)
	v.prev, v.prevAt = cur, at
	return WriteBPF(w, now, elapsed, usage, int(cur.More[0]), height, width)
}

// WriteBPF writes one frame of top bpf: a title with the programs' total
// CPU, then one row per program of usage (more: programs past the
// listing's bound, not shown).
//
//	kernel_exporter top bpf  15:04:05  interval 1s  42 programs  BPF: 3.1% of one CPU
//	 ID  PROGRAM       TYPE        OWNER         EVENTS/s  NS/EVENT  CPU%
//	 57  spin          tracepoint  spinner          10000      2507  2.51
func WriteBPF(w io.Writer, now time.Time, elapsed time.Duration, usage []bpfstats.ProgramUsage, more, height, width int) error {
	total := 0.0
	rows := make([][]string, 0, len(usage))
	for _, u := range usage {
		total += u.CPU
		ns := "-"
		if u.Runs > 0 {
			ns = strconv.FormatFloat(u.NsPerRun, 'f', 0, 64)
		}
		owner := u.Owner
		if owner == "" {
			owner = "-"
		}
		rows = append(rows, []string{strconv.FormatUint(uint64(u.ID), 10), u.Name, u.Type, owner,
			strconv.FormatFloat(u.PerSecond, 'f', 0, 64), ns, strconv.FormatFloat(u.CPU*100, 'f', 2, 64)})
	}
	title := fmt.Sprintf("kernel_exporter top bpf  %s  interval %v  %s  BPF: %.2f%% of one CPU",
		now.Format(time.TimeOnly), elapsed.Round(time.Millisecond), plural.Count(len(usage)+more, "program"), total*100)
	if more > 0 {
		title += fmt.Sprintf("  (%d not listed)", more)
	}
	return WriteTable(w, title, bpfColumns, rows, height, width)
}

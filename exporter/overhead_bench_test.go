// SPDX-License-Identifier: Apache-2.0

package exporter_test

// Per-event cost of the bundled programs (run as root):
//
//	go test -run '^$' -bench GetpidOverhead ./exporter/
//	make bench-overhead   (BenchmarkProgramOverhead: every bundled program)
//
// BenchmarkGetpidOverhead times a tight getpid() loop without and then with
// the bundled syscalls program attached (it runs at every syscall exit), and
// reports the difference. BenchmarkProgramOverhead loads every bundled
// program at once with kernel.bpf_stats_enabled=1, runs a standard local
// workload (O_DIRECT disk I/O, loopback TCP and UDP, sleeps, execs, failing
// syscalls), and prints each program's run time per run from the kernel's
// statistics (run_time_ns / run_cnt).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/collector"
	"github.com/kernel-exporter/kernel_exporter/exporter"
	"github.com/kernel-exporter/kernel_exporter/internal/workload"
	"github.com/kernel-exporter/kernel_exporter/programs"
)

func needRoot(b *testing.B) {
	b.Helper()
	if os.Geteuid() != 0 {
		b.Skip("needs root to load BPF programs")
	}
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// BenchmarkGetpidOverhead reports the ns one getpid() costs without and with
// the syscalls program attached, and the difference (ns-added/call).
func BenchmarkGetpidOverhead(b *testing.B) {
	needRoot(b)
	var without, with float64
	b.Run("without", func(b *testing.B) {
		workload.Getpid(b.N)
		without = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	})
	e := exporter.New(exporter.Options{Sources: []exporter.Source{{Name: "syscalls"}}, CacheSize: 1 << 20, Logger: quietLogger()})
	defer e.Close()
	e.Start(context.Background())
	<-e.Loaded()
	if f := e.Failed(); len(f) > 0 {
		b.Fatalf("syscalls program did not load: %s", f[0].Reason)
	}
	b.Run("with-syscalls", func(b *testing.B) {
		workload.Getpid(b.N)
		with = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		if without > 0 {
			b.ReportMetric(with-without, "ns-added/call")
		}
	})
	// The program must have counted the calls: otherwise the difference
	// measures nothing.
	var getpids float64
	for _, snap := range e.Status.Read() {
		for _, f := range snap.Families {
			if f.Name != "kernel_syscalls_total" {
				continue
			}
			for i := 0; i < f.Len(); i++ {
				for j, name := range f.LabelNames {
					if name == "syscall" && f.LabelValues(i)[j] == "getpid" {
						getpids += f.Value(i)
					}
				}
			}
		}
	}
	if getpids == 0 {
		b.Fatal("kernel_syscalls_total{syscall=\"getpid\"} did not move")
	}
	fmt.Printf("getpid: %.1f ns without, %.1f ns with the syscalls program: %+.1f ns per call (kernel.bpf_stats_enabled=%s)\n",
		without, with, with-without, workload.BPFStatsEnabled())
}

// overheadSeconds is how long BenchmarkProgramOverhead runs its workload:
// KE_OVERHEAD_SECONDS, default 10.
func overheadSeconds() time.Duration {
	if v, err := strconv.Atoi(os.Getenv("KE_OVERHEAD_SECONDS")); err == nil && v > 0 {
		return time.Duration(v) * time.Second
	}
	return 10 * time.Second
}

// progStats is one attached program's kernel statistics.
type progStats struct {
	config, program, section string
	histogram                bool
	prog                     *ebpf.Program
	runs0, runs              uint64
	ns0, ns                  time.Duration
}

// BenchmarkProgramOverhead loads every bundled program, runs the standard
// workload, and prints run time per event for each program. Configs that
// cannot load on this kernel (kprobes, hardware counters) are listed as
// down. Run it once: -benchtime 1x.
func BenchmarkProgramOverhead(b *testing.B) {
	needRoot(b)
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		b.Fatalf("enable BPF stats: %v", err)
	}
	defer stats.Close()
	sources, err := overheadSources()
	if err != nil {
		b.Fatal(err)
	}
	e := exporter.New(exporter.Options{Sources: sources, CacheSize: 1 << 20, Logger: quietLogger()})
	defer e.Close()
	e.Start(context.Background())
	<-e.Loaded()

	var progs []*progStats
	var down []collector.State
	for _, st := range e.Status.States() {
		if !st.Up {
			down = append(down, st)
			continue
		}
		hist := configHasHistograms(st)
		for _, p := range st.Programs {
			if !p.Attached || p.Prog == nil {
				continue
			}
			ps := &progStats{config: st.Name, program: p.Name, section: p.Section, histogram: hist, prog: p.Prog}
			if s, err := p.Prog.Stats(); err == nil {
				ps.runs0, ps.ns0 = s.RunCount, s.Runtime
			}
			progs = append(progs, ps)
		}
	}

	d := overheadSeconds()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := runWorkload(b.TempDir(), d); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	// Scrape once, as Prometheus would, so that the collectors ran too.
	if _, err := e.Registry.Gather(); err != nil {
		b.Logf("gather: %v", err)
	}

	for _, p := range progs {
		s, err := p.prog.Stats()
		if err != nil {
			b.Fatalf("%s/%s: stats: %v", p.config, p.program, err)
		}
		p.runs, p.ns = s.RunCount-p.runs0, s.Runtime-p.ns0
	}
	sort.Slice(progs, func(i, j int) bool {
		if progs[i].config != progs[j].config {
			return progs[i].config < progs[j].config
		}
		return progs[i].program < progs[j].program
	})
	fmt.Printf("\nBPF run time per event, %s of workload, %d CPUs (kernel.bpf_stats_enabled=1)\n\n", d, numCPU())
	fmt.Printf("%-16s %-26s %-40s %12s %10s  %s\n", "config", "program", "section", "runs", "ns/run", "note")
	over := 0
	for _, p := range progs {
		note := ""
		nsPer := "-"
		if p.runs > 0 {
			v := float64(p.ns.Nanoseconds()) / float64(p.runs)
			nsPer = fmt.Sprintf("%.1f", v)
			if p.histogram {
				note = "histogram, target <= 150"
				if v > 150 {
					note += ": OVER"
					over++
				}
			}
		} else {
			note = "no events in this workload"
		}
		fmt.Printf("%-16s %-26s %-40s %12d %10s  %s\n", p.config, p.program, p.section, p.runs, nsPer, note)
	}
	for _, st := range down {
		reason := st.Reason
		if i := strings.IndexByte(reason, '\n'); i >= 0 {
			reason = reason[:i]
		}
		if len(reason) > 110 {
			reason = reason[:110] + "..."
		}
		fmt.Printf("%-16s %-26s down: %s\n", st.Name, "-", reason)
	}
	fmt.Printf("\n%d programs attached, %d configs down, %d histogram programs over 150 ns/run\n", len(progs), len(down), over)
}

// overheadSources are the configs BenchmarkProgramOverhead loads: every
// bundled program, or the names in KE_OVERHEAD_PROGRAMS (comma-separated);
// with KE_OVERHEAD_DIR set, the <name>.yaml user configs of that directory
// instead (to compare variants of a program: before and after a change).
func overheadSources() ([]exporter.Source, error) {
	dir := os.Getenv("KE_OVERHEAD_DIR")
	var names []string
	if v := os.Getenv("KE_OVERHEAD_PROGRAMS"); v != "" {
		names = strings.Split(v, ",")
	} else if dir != "" {
		files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			names = append(names, strings.TrimSuffix(filepath.Base(f), ".yaml"))
		}
	} else {
		names = programs.Names()
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("no configs to load (KE_OVERHEAD_DIR=%q)", dir)
	}
	var out []exporter.Source
	for _, n := range names {
		out = append(out, exporter.Source{Name: strings.TrimSpace(n), Dir: dir})
	}
	return out, nil
}

// configHasHistograms reports whether a config exports histograms.
func configHasHistograms(st collector.State) bool {
	var data []byte
	if st.Source == "bundled" {
		data, _ = fs.ReadFile(programs.FS, st.Name+".yaml")
	} else {
		data, _ = os.ReadFile(st.Source)
	}
	return strings.Contains(string(data), "\n  histograms:")
}

func numCPU() int {
	n, err := ebpf.PossibleCPU()
	if err != nil {
		return 0
	}
	return n
}

// runWorkload runs, concurrently for d, the standard local workload: O_DIRECT
// writes and reads in dir, loopback TCP connections carrying data, UDP
// datagrams to a socket that never reads (drops), short sleeps, execs of
// /bin/true, and failing syscalls.
func runWorkload(dir string, d time.Duration) error {
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if first == nil {
			first = err
		}
	}
	run := func(name string, f func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				if err := f(); err != nil {
					fail(fmt.Errorf("%s: %w", name, err))
					return
				}
			}
		}()
	}
	run("direct I/O", func() error { return workload.DirectIO(filepath.Join(dir, "direct.dat"), 256) })
	tcp, err := newEchoServer()
	if err != nil {
		return err
	}
	defer tcp.Close()
	run("tcp", func() error { return tcp.roundTrip(64 << 10) })
	udp, err := newUDPSink()
	if err != nil {
		return err
	}
	defer udp.Close()
	run("udp", func() error { return udp.send(1000) })
	for i := 0; i < 4; i++ {
		run("sleep", func() error { time.Sleep(time.Millisecond); return nil })
	}
	run("exec", func() error { return exec.Command("/bin/true").Run() })
	run("failing syscalls", func() error {
		if err := workload.FailingOpens(1000); err != nil {
			return err
		}
		time.Sleep(time.Millisecond)
		return nil
	})
	wg.Wait()
	return first
}

// echoServer echoes what loopback TCP clients send.
type echoServer struct {
	l    net.Listener
	conn atomic.Int64
}

func newEchoServer() (*echoServer, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &echoServer{l: l}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return s, nil
}

// roundTrip connects, sends n bytes, reads them back and closes.
func (s *echoServer) roundTrip(n int) error {
	c, err := net.Dial("tcp", s.l.Addr().String())
	if err != nil {
		return err
	}
	defer c.Close()
	s.conn.Add(1)
	buf := make([]byte, n)
	errc := make(chan error, 1)
	go func() {
		_, err := c.Write(buf)
		errc <- err
	}()
	if _, err := io.ReadFull(c, make([]byte, n)); err != nil {
		return err
	}
	return <-errc
}

func (s *echoServer) Close() error { return s.l.Close() }

// udpSink is a UDP socket with a small receive buffer that is never read:
// datagrams past the buffer are dropped by the kernel.
type udpSink struct {
	rx, tx *net.UDPConn
}

func newUDPSink() (*udpSink, error) {
	rx, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	rx.SetReadBuffer(4096)
	tx, err := net.DialUDP("udp", nil, rx.LocalAddr().(*net.UDPAddr))
	if err != nil {
		rx.Close()
		return nil, err
	}
	return &udpSink{rx: rx, tx: tx}, nil
}

// send sends n datagrams, then pauses a little.
func (u *udpSink) send(n int) error {
	msg := make([]byte, 512)
	for i := 0; i < n; i++ {
		if _, err := u.tx.Write(msg); err != nil && !errors.Is(err, unix.ECONNREFUSED) {
			return err
		}
	}
	time.Sleep(time.Millisecond)
	return nil
}

func (u *udpSink) Close() error {
	u.tx.Close()
	return u.rx.Close()
}

// SPDX-License-Identifier: Apache-2.0

package integration

// Kernel matrix tests: every kprobe, kretprobe, fentry and fexit program
// and every alternatives chain, run in each attach mode the kernel offers.
// On a kernel with fentry and kprobes (the 6.1 guest of make
// test-kernels) each must choose the expected hook and move its metrics by
// the expected amount; on a kernel without them (this 6.18 host) each
// must end as a clear "not supported" status while the exporter keeps
// serving, and the test then reports SKIP with that reason. Each test
// prints one MATRIX line per run (matrix_util_test.go).
//
// KE_MATRIX_QUIET=1 says nothing else runs on the machine, so call counts
// of kernel functions must match exactly (otherwise: at least).

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/loader"

	"github.com/kernel-exporter/kernel_exporter/internal/plural"
	"github.com/kernel-exporter/kernel_exporter/internal/testenv"
)

var quiet = os.Getenv("KE_MATRIX_QUIET") == "1"

// checkCalls checks that a count of kernel function calls moved by want:
// exactly on a quiet machine, at least otherwise.
func checkCalls(t *testing.T, what string, got, want float64) {
	t.Helper()
	if got < want || (quiet && got != want) {
		t.Fatalf("%s moved by %v, want %v", what, got, want)
	}
}

// waitValue polls until f() >= want (or 10 s) and returns the last value.
func waitValue(t *testing.T, e *Exporter, want float64, f func(Metrics) float64) float64 {
	t.Helper()
	var v float64
	deadline := time.Now().Add(10 * time.Second)
	for {
		v = f(e.Scrape())
		if v >= want || time.Now().After(deadline) {
			return v
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// sendfileN copies 4 KiB between two files n times with sendfile(2).
func sendfileN(t *testing.T, n int) {
	t.Helper()
	dir := t.TempDir()
	in, err := os.Create(filepath.Join(dir, "in"))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if _, err := in.Write(make([]byte, 4096)); err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	for i := 0; i < n; i++ {
		off := int64(0)
		if _, err := unix.Sendfile(int(out.Fd()), int(in.Fd()), &off, 4096); err != nil {
			t.Fatalf("sendfile: %v", err)
		}
	}
}

// fsyncN calls fsync(2) n times on a temporary file.
func fsyncN(t *testing.T, n int) {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i := 0; i < n; i++ {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
}

var kprobeModes = []attachMode{modeDefault, modeKprobe}

func TestMatrixFunclatency(t *testing.T) {
	for _, m := range kprobeModes {
		t.Run(m.name, func(t *testing.T) {
			r := matrixReport(t, "funclatency", m.name)
			e := Start(t, append([]string{"--programs=funclatency"}, m.args...)...)
			checkChoice(t, e, "funclatency", m.expect(t, "fentry", "kprobe"), r)
			const n = 20
			fn := L("function", "do_sendfile")
			before, _, _ := e.Scrape().Hist("kernel_function_latency_seconds", fn, 1)
			sendfileN(t, n)
			after := waitValue(t, e, float64(before+n), func(ms Metrics) float64 {
				c, _, _ := ms.Hist("kernel_function_latency_seconds", fn, 1)
				return float64(c)
			})
			checkCalls(t, "do_sendfile latency count", after-float64(before), n)
			_, sum, _ := e.Scrape().Hist("kernel_function_latency_seconds", fn, 1)
			if sum <= 0 {
				t.Errorf("do_sendfile latency sum = %v, want > 0", sum)
			}
			r.result = fmt.Sprintf("moved: do_sendfile +%v calls, %.1f us total", after-float64(before), sum*1e6)
		})
	}
	// The function comes from the command line.
	t.Run("attach.to", func(t *testing.T) {
		r := matrixReport(t, "funclatency --attach.to", "default")
		e := Start(t, "--programs=funclatency", "--attach.to=funclatency=vfs_fsync_range")
		checkChoice(t, e, "funclatency", modeDefault.expect(t, "fentry", "kprobe"), r)
		if n := e.Scrape().Series("kernel_exporter_program_attached", L("section", "fexit/vfs_fsync_range")) +
			e.Scrape().Series("kernel_exporter_program_attached", L("section", "kretprobe/vfs_fsync_range")); n != 1 {
			t.Errorf("no fexit or kretprobe program on vfs_fsync_range")
		}
		const n = 20
		fn := L("function", "vfs_fsync_range")
		fsyncN(t, n)
		got := waitValue(t, e, n, func(ms Metrics) float64 {
			c, _, _ := ms.Hist("kernel_function_latency_seconds", fn, 1)
			return float64(c)
		})
		checkCalls(t, "vfs_fsync_range latency count", got, n)
		r.result = fmt.Sprintf("moved: vfs_fsync_range +%v calls", got)
	})
}

func TestMatrixFunccount(t *testing.T) {
	for _, m := range kprobeModes {
		t.Run(m.name, func(t *testing.T) {
			r := matrixReport(t, "funccount", m.name)
			e := Start(t, append([]string{"--programs=funccount", "--attach.to=funccount=vfs_fsync_range"}, m.args...)...)
			checkChoice(t, e, "funccount", m.expect(t, "fentry", "kprobe"), r)
			const n = 25
			fn := L("function", "vfs_fsync_range")
			before := e.Scrape().Value("kernel_function_calls_total", fn)
			fsyncN(t, n)
			after := waitValue(t, e, before+n, func(ms Metrics) float64 { return ms.Value("kernel_function_calls_total", fn) })
			checkCalls(t, "function_calls_total{vfs_fsync_range}", after-before, n)
			r.result = fmt.Sprintf("moved: vfs_fsync_range +%v calls", after-before)
		})
	}
}

// tcpBulk writes total bytes over a loopback TCP connection in 1 MiB
// writes, with a reader draining the other end.
func tcpBulk(t *testing.T, total int) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(io.Discard, c)
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	for n := 0; n < total; n += len(buf) {
		if _, err := c.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	wg.Wait()
}

func TestMatrixStackcount(t *testing.T) {
	for _, m := range kprobeModes {
		t.Run(m.name, func(t *testing.T) {
			r := matrixReport(t, "stackcount", m.name)
			e := Start(t, append([]string{"--programs=stackcount"}, m.args...)...)
			checkChoice(t, e, "stackcount", m.expect(t, "fentry", "kprobe"), r)
			fn := L("function", "tcp_push_one")
			before := e.Scrape().Value("kernel_function_stack_calls_total", fn)
			tcpBulk(t, 64<<20)
			after := waitValue(t, e, before+1, func(ms Metrics) float64 { return ms.Value("kernel_function_stack_calls_total", fn) })
			if after <= before {
				t.Fatalf("tcp_push_one calls did not move (64 MiB written over loopback TCP)")
			}
			var sendmsg int
			for _, s := range e.Scrape().LabelValues("kernel_function_stack_calls_total", "stack") {
				if strings.Contains(s, "tcp_sendmsg") {
					sendmsg++
				}
			}
			if sendmsg == 0 {
				t.Errorf("no tcp_push_one stack goes through tcp_sendmsg: %v", e.Scrape().LabelValues("kernel_function_stack_calls_total", "stack"))
			}
			r.result = fmt.Sprintf("moved: tcp_push_one +%v calls, %s via tcp_sendmsg", after-before, plural.Count(sendmsg, "stack"))
		})
	}
}

// TestMatrixTCPSynBacklog fills a listener's SYN queue in a private network
// namespace with SYNs from addresses that never answer, so the kernel
// answers the rest with SYN cookies, then connects for real.
func TestMatrixTCPSynBacklog(t *testing.T) {
	for i, m := range kprobeModes {
		t.Run(m.name, func(t *testing.T) {
			r := matrixReport(t, "tcp_syn_backlog", m.name)
			e := Start(t, append([]string{"--programs=tcp_syn_backlog"}, m.args...)...)
			checkChoice(t, e, "tcp_syn_backlog", m.expect(t, "fentry", "kprobe"), r)
			ns := newThreadNetns(t)
			port := 7401 + i
			const backlog, flood, real = 4, 20, 3
			err := ns.Run(func() error {
				lfd, err := listenTCP4(port, backlog, 0)
				if err != nil {
					return err
				}
				raw, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
				if err != nil {
					unix.Close(lfd)
					return err
				}
				defer unix.Close(raw)
				for j := 0; j < flood; j++ {
					if err := sendSYN(raw, [4]byte{10, 0, 0, byte(j + 1)}, uint16(40000+j), uint16(port), uint32(1000*j)); err != nil {
						return fmt.Errorf("send SYN: %w", err)
					}
				}
				for j := 0; j < real; j++ {
					fd, err := connectTCP4(port)
					if err != nil {
						return err
					}
					unix.Close(fd)
				}
				// The listener stays open (with its half-open requests) until
				// the namespace goes at cleanup.
				t.Cleanup(func() { unix.Close(lfd) })
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			p := L("port", strconv.Itoa(port))
			waitValue(t, e, flood+real, func(ms Metrics) float64 {
				c, _, _ := ms.Hist("kernel_tcp_syn_backlog", p, 1)
				return float64(c)
			})
			ms := e.Scrape()
			count, sum, le2 := ms.Hist("kernel_tcp_syn_backlog", p, 2)
			sent := ms.Value("kernel_tcp_syncookies_sent_total", p)
			valid := waitValue(t, e, real, func(ms Metrics) float64 { return ms.Value("kernel_tcp_syncookies_validated_total", p) })
			// The first q SYNs find 0, 1, ..., q-1 requests queued and are
			// queued too; every later one finds the queue full (q) and gets
			// a cookie. The queue is full at backlog requests, or at
			// backlog+1 on kernels that test "len > backlog" (6.1 does).
			q := flood + real - int(sent)
			if q != backlog && q != backlog+1 {
				t.Errorf("%v of %d SYNs got cookies: the queue held %d, want %d or %d", sent, flood+real, q, backlog, backlog+1)
			}
			if wantSum := q*(q-1)/2 + q*(flood+real-q); count != flood+real || sum != float64(wantSum) || le2 != 3 {
				t.Errorf("syn backlog: count %d sum %v le=2 %d; want %d, %d, 3\n%s",
					count, sum, le2, flood+real, wantSum, ms.seriesDump("kernel_tcp_syn_backlog"))
			}
			if valid != real {
				t.Errorf("cookies validated %v, want %d", valid, real)
			}
			r.result = fmt.Sprintf("moved: %d SYNs (backlog sum %v), %v cookies sent, %v validated", count, sum, sent, valid)
		})
	}
}

// TestMatrixTCPWindow opens passive connections in a private network
// namespace, plainly and with forced SYN cookies, and checks every one of
// them had its window scale checked.
func TestMatrixTCPWindow(t *testing.T) {
	for i, m := range kprobeModes {
		t.Run(m.name, func(t *testing.T) {
			r := matrixReport(t, "tcp_window", m.name)
			e := Start(t, append([]string{"--programs=tcp_window"}, m.args...)...)
			checkChoice(t, e, "tcp_window", m.expect(t, "fentry", "kprobe"), r)
			ns := newThreadNetns(t)
			plain, cookie := 7411+2*i, 7412+2*i
			const n = 5
			exchange := func(port int) error {
				lfd, err := listenTCP4(port, 64, 0)
				if err != nil {
					return err
				}
				defer unix.Close(lfd)
				buf := make([]byte, 1000)
				for j := 0; j < n; j++ {
					cfd, err := connectTCP4(port)
					if err != nil {
						return err
					}
					sfd, _, err := unix.Accept(lfd)
					if err != nil {
						unix.Close(cfd)
						return err
					}
					// Data both ways: the server side sends segments (and
					// window updates after reading).
					for _, pair := range [][2]int{{sfd, cfd}, {cfd, sfd}} {
						if _, err := unix.Write(pair[0], buf); err != nil {
							return err
						}
						if _, err := unix.Read(pair[1], buf); err != nil {
							return err
						}
					}
					unix.Close(cfd)
					unix.Close(sfd)
				}
				return nil
			}
			err := ns.Run(func() error {
				if err := exchange(plain); err != nil {
					return err
				}
				if err := sysctl("net.ipv4.tcp_syncookies", "2"); err != nil {
					return err
				}
				return exchange(cookie)
			})
			if err != nil {
				t.Fatal(err)
			}
			var detail []string
			for _, port := range []int{plain, cookie} {
				p := L("port", strconv.Itoa(port))
				checks := waitValue(t, e, n, func(ms Metrics) float64 { return ms.Value("kernel_tcp_window_scale_checks_total", p) })
				ms := e.Scrape()
				mismatches := ms.Value("kernel_tcp_window_scale_mismatches_total", p)
				wins, wsum, _ := ms.Hist("kernel_tcp_receive_window_bytes", p, 1)
				if checks != n {
					t.Errorf("port %d: %v window scale checks, want %d (one per connection)", port, checks, n)
				}
				if mismatches != 0 {
					t.Errorf("port %d: %v window scale mismatches on a fixed kernel: %s", port, mismatches, ms.seriesDump("kernel_tcp_window_scale_mismatches_total"))
				}
				if wins < n || wsum <= 0 {
					t.Errorf("port %d: %d windows (sum %v bytes), want >= %d", port, wins, wsum, n)
				}
				kind := "plain"
				if port == cookie {
					kind = "cookie"
				}
				detail = append(detail, fmt.Sprintf("%s: %v checks, %v mismatches, %d windows avg %.0f B", kind, checks, mismatches, wins, wsum/float64(max(wins, 1))))
			}
			r.result = "moved: " + strings.Join(detail, "; ")
		})
	}
}

func TestMatrixAcceptLatency(t *testing.T) {
	const n = 5
	const wait = 150 * time.Millisecond
	for _, m := range kprobeModes {
		t.Run(m.name, func(t *testing.T) {
			r := matrixReport(t, "accept_latency", m.name)
			e := Start(t, append([]string{"--programs=accept_latency"}, m.args...)...)
			// Debian 6.1 refuses fexit on tcp_v{4,6}_syn_recv_sock at attach.
			notSupp := "attach fexit/tcp_v4_syn_recv_sock: create raw tracepoint: not supported"
			const getFuncRet = "helper bpf_get_func_ret (#184, Linux 5.17) not supported by this kernel"
			checkChoice(t, e, "accept_latency", m.expect(t, "fentry", "kprobe"), r,
				fallbackOK{"tcp", notSupp}, fallbackOK{"tcp6", strings.ReplaceAll(notSupp, "v4", "v6")},
				// Before 5.17 the fexit programs' bpf_get_func_ret is missing.
				fallbackOK{"tcp", getFuncRet}, fallbackOK{"tcp6", getFuncRet}, fallbackOK{"unix", getFuncRet})
			var detail []string
			for _, proto := range []string{"tcp", "unix"} {
				var l net.Listener
				var err error
				if proto == "tcp" {
					l, err = net.Listen("tcp", "127.0.0.1:0")
				} else {
					l, err = net.Listen("unix", filepath.Join(t.TempDir(), "sock"))
				}
				if err != nil {
					t.Fatal(err)
				}
				defer l.Close()
				port := "0"
				if proto == "tcp" {
					port = strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
				}
				for j := 0; j < n; j++ {
					c, err := net.Dial(l.Addr().Network(), l.Addr().String())
					if err != nil {
						t.Fatal(err)
					}
					defer c.Close()
				}
				time.Sleep(wait)
				for j := 0; j < n; j++ {
					c, err := l.Accept()
					if err != nil {
						t.Fatal(err)
					}
					c.Close()
				}
				lbl := L("protocol", proto, "port", port)
				waitValue(t, e, n, func(ms Metrics) float64 {
					c, _, _ := ms.Hist("kernel_accept_queue_wait_seconds", lbl, 1)
					return float64(c)
				})
				// Buckets are powers of two of microseconds: 65.536 ms is
				// below the wait, so no connection may be in it.
				count, sum, fast := e.Scrape().Hist("kernel_accept_queue_wait_seconds", lbl, 0.065536)
				if count != n || fast != 0 || sum < n*wait.Seconds() {
					t.Errorf("%s accept wait: count %d, %d under 65 ms, sum %vs; want %d, 0, >= %vs\n%s",
						proto, count, fast, sum, n, n*wait.Seconds(), e.Scrape().seriesDump("kernel_accept_queue_wait_seconds"))
				}
				detail = append(detail, fmt.Sprintf("%s %d waits avg %.0f ms", proto, count, sum/float64(max(count, 1))*1000))
			}
			r.result = "moved: " + strings.Join(detail, ", ")
		})
	}
}

// TestMatrixTCPCollapse fills the receive queue of a socket with a tiny
// receive buffer with 1-byte segments, which makes TCP collapse the queue.
func TestMatrixTCPCollapse(t *testing.T) {
	for _, m := range kprobeModes {
		t.Run(m.name, func(t *testing.T) {
			r := matrixReport(t, "tcp_collapse", m.name)
			e := Start(t, append([]string{"--programs=tcp_collapse"}, m.args...)...)
			// tcp_collapse has 7 arguments: x86 BPF trampolines take at most
			// 6 before 6.6.
			checkChoice(t, e, "tcp_collapse", m.expect(t, "fentry", "kprobe"), r,
				fallbackOK{"collapse", "attach fentry/tcp_collapse: create raw tracepoint: not supported"})
			fn := L("function", "tcp_collapse")
			before, _, _ := e.Scrape().Hist("kernel_tcp_collapse_latency_seconds", fn, 1)
			lfd, err := listenTCP4(0, 8, 4096)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(lfd)
			cfd, err := connectTCP4(listenPort(lfd))
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(cfd)
			sfd, _, err := unix.Accept(lfd)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(sfd) // never read: its queue fills up
			if err := unix.SetsockoptInt(cfd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1); err != nil {
				t.Fatal(err)
			}
			if err := unix.SetNonblock(cfd, true); err != nil {
				t.Fatal(err)
			}
			var after uint64
			deadline := time.Now().Add(15 * time.Second)
			for writes := 0; after == before && time.Now().Before(deadline); {
				for j := 0; j < 2000; j++ {
					if _, err := unix.Write(cfd, []byte{'x'}); err == nil {
						writes++
					}
				}
				time.Sleep(20 * time.Millisecond)
				after, _, _ = e.Scrape().Hist("kernel_tcp_collapse_latency_seconds", fn, 1)
			}
			if after <= before {
				t.Fatalf("tcp_collapse calls did not move\n%s", e.Scrape().seriesDump("kernel_tcp_collapse_latency_seconds"))
			}
			_, sum, _ := e.Scrape().Hist("kernel_tcp_collapse_latency_seconds", fn, 1)
			prune, _, _ := e.Scrape().Hist("kernel_tcp_collapse_latency_seconds", L("function", "tcp_prune_queue"), 1)
			r.result = fmt.Sprintf("moved: tcp_collapse +%d calls (%.1f us total), tcp_prune_queue %d", after-before, sum*1e6, prune)
		})
	}
}

// TestMatrixFallbackChain runs the test config whose alternatives are
// fentry, kprobe and tracepoint programs feeding the same counter, in
// each mode, and checks which one was chosen and that it counts.
func TestMatrixFallbackChain(t *testing.T) {
	for _, m := range []attachMode{modeDefault, modeKprobe, modeTracepoint} {
		t.Run(m.name, func(t *testing.T) {
			r := matrixReport(t, "fallback (test)", m.name)
			dir := t.TempDir()
			writeFallback(t, dir, "fallback", "")
			e := Start(t, append([]string{"--programs=none", "--config.dir=" + dir, "--config.names=fallback"}, m.args...)...)
			want := m.expect(t, "fentry", "kprobe", "tracepoint")
			if want == "" {
				t.Fatalf("the tracepoint alternative must always work")
			}
			checkChoice(t, e, "fallback", want, r)
			prog := "fsync_" + want
			ms := e.Scrape()
			if v := ms.Value("kernel_exporter_program_attached", L("config", "fallback", "program", prog, "alternative", "fsync")); v != 1 {
				t.Errorf("program_attached{program=%q,alternative=fsync} = %v, want 1", prog, v)
			}
			if n := ms.Series("kernel_exporter_program_attached", L("config", "fallback")); n != 1 {
				t.Errorf("%d programs reported, want only the chosen one", n)
			}
			page := e.Get("/")
			if !strings.Contains(page, "chose "+prog) {
				t.Errorf("landing page does not say %q:\n%s", "chose "+prog, page)
			}
			if want != "fentry" && !strings.Contains(page, "passed over") {
				t.Errorf("landing page does not say why earlier choices were passed over:\n%s", page)
			}
			const n = 30
			lbl := L("pid", strconv.Itoa(os.Getpid()), "via", want)
			fsyncN(t, n)
			got := waitValue(t, e, n, func(ms Metrics) float64 { return ms.Value("kernel_fsync_calls_total", lbl) })
			if got != n {
				t.Fatalf("fsync_calls_total{via=%s} = %v, want %d\n%s", want, got, n, e.Scrape().seriesDump("kernel_fsync_calls_total"))
			}
			// The counts were read after the capability drop, with CAP_BPF
			// alone: kernels before 6.5 (the 6.1 guest) refuse every bpf()
			// command, map reads included, to a process without it.
			waitDropped(t, e)
			eff := procCaps(t, fmt.Sprintf("/proc/%d/status", exporterPid(t, e)))["CapEff"]
			if want := uint64(1) << loader.CapBPF; eff != want {
				t.Errorf("CapEff after attach = %016x, want %016x (CAP_BPF alone)", eff, want)
			}
			r.result = fmt.Sprintf("moved: %v fsyncs counted by %s, read with CapEff %016x", got, prog, eff)
		})
	}
}

// TestMatrixRequires checks that configs whose requirements the kernel
// does not meet are down with a reason, while the others run.
func TestMatrixRequires(t *testing.T) {
	r := matrixReport(t, "requires (test)", "tracepoint")
	dir := t.TempDir()
	writeFallback(t, dir, "ok", "")
	writeFallback(t, dir, "future", "namespace: future\nrequires:\n  kernel: \"99.0\"\n")
	writeFallback(t, dir, "needs_kprobes", "namespace: kp\nrequires:\n  kernel: \"4.18\"\n  features: [kprobes, btf]\n")
	e := Start(t, append([]string{"--programs=none", "--config.dir=" + dir, "--config.names=ok,future,needs_kprobes"}, modeTracepoint.args...)...)
	ms := e.Scrape()
	rel, _, err := loader.KernelRelease()
	if err != nil {
		t.Fatal(err)
	}
	if v := ms.Value("kernel_exporter_config_up", L("config", "ok")); v != 1 {
		t.Errorf("config ok is down: %s", errorReason(ms, "ok"))
	}
	if got, want := errorReason(ms, "future"), "requires kernel >= 99.0, running "+rel; got != want {
		t.Errorf("config future: reason %q, want %q", got, want)
	}
	if kernelCaps(t).kprobes {
		// Up, but no program can attach in tracepoint mode... the config
		// has a tracepoint alternative, so it runs.
		if v := ms.Value("kernel_exporter_config_up", L("config", "needs_kprobes")); v != 1 {
			t.Errorf("config needs_kprobes is down on a kernel with kprobes: %s", errorReason(ms, "needs_kprobes"))
		}
	} else if got := errorReason(ms, "needs_kprobes"); !strings.HasPrefix(got, "requires kprobes: kprobes not supported by this kernel") {
		t.Errorf("config needs_kprobes: reason %q, want \"requires kprobes: kprobes not supported by this kernel ...\"", got)
	}
	if page := e.Get("/"); !strings.Contains(page, "requires kernel &gt;= 99.0, running "+rel) {
		t.Errorf("landing page does not show the requirement:\n%s", page)
	}
	r.attach = "tracepoint"
	r.result = fmt.Sprintf("ok: future kernel refused (%q), needs_kprobes up=%v", errorReason(ms, "future"), ms.Value("kernel_exporter_config_up", L("config", "needs_kprobes")))
}

// TestMatrixBTFPath hides /sys/kernel/btf from the exporter (a tmpfs over
// it in a private mount namespace): CO-RE objects then load only with
// --btf.path pointing at a copy of the kernel's BTF.
func TestMatrixBTFPath(t *testing.T) {
	r := matrixReport(t, "--btf.path (test)", "tracepoint")
	data, err := os.ReadFile("/sys/kernel/btf/vmlinux")
	if err != nil {
		testenv.SkipLacking(t, "btf", "this test needs kernel BTF to copy: %v", err)
	}
	btfCopy := filepath.Join(t.TempDir(), "vmlinux.btf")
	if err := os.WriteFile(btfCopy, data, 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeFallback(t, dir, "withreq", "")
	// No requires block, and its own metric namespace.
	writeFallback(t, dir, "noreq", "namespace: nobtf\n")
	hide := []string{"unshare", "-m", "--propagation", "private", "--", "sh", "-c",
		`mount -t tmpfs none /sys/kernel/btf && [ ! -e /sys/kernel/btf/vmlinux ] && exec "$@"`, "sh"}
	args := append([]string{"--programs=none", "--config.dir=" + dir, "--config.names=withreq,noreq"}, modeTracepoint.args...)

	e := startWrapped(t, hide, args...)
	ms := e.Scrape()
	if got := errorReason(ms, "withreq"); !strings.HasPrefix(got, "requires btf: kernel BTF not supported by this kernel: no /sys/kernel/btf/vmlinux") {
		t.Errorf("without BTF, config withreq: reason %q", got)
	}
	if got := errorReason(ms, "noreq"); !strings.Contains(got, "BTF") {
		t.Errorf("without BTF, config noreq: reason %q, want a BTF error", got)
	}
	noBTF := summarizeReason(errorReason(ms, "withreq"))
	e.Stop()

	e = startWrapped(t, hide, append(args, "--btf.path="+btfCopy)...)
	ms = e.Scrape()
	for _, c := range []string{"withreq", "noreq"} {
		if v := ms.Value("kernel_exporter_config_up", L("config", c)); v != 1 {
			t.Fatalf("with --btf.path, config %s is down: %s\n%s", c, errorReason(ms, c), e.Logs())
		}
	}
	const n = 10
	lbl := L("pid", strconv.Itoa(os.Getpid()), "via", "tracepoint")
	fsyncN(t, n)
	got := waitValue(t, e, 2*n, func(ms Metrics) float64 {
		return ms.Value("kernel_fsync_calls_total", lbl) + ms.Value("nobtf_fsync_calls_total", lbl)
	})
	if got != 2*n {
		t.Errorf("fsync_calls_total = %v, want %d (%d per config)", got, 2*n, n)
	}
	r.attach = "tracepoint"
	r.result = fmt.Sprintf("ok: without BTF down (%s); with --btf.path up, %v fsyncs counted", noBTF, got)
}

// TestMatrixAllTogether starts every program of this matrix with timers in
// one exporter: what the kernel cannot run is down, the rest serves.
func TestMatrixAllTogether(t *testing.T) {
	r := matrixReport(t, "all 7 + timers", "default")
	progs := []string{"funclatency", "funccount", "stackcount", "tcp_syn_backlog", "tcp_window", "accept_latency", "tcp_collapse"}
	e := Start(t, "--programs=timers,"+strings.Join(progs, ","))
	ms := e.Scrape()
	if v := ms.Value("kernel_exporter_config_up", L("config", "timers")); v != 1 {
		t.Fatalf("timers is down: %s", errorReason(ms, "timers"))
	}
	want := 0.0
	if modeDefault.expect(t, "fentry", "kprobe") != "" {
		want = 1
	}
	up := 0
	for _, p := range progs {
		v := ms.Value("kernel_exporter_config_up", L("config", p))
		if v != want && !strings.HasPrefix(errorReason(ms, p), "requires kernel >= ") {
			t.Errorf("config %s: up %v, want %v (%s)", p, v, want, errorReason(ms, p))
		}
		if v == 0 && !unsupportedReason(errorReason(ms, p)) {
			t.Errorf("config %s is down for an unexpected reason: %s", p, errorReason(ms, p))
		}
		up += int(v)
	}
	r.result = fmt.Sprintf("ok: timers up, %d of %d up, exporter serving", up, len(progs))
}

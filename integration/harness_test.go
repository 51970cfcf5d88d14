// SPDX-License-Identifier: Apache-2.0

// Package integration runs the real kernel_exporter binary against this
// machine's kernel: tests trigger kernel events and assert that metrics moved
// by the expected amount. They need root and BPF; with CI=true they fail
// instead of skipping when either is missing.
package integration

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/kernel-exporter/kernel_exporter/internal/testenv"
)

// binary is the kernel_exporter built once for the whole package.
var binary string

// repoRoot is the checkout's top directory.
var repoRoot string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Getenv(podCapsEnv) != "" {
		return podCapsExec() // a wrapper, not a test run
	}
	wd, _ := os.Getwd()
	repoRoot = filepath.Dir(wd)
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			fmt.Fprintln(os.Stderr, "integration tests need root, and CI=true forbids skipping them")
			return 1
		}
		// Run only the test that reports the skip and its reason, so that
		// the run says SKIP rather than "ok" with nothing run.
		flag.Parse()
		if err := flag.Set("test.run", "^TestIntegrationNeedsRoot$"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}
	// Tests count their own events by PID; BPF sees the kernel's PIDs.
	if err := testenv.HostPIDNamespace(); err != nil {
		fmt.Fprintln(os.Stderr, "integration tests:", err)
		return 1
	}
	defer removeRelease()
	if b := os.Getenv("KERNEL_EXPORTER_BINARY"); b != "" {
		// Prebuilt (make test-kernels runs the compiled tests in a VM
		// without a Go toolchain).
		binary = b
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "kernel_exporter-it-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "kernel_exporter")
	build := exec.Command("go", "build", "-o", binary, "./cmd/kernel_exporter")
	build.Dir = repoRoot
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build kernel_exporter: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// Exporter is a running kernel_exporter process.
type Exporter struct {
	t    *testing.T
	cmd  *exec.Cmd
	URL  string // http://127.0.0.1:port
	logs *syncBuffer
	done chan error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Start runs kernel_exporter with args on a free loopback port and waits
// until it serves /metrics. The process gets SIGTERM at test cleanup.
func Start(t *testing.T, args ...string) *Exporter {
	t.Helper()
	return startWrapped(t, nil, args...)
}

// startWrapped is Start with the exporter run by a wrapper command, as in
// startWrapped(t, []string{"unshare", "-m", "--", "sh", "-c", script}, args...):
// the wrapper gets the binary and its arguments appended.
func startWrapped(t *testing.T, wrapper []string, args ...string) *Exporter {
	t.Helper()
	return startProc(t, wrapper, nil, args...)
}

// startProc is startWrapped with the process's attributes set to sys (nil:
// the defaults), e.g. Setpgid for a process group of its own.
func startProc(t *testing.T, wrapper []string, sys *syscall.SysProcAttr, args ...string) *Exporter {
	t.Helper()
	port := freePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	argv := append(append(append([]string{}, wrapper...), binary, "--web.listen-address="+addr), args...)
	return startArgv(t, addr, argv, sys, "kernel_exporter")
}

// startArgv runs argv, an exporter told to listen on addr, with the
// process attributes sys (nil: the defaults) and its output in the
// Exporter's logs; it stops it at cleanup and fails t, naming what, when
// it does not serve within 60 s.
func startArgv(t *testing.T, addr string, argv []string, sys *syscall.SysProcAttr, what string) *Exporter {
	t.Helper()
	e := &Exporter{t: t, URL: "http://" + addr, logs: &syncBuffer{}, done: make(chan error, 1)}
	e.cmd = exec.Command(argv[0], argv[1:]...)
	e.cmd.Stdout = e.logs
	e.cmd.Stderr = e.logs
	e.cmd.SysProcAttr = sys
	if err := e.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { e.done <- e.cmd.Wait() }()
	t.Cleanup(func() { e.Stop() })
	// Generous: under QEMU's software emulation start-up takes seconds.
	if err := waitServing(e.URL, e.done, 60*time.Second); err != nil {
		t.Fatalf("%s: %v\n%s", what, err, e.logs)
	}
	return e
}

// stillLoading reports whether a /metrics body shows a config whose load
// has not ended (kernel_exporter_config_loading{...} 1).
func stillLoading(body string) bool {
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "kernel_exporter_config_loading{") && strings.HasSuffix(line, "} 1") {
			return true
		}
	}
	return false
}

// Stop sends SIGTERM and waits for the process to exit (killing it after
// 10 s). It returns the exit error.
func (e *Exporter) Stop() error {
	if e.cmd.ProcessState != nil {
		return nil
	}
	_ = e.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-e.done:
		return err
	case <-time.After(10 * time.Second):
		_ = e.cmd.Process.Kill()
		e.t.Errorf("kernel_exporter did not exit within 10s of SIGTERM\n%s", e.logs)
		return <-e.done
	}
}

// Logs returns what the process printed so far.
func (e *Exporter) Logs() string { return e.logs.String() }

// Get fetches a path and returns the body.
func (e *Exporter) Get(path string) string {
	e.t.Helper()
	resp, err := http.Get(e.URL + path)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		e.t.Fatalf("GET %s: %s\n%s", path, resp.Status, b)
	}
	return string(b)
}

// Metrics is one parsed scrape.
type Metrics map[string]*dto.MetricFamily

// Scrape fetches and parses /metrics.
func (e *Exporter) Scrape() Metrics {
	e.t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(e.Get("/metrics")))
	if err != nil {
		e.t.Fatalf("parse /metrics: %v", err)
	}
	return Metrics(mfs)
}

// L builds a label matcher: L("device", "vda", "operation", "read").
func L(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

func matches(m *dto.Metric, want map[string]string) bool {
	n := 0
	for _, lp := range m.GetLabel() {
		if v, ok := want[lp.GetName()]; ok {
			if v != lp.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(want)
}

// Value sums the counter, gauge or untyped values of the series of name
// whose labels include want.
func (ms Metrics) Value(name string, want map[string]string) float64 {
	var v float64
	if mf, ok := ms[name]; ok {
		for _, m := range mf.GetMetric() {
			if !matches(m, want) {
				continue
			}
			v += m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue()
		}
	}
	return v
}

// Series counts the series of name whose labels include want.
func (ms Metrics) Series(name string, want map[string]string) int {
	n := 0
	if mf, ok := ms[name]; ok {
		for _, m := range mf.GetMetric() {
			if matches(m, want) {
				n++
			}
		}
	}
	return n
}

// Hist returns the summed count and sum of the histogram series of name
// whose labels include want, and the cumulative count at bucket le (or -1
// when no bucket has that bound).
func (ms Metrics) Hist(name string, want map[string]string, le float64) (count uint64, sum float64, atLE int64) {
	count, sum, at := ms.histAt(name, want, func(a, b float64) bool { return a == b }, le)
	return count, sum, at[0]
}

// histAt returns the summed count and sum of the histogram series of name
// whose labels include want, and for each of les the summed cumulative
// count of the buckets whose upper bound is same as it (-1 when none is).
func (ms Metrics) histAt(name string, want map[string]string, same func(bound, le float64) bool, les ...float64) (count uint64, sum float64, at []int64) {
	at = make([]int64, len(les))
	for i := range at {
		at[i] = -1
	}
	if mf, ok := ms[name]; ok {
		for _, m := range mf.GetMetric() {
			if !matches(m, want) {
				continue
			}
			h := m.GetHistogram()
			count += h.GetSampleCount()
			sum += h.GetSampleSum()
			for _, b := range h.GetBucket() {
				for i, le := range les {
					if same(b.GetUpperBound(), le) {
						at[i] = max(at[i], 0) + int64(b.GetCumulativeCount())
					}
				}
			}
		}
	}
	return count, sum, at
}

// LabelValues returns the values of label across the series of name.
func (ms Metrics) LabelValues(name, label string) []string {
	var out []string
	if mf, ok := ms[name]; ok {
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label {
					out = append(out, lp.GetValue())
				}
			}
		}
	}
	return out
}

// Eventually polls cond every 200 ms for up to d, then fails with the
// message (func() string arguments, such as e.Logs, are called then).
func Eventually(t *testing.T, d time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf(format, lateArgs(args)...)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// lateArgs calls the func() string arguments of a failure message (such
// as e.Logs, the method value) so that the message shows the state at the
// failure, not at the call.
func lateArgs(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		if f, ok := a.(func() string); ok {
			a = f()
		}
		out[i] = a
	}
	return out
}

// waitServing polls url/metrics until it answers 200 with no config still
// loading (the port opens before configs load: serving means every load
// has ended). It fails when the process exits first (done yields; the exit
// is put back for the caller's cleanup) or after d.
func waitServing(url string, done chan error, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		resp, err := http.Get(url + "/metrics")
		if err == nil {
			body, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			if rerr == nil && resp.StatusCode == 200 && !stillLoading(string(body)) {
				return nil
			}
		}
		select {
		case err := <-done:
			done <- err
			return fmt.Errorf("exited early: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("did not serve within %v", d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

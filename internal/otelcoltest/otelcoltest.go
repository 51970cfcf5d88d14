// SPDX-License-Identifier: Apache-2.0

// Package otelcoltest runs a real OpenTelemetry Collector for tests: the
// binary tools/otelcol/build.sh (make otelcol) builds from the collector's
// core modules, with an OTLP receiver (gRPC and HTTP, on free loopback
// ports) and the debug exporter at verbosity detailed, whose output this
// package parses into spans and metrics (Parse).
//
// Start starts one collector per test (about a second) and stops it when
// the test ends; Wait polls what it has received until a condition holds.
package otelcoltest

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/kernel-exporter/kernel_exporter/bounded"
	"github.com/kernel-exporter/kernel_exporter/internal/testbin"
	"github.com/kernel-exporter/kernel_exporter/internal/testenv"
)

// EnvOtelcol is an OpenTelemetry Collector binary to use instead of the
// newest .cache/otelcol/<version>/otelcol of the module root.
const EnvOtelcol = "KE_OTELCOL"

// Protocols of Endpoint.
const (
	GRPC = "grpc"
	HTTP = "http"
)

// startTimeout bounds how long Start waits for both receivers to accept
// connections.
const startTimeout = 60 * time.Second

// maxOutput bounds how much of the debug exporter's output Received reads:
// a test that sends more has a bug.
const maxOutput = 64 << 20

// Collector is a running OpenTelemetry Collector.
type Collector struct {
	// Dir holds its configuration, its debug output (debug.out) and its own
	// log (collector.log).
	Dir   string
	ports map[string]int
	proc  *testbin.Proc
	out   string
}

// Start runs a collector until t ends. A missing binary is
// testenv.SkipOrFail (a failure under CI=true) naming make otelcol; a
// collector that does not come up fails t.
func Start(t testing.TB) *Collector {
	t.Helper()
	bin, err := testbin.Find(EnvOtelcol, "otelcol", "otelcol")
	if err != nil {
		testenv.SkipOrFail(t, "otelcoltest: %v (build it with make otelcol)", err)
		return nil
	}
	dir := t.TempDir()
	c, err := start(dir, bin)
	if c != nil && c.proc != nil {
		t.Cleanup(func() {
			c.proc.Stop(10 * time.Second)
			if t.Failed() {
				t.Log("\n" + c.proc.Tail(40))
			}
		})
	}
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Logf("otelcoltest: collector on grpc %s, http %s (output in %s)", c.Endpoint(GRPC), c.Endpoint(HTTP), dir)
	return c
}

func start(dir, bin string) (*Collector, error) {
	ports, err := testbin.FreePorts(2)
	if err != nil {
		return nil, err
	}
	c := &Collector{Dir: dir, ports: map[string]int{GRPC: ports[0], HTTP: ports[1]}, out: filepath.Join(dir, "debug.out")}
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(config(ports[0], ports[1], filepath.Join(dir, "collector.log"))), 0o644); err != nil {
		return nil, err
	}
	// stdout carries only the debug exporter's output (use_internal_logger
	// false); the collector's own log goes to collector.log.
	// Profiles are a development signal: the gate lets the pipeline start.
	c.proc, err = testbin.StartProc("otelcol", c.out, bin, "--config", "file:"+cfg, "--feature-gates=service.profilesSupport")
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(startTimeout)
	for _, p := range ports {
		addr := "127.0.0.1:" + strconv.Itoa(p)
		for {
			if ok, err := c.proc.Exited(); ok {
				return c, fmt.Errorf("otelcoltest: collector exited before it was ready: %v\n%s\n%s", err, c.proc.Tail(30), tailFile(filepath.Join(dir, "collector.log")))
			}
			conn, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				conn.Close()
				break
			}
			if time.Now().After(deadline) {
				return c, fmt.Errorf("otelcoltest: collector not listening on %s after %v: %v\n%s", addr, startTimeout, err, tailFile(filepath.Join(dir, "collector.log")))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return c, nil
}

// config is the collector's configuration: OTLP in on the two ports, every
// signal (profiles too) to the debug exporter at verbosity detailed written straight to
// stdout, no telemetry endpoint of its own (it would take a fixed port).
func config(grpcPort, httpPort int, logPath string) string {
	return fmt.Sprintf(`receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:%d
      http:
        endpoint: 127.0.0.1:%d
exporters:
  debug:
    verbosity: detailed
    use_internal_logger: false
service:
  telemetry:
    metrics:
      level: none
    logs:
      level: info
      output_paths: [%q]
      error_output_paths: [%q]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [debug]
    metrics:
      receivers: [otlp]
      exporters: [debug]
    logs:
      receivers: [otlp]
      exporters: [debug]
    profiles:
      receivers: [otlp]
      exporters: [debug]
`, grpcPort, httpPort, logPath, logPath)
}

// Endpoint is the receiver's URL for proto (GRPC or HTTP),
// http://127.0.0.1:<port>: what OTEL_EXPORTER_OTLP_ENDPOINT takes (the
// http scheme makes the gRPC exporter connect without TLS). An unknown
// proto panics.
func (c *Collector) Endpoint(proto string) string {
	p, ok := c.ports[proto]
	if !ok {
		panic("otelcoltest: unknown protocol " + strconv.Quote(proto))
	}
	return "http://127.0.0.1:" + strconv.Itoa(p)
}

// Received parses everything the collector has printed so far.
func (c *Collector) Received() (*Data, error) {
	f, err := bounded.Open(c.out, "collector debug output")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Parse(io.LimitReader(f, maxOutput))
}

// Wait polls Received every 100 ms until cond holds and returns that Data;
// after timeout it fails t naming what, with the collector's last output.
func (c *Collector) Wait(t testing.TB, timeout time.Duration, what string, cond func(*Data) bool) *Data {
	t.Helper()
	return wait(t, timeout, what, c.Received, cond, func() string { return c.proc.Tail(60) })
}

// wait polls received every 100 ms until cond holds; on an error, or after
// timeout, it fails t naming what, with tail().
func wait(t testing.TB, timeout time.Duration, what string, received func() (*Data, error), cond func(*Data) bool, tail func() string) *Data {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		d, err := received()
		if err != nil {
			t.Fatalf("otelcoltest: %v", err)
		}
		if cond(d) {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("otelcoltest: no %s after %v: %d spans, %d metrics received\n%s", what, timeout, len(d.Spans), len(d.Metrics), tail())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// tailFile is the last 4 KiB of the file at path, for an error message.
func tailFile(path string) string {
	f, err := bounded.Open(path, "collector log")
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > 4096 {
		_, _ = f.Seek(fi.Size()-4096, io.SeekStart)
	}
	b, _ := io.ReadAll(io.LimitReader(f, 4096))
	return string(b)
}

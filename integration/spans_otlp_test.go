// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kernel-exporter/kernel_exporter/internal/otelcoltest"
)

// startSpans starts a collector and the exporter with args, its OTLP span
// exporter pointed at the collector over proto (otelcoltest.GRPC or HTTP)
// and a 200 ms batch delay, and waits until config is up.
func startSpans(t *testing.T, proto, config string, args ...string) (*otelcoltest.Collector, *Exporter) {
	t.Helper()
	c := otelcoltest.Start(t)
	spansEnv(t, c.Endpoint(proto), proto)
	return c, startUp(t, config, args...)
}

// spansEnv points the exporter's OTLP span exporter at endpoint over proto,
// with a 200 ms batch delay and no OTEL_SERVICE_NAME.
func spansEnv(t *testing.T, endpoint, proto string) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
	otlpProto := "http/protobuf"
	if proto == otelcoltest.GRPC {
		otlpProto = "grpc"
	}
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", otlpProto)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "200")
	t.Setenv("OTEL_SERVICE_NAME", "")
	t.Setenv("OTEL_TRACES_EXPORTER", "")
}

// startUp starts the exporter with args and fails t unless config is up.
func startUp(t *testing.T, config string, args ...string) *Exporter {
	t.Helper()
	e := Start(t, args...)
	if v := e.Scrape().Value("kernel_exporter_config_up", L("config", config)); v != 1 {
		t.Fatalf("config %s not up (%v)\n%s", config, v, e.Logs())
	}
	return e
}

// TestSpansOTLPShutdownFlush sets a batch delay of an hour, runs a
// command, and stops the exporter: the command's span, still queued, must
// reach the collector at shutdown, with its exit code.
func TestSpansOTLPShutdownFlush(t *testing.T) {
	c := otelcoltest.Start(t)
	spansEnv(t, c.Endpoint(otelcoltest.HTTP), otelcoltest.HTTP)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "3600000")
	e := startUp(t, "exec_trace", "--programs=exec_trace")
	cmd := exec.Command("/bin/sh", "-c", "exit 7")
	if err := cmd.Run(); err == nil {
		t.Fatal("sh -c 'exit 7' succeeded")
	}
	pid := strconv.Itoa(cmd.Process.Pid)
	Eventually(t, 10*time.Second, func() bool {
		return e.Scrape().Value("kernel_exporter_spans_total", L("config", "exec_trace", "ringbuf", "exec_trace_spans")) >= 1
	}, "no span read")
	time.Sleep(200 * time.Millisecond) // the reader handles the ring buffer in order: the script's record too
	if d, _ := c.Received(); len(d.Spans) != 0 {
		t.Fatalf("%d spans exported before shutdown with an hour's batch delay", len(d.Spans))
	}
	if err := e.Stop(); err != nil {
		t.Fatalf("exporter exit: %v\n%s", err, e.Logs())
	}
	d := c.Wait(t, 10*time.Second, "the script's span after shutdown", func(d *otelcoltest.Data) bool {
		for _, s := range d.Spans {
			if s.Attributes["pid"] == pid {
				return true
			}
		}
		return false
	})
	for _, s := range d.Spans {
		if s.Attributes["pid"] == pid && (s.Name != "sh" || s.Attributes["exit_code"] != "7") {
			t.Errorf("span %+v", s)
		}
	}
	t.Logf("%d spans sent at shutdown", len(d.Spans))
}

// TestSpansOTLP runs the bundled exec_trace program with spans sent to a
// real OpenTelemetry Collector, over gRPC and over HTTP, and runs a shell
// script whose process tree is known:
//
//	sh (exit 5)
//	├── sleep 0.3
//	└── sh (exit 3)
//	    └── sleep 0.2
//
// The four spans must arrive as one trace with that tree (parent ids), the
// names, durations within bounds, pid/ppid/exit_code attributes, the
// config attribute and service.name exec_trace; the self-metrics must
// count them.
func TestSpansOTLP(t *testing.T) {
	for _, proto := range []string{otelcoltest.GRPC, otelcoltest.HTTP} {
		t.Run(proto, func(t *testing.T) {
			c, e := startSpans(t, proto, "exec_trace", "--programs=exec_trace")
			cmd := exec.Command("/bin/sh", "-c", `sleep 0.3; /bin/sh -c "sleep 0.2; exit 3"; exit 5`)
			began := time.Now()
			err := cmd.Run()
			took := time.Since(began)
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 5 {
				t.Fatalf("script: %v, want exit status 5", err)
			}
			pid := strconv.Itoa(cmd.Process.Pid)

			var root otelcoltest.Span
			var tree []otelcoltest.Span
			c.Wait(t, 30*time.Second, "the script's four spans", func(d *otelcoltest.Data) bool {
				root, tree = otelcoltest.Span{}, nil
				for _, s := range d.Spans {
					if s.Attributes["pid"] == pid && s.Resource["service.name"] == "exec_trace" {
						root = s
					}
				}
				for _, s := range d.Spans {
					if root.TraceID != "" && s.TraceID == root.TraceID {
						tree = append(tree, s)
					}
				}
				return len(tree) >= 4
			})
			if len(tree) != 4 {
				t.Fatalf("%d spans in the script's trace, want 4: %+v", len(tree), tree)
			}
			byParent := map[string][]otelcoltest.Span{}
			for _, s := range tree {
				byParent[s.ParentID] = append(byParent[s.ParentID], s)
				if s.Resource["service.name"] != "exec_trace" || s.Attributes["ebpf_exporter.config"] != "exec_trace" || s.Kind != "Internal" {
					t.Errorf("span %s: resource %v attributes %v kind %s", s.Name, s.Resource, s.Attributes, s.Kind)
				}
				if s.Attributes["signal"] != "0" {
					t.Errorf("span %s: signal %q", s.Name, s.Attributes["signal"])
				}
			}
			check := func(s otelcoltest.Span, name, exit string, min, max time.Duration) {
				t.Helper()
				if s.Name != name || s.Attributes["exit_code"] != exit || s.Duration() < min || s.Duration() > max {
					t.Errorf("span %s (pid %s): exit_code %s, duration %v; want %s, exit_code %s, %v to %v",
						s.Name, s.Attributes["pid"], s.Attributes["exit_code"], s.Duration(), name, exit, min, max)
				}
			}
			// The root: the shell this test forked, a child of the test.
			if root.ParentID != "" || len(byParent[""]) != 1 {
				t.Errorf("root %s has parent %q; %d roots", root.Name, root.ParentID, len(byParent[""]))
			}
			check(root, "sh", "5", 500*time.Millisecond, took+100*time.Millisecond)
			if root.Attributes["ppid"] != strconv.Itoa(os.Getpid()) {
				t.Errorf("root ppid %s, want the test's pid %d", root.Attributes["ppid"], os.Getpid())
			}
			kids := byParent[root.SpanID]
			if len(kids) != 2 {
				t.Fatalf("root has %d children, want 2: %+v", len(kids), kids)
			}
			if kids[0].Name != "sleep" {
				kids[0], kids[1] = kids[1], kids[0]
			}
			sleep, inner := kids[0], kids[1]
			check(sleep, "sleep", "0", 300*time.Millisecond, 3*time.Second)
			check(inner, "sh", "3", 200*time.Millisecond, 3*time.Second)
			for _, k := range kids {
				if k.Attributes["ppid"] != pid {
					t.Errorf("child %s ppid %s, want %s", k.Name, k.Attributes["ppid"], pid)
				}
			}
			grand := byParent[inner.SpanID]
			if len(grand) != 1 {
				t.Fatalf("inner sh has %d children, want 1", len(grand))
			}
			check(grand[0], "sleep", "0", 200*time.Millisecond, 3*time.Second)
			if grand[0].Attributes["ppid"] != inner.Attributes["pid"] {
				t.Errorf("grandchild ppid %s, want %s", grand[0].Attributes["ppid"], inner.Attributes["pid"])
			}
			// Children run inside their parent: sleep 0.3 ends before the
			// inner shell starts (the script runs them in turn).
			slack := 5 * time.Millisecond
			for _, s := range []otelcoltest.Span{sleep, inner, grand[0]} {
				if s.Start.Before(root.Start.Add(-slack)) || s.End.After(root.End.Add(slack)) {
					t.Errorf("span %s [%v, %v] outside the root's [%v, %v]", s.Name, s.Start, s.End, root.Start, root.End)
				}
			}
			if !sleep.End.Before(inner.Start.Add(slack)) {
				t.Errorf("sleep 0.3 ended %v, after the inner sh started %v", sleep.End, inner.Start)
			}
			if d := root.Start.Sub(began); d < -time.Second || d > time.Second {
				t.Errorf("root started %v from when the test ran it: the monotonic to wall clock conversion is off", d)
			}

			for _, s := range tree {
				t.Logf("trace %s span %s parent %q: %s pid %s ppid %s exit %s, %v", s.TraceID, s.SpanID, s.ParentID, s.Name, s.Attributes["pid"], s.Attributes["ppid"], s.Attributes["exit_code"], s.Duration())
			}
			ms := e.Scrape()
			if v := ms.Value("kernel_exporter_spans_total", L("config", "exec_trace", "ringbuf", "exec_trace_spans")); v < 4 {
				t.Errorf("kernel_exporter_spans_total = %v, want >= 4", v)
			}
			if v := ms.Value("kernel_exporter_spans_exported_total", nil); v < 4 {
				t.Errorf("kernel_exporter_spans_exported_total = %v, want >= 4", v)
			}
			if v := ms.Value("kernel_exporter_span_errors_total", L("config", "exec_trace", "reason", "short_record")); v != 0 {
				t.Errorf("short records: %v", v)
			}
		})
	}
}

// TestSpansOTLPCompatBioTrace loads a tracing-only config in
// cloudflare/ebpf_exporter's format (testdata/compat/bio_trace: one span
// per block request, a 64-byte record of which the labels describe 60),
// writes then reads 64 O_DIRECT blocks of 64 KiB, and checks the spans
// the collector received over HTTP: per operation at least 90% of the
// syscalls' requests (the kernel completes a few without running the
// program, see TestBioLatencyDirectIO) as root spans on the file's disk
// (majorminor), with operation from the static_map, bytes 65536, a
// duration from 1 µs to 1 s, generated span ids, the record's trace ids
// and service.name bio-trace; and no size errors.
func TestSpansOTLPCompatBioTrace(t *testing.T) {
	const (
		blocks = 64
		block  = 64 << 10
	)
	dir := buildConfigDir(t, compatSrc, "bio_trace")
	io := ioTempDir(t)
	disk, err := diskOf(io)
	if err != nil {
		t.Fatal(err)
	}
	c, e := startSpans(t, otelcoltest.HTTP, "bio_trace", "--programs=none", "--config.dir="+dir, "--config.names=bio_trace")
	writes, reads := directIO(t, io, blocks, block)
	want := map[string]int{"write": writes * 9 / 10, "read": reads * 9 / 10}
	match := func(d *otelcoltest.Data) map[string][]otelcoltest.Span {
		got := map[string][]otelcoltest.Span{}
		for _, s := range d.SpansNamed("block_request") {
			if s.Attributes["device"] == disk && s.Attributes["bytes"] == strconv.Itoa(block) {
				got[s.Attributes["operation"]] = append(got[s.Attributes["operation"]], s)
			}
		}
		return got
	}
	d := c.Wait(t, 30*time.Second, "the O_DIRECT requests' spans", func(d *otelcoltest.Data) bool {
		got := match(d)
		return len(got["write"]) >= want["write"] && len(got["read"]) >= want["read"]
	})
	got := match(d)
	ids := map[string]bool{}
	for op, ss := range got {
		var total time.Duration
		for _, s := range ss {
			total += s.Duration()
			if s.Duration() < time.Microsecond || s.Duration() > time.Second || s.ParentID != "" || len(s.SpanID) != 16 ||
				s.TraceID == "00000000000000000000000000000000" || s.Resource["service.name"] != "bio-trace" || s.Attributes["ebpf_exporter.config"] != "bio_trace" {
				t.Errorf("%s span %+v", op, s)
			}
			if ids[s.SpanID] || ids[s.TraceID] {
				t.Errorf("id seen twice: span %s trace %s", s.SpanID, s.TraceID)
			}
			ids[s.SpanID], ids[s.TraceID] = true, true
		}
		if len(ss) > 0 {
			t.Logf("%s on %s: %d spans for %d syscalls, mean %v", op, disk, len(ss), map[string]int{"write": writes, "read": reads}[op], total/time.Duration(len(ss)))
		}
	}
	ms := e.Scrape()
	for _, reason := range []string{"short_record", "long_record", "decoder"} {
		if v := ms.Value("kernel_exporter_span_errors_total", L("config", "bio_trace", "ringbuf", "bio_trace_spans", "reason", reason)); v != 0 {
			t.Errorf("span errors %s: %v", reason, v)
		}
	}
}

// TestSpansOTLPConfigDown checks that a tracing failure is that config's
// alone: with OTEL_EXPORTER_OTLP_PROTOCOL=http/json (not supported)
// exec_trace is down with a reason naming the variable and value, and
// timers, loaded with it, is up and counting.
func TestSpansOTLPConfigDown(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
	t.Setenv("OTEL_TRACES_EXPORTER", "")
	e := Start(t, "--programs=timers,exec_trace")
	ms := e.Scrape()
	if v := ms.Value("kernel_exporter_config_up", L("config", "exec_trace")); v != 0 {
		t.Errorf("exec_trace up (%v) with an unsupported OTLP protocol", v)
	}
	reasons := ms.LabelValues("kernel_exporter_config_error_info", "reason")
	if len(reasons) != 1 || !strings.Contains(reasons[0], `OTEL_EXPORTER_OTLP_PROTOCOL="http/json": unsupported OTLP protocol`) {
		t.Errorf("reasons %q, want exec_trace's naming the protocol", reasons)
	}
	if v := ms.Value("kernel_exporter_config_up", L("config", "timers")); v != 1 {
		t.Errorf("timers not up (%v)\n%s", v, e.Logs())
	}
}

// TestSpansOTLPReload changes the service of the bio_trace config and
// sends SIGHUP: the old reader stops, the new one exports the spans of
// the next O_DIRECT requests under the new service, over the same
// exporter, and the config stays up.
func TestSpansOTLPReload(t *testing.T) {
	dir := buildConfigDir(t, compatSrc, "bio_trace")
	io := ioTempDir(t)
	disk, err := diskOf(io)
	if err != nil {
		t.Fatal(err)
	}
	c, e := startSpans(t, otelcoltest.HTTP, "bio_trace", "--programs=none", "--config.dir="+dir, "--config.names=bio_trace", "--capabilities.keep=perfmon")
	count := func(d *otelcoltest.Data, service string) int {
		n := 0
		for _, s := range d.Spans {
			if s.Resource["service.name"] == service && s.Attributes["device"] == disk {
				n++
			}
		}
		return n
	}
	directIO(t, io, 16, 64<<10)
	c.Wait(t, 30*time.Second, "bio-trace spans", func(d *otelcoltest.Data) bool { return count(d, "bio-trace") >= 16 })

	y, err := os.ReadFile(filepath.Join(dir, "bio_trace.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	y = []byte(strings.Replace(string(y), "service: bio-trace", "service: bio-trace-reloaded", 1))
	if err := os.WriteFile(filepath.Join(dir, "bio_trace.yaml"), y, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := e.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	Eventually(t, 20*time.Second, func() bool {
		return e.Scrape().Value("kernel_exporter_config_last_reload_successful", nil) == 1 && strings.Contains(e.Logs(), "reload done")
	}, "reload did not finish\n%s", e.Logs)
	directIO(t, io, 16, 64<<10)
	d := c.Wait(t, 30*time.Second, "bio-trace-reloaded spans", func(d *otelcoltest.Data) bool { return count(d, "bio-trace-reloaded") >= 16 })
	t.Logf("spans: %d under the old service, %d under the new", count(d, "bio-trace"), count(d, "bio-trace-reloaded"))
	ms := e.Scrape()
	if v := ms.Value("kernel_exporter_config_up", L("config", "bio_trace")); v != 1 {
		t.Errorf("bio_trace not up after the reload\n%s", e.Logs())
	}
	if v := ms.Series("kernel_exporter_spans_total", L("config", "bio_trace")); v != 1 {
		t.Errorf("%d kernel_exporter_spans_total series for bio_trace, want the new reader's only", v)
	}
}

// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/kernel-exporter/kernel_exporter/internal/otelcoltest"
)

// The guests of make test-kernels have no clang: the object is committed.
//
//go:embed testdata/fallback/fsync_trace.bpf.o testdata/fallback/fsync_trace.yaml
var fsyncTraceFS embed.FS

// TestMatrixSpansKprobe loads fsync_trace (a kprobe and a kretprobe on
// vfs_fsync_range submitting one span per call to a ring buffer) with its
// spans sent over OTLP/HTTP to a receiver in the test process (the guests
// run no collector), calls fsync 20 times, and checks the spans of this
// process: 20 of them (at least, exactly on a quiet machine), each a root
// span with its own trace id from the record, a generated span id, a
// duration from 1 ns to 1 s, ret 0, service fsync-trace. Where the kernel
// has no kprobes (this project's CI host) the config must be down with a
// "not supported" reason, and the test is skipped.
func TestMatrixSpansKprobe(t *testing.T) {
	r := matrixReport(t, "fsync_trace (spans)", "kprobe")
	dir := t.TempDir()
	for _, f := range []string{"fsync_trace.bpf.o", "fsync_trace.yaml"} {
		b, err := fs.ReadFile(fsyncTraceFS, "testdata/fallback/"+f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rcv := otelcoltest.StartReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.Endpoint)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "200")
	t.Setenv("OTEL_TRACES_EXPORTER", "")
	e := Start(t, "--programs=none", "--config.dir="+dir, "--config.names=fsync_trace")
	checkChoice(t, e, "fsync_trace", modeKprobe.expect(t, "kprobe"), r)

	const n = 20
	fsyncN(t, n)
	pid := strconv.Itoa(os.Getpid())
	mine := func(d *otelcoltest.Data) []otelcoltest.Span {
		var out []otelcoltest.Span
		for _, s := range d.SpansNamed("vfs_fsync_range") {
			if s.Attributes["pid"] == pid {
				out = append(out, s)
			}
		}
		return out
	}
	d := rcv.Wait(t, 30*time.Second, "20 vfs_fsync_range spans", func(d *otelcoltest.Data) bool { return len(mine(d)) >= n })
	spans := mine(d)
	checkCalls(t, "vfs_fsync_range spans", float64(len(spans)), n)
	traces := map[string]bool{}
	var total time.Duration
	for _, s := range spans {
		traces[s.TraceID] = true
		total += s.Duration()
		if s.ParentID != "" || len(s.SpanID) != 16 || s.SpanID == "0000000000000000" || s.Attributes["ret"] != "0" ||
			s.Duration() <= 0 || s.Duration() > time.Second || s.Resource["service.name"] != "fsync-trace" {
			t.Errorf("span %+v", s)
		}
	}
	if len(traces) != len(spans) {
		t.Errorf("%d trace ids for %d spans, want one each (random in BPF)", len(traces), len(spans))
	}
	if v := e.Scrape().Value("kernel_exporter_spans_total", L("config", "fsync_trace", "ringbuf", "fsync_trace_spans")); v < n {
		t.Errorf("kernel_exporter_spans_total = %v, want >= %d", v, n)
	}
	r.result = fmt.Sprintf("spans: %d vfs_fsync_range, mean %v", len(spans), total/time.Duration(len(spans)))
}

// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"fmt"
	"html"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kernel-exporter/kernel_exporter/config"
	"github.com/kernel-exporter/kernel_exporter/programs"
)

// spanPrograms returns the bundled programs with a tracing section, which
// --programs=all runs only when their spans have a destination.
func spanPrograms(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, n := range programs.Names() {
		y, err := fs.ReadFile(programs.FS, n+".yaml")
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Parse(n+".yaml", y)
		if err != nil {
			t.Fatal(err)
		}
		if len(cfg.Tracing.Spans) > 0 {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		t.Fatal("no bundled program has spans: exec_trace should")
	}
	return out
}

// noSpanDestination clears the variables that give spans a destination.
func noSpanDestination(t *testing.T) {
	for _, v := range []string{"OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
		t.Setenv(v, "")
	}
}

// TestFlagsUnknownProgram checks that a name in --programs that is not a
// bundled program is a flag error, for serve and dump: exit 2 at once,
// with the closest names (it started and served with that config down).
func TestFlagsUnknownProgram(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--programs=biolatncy"}, `--programs: no bundled program "biolatncy" (did you mean biolatency?)`},
		{[]string{"--programs=timers,runqlta"}, `--programs: no bundled program "runqlta" (did you mean runqlat?)`},
		{[]string{"dump", "--programs=biolatncy"}, `--programs: no bundled program "biolatncy" (did you mean biolatency?)`},
		{[]string{"--programs=nosuch"}, `--programs: no bundled program "nosuch" (bundled: accept_latency, `},
	} {
		start := time.Now()
		args := tc.args
		if args[0] != "dump" {
			// Should it serve, then on a port of its own.
			args = append(args, fmt.Sprintf("--web.listen-address=127.0.0.1:%d", freePort(t)))
		}
		_, stderr, code := runExporter(t, args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
		t.Logf("%v: exit %d after %v: %s", tc.args, code, time.Since(start).Round(time.Millisecond), strings.TrimSpace(stderr))
	}
}

// TestFlagsNamed checks the flag errors the issue found: dump took --web.*
// flags silently, --duration=abc did not name its flag, and
// --decoder.cache-size=-1 was accepted. Each is exit 2 with one line
// naming the flag (bad flags of every command: cmd/kernel_exporter's
// TestBadFlags).
func TestFlagsNamed(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"dump", "--programs=timers", "--web.listen-address=127.0.0.1:1"}, "--web.listen-address applies to serve, not dump"},
		{[]string{"dump", "--programs=timers", "--web.telemetry-path=/m"}, "--web.telemetry-path applies to serve, not dump"},
		{[]string{"dump", "--programs=timers", "--duration=abc"}, `--duration "abc": time: invalid duration "abc"`},
		{[]string{"--programs=timers", "--decoder.cache-size=-1", fmt.Sprintf("--web.listen-address=127.0.0.1:%d", freePort(t))}, "--decoder.cache-size -1: must be 1 to 16777216"},
		{[]string{"dump", "--programs=timers", "--decoder.cache-size=-1"}, "--decoder.cache-size -1: must be 1 to 16777216"},
		{[]string{"hist", "biolatency", "--decoder.cache-size=0"}, "--decoder.cache-size 0: must be 1 to 16777216"},
	} {
		_, stderr, code := runExporter(t, tc.args...)
		if code != 2 || stderr != "kernel_exporter: error: "+tc.want+", try --help\n" {
			t.Errorf("%v: exit %d, stderr %q; want 2 and the one line %q", tc.args, code, stderr, tc.want)
		}
	}
}

// TestFlagsAllLeavesOutSpans checks what --programs=all runs: every
// program that serves metrics, and a program with spans (exec_trace) only
// when the spans have a destination. Without one, exec_trace is not
// started (it was, and sent its spans to the SDK's default, localhost,
// where they failed thousands of times), and the log says so; named as
// well, it runs, and the landing page marks that its spans go nowhere.
// With an OTLP endpoint set, all runs it, the landing page shows where
// its spans go, and they arrive there.
func TestFlagsAllLeavesOutSpans(t *testing.T) {
	withSpans := spanPrograms(t)
	t.Run("no destination", func(t *testing.T) {
		noSpanDestination(t)
		e := Start(t, "--programs=all")
		ms := e.Scrape()
		for _, n := range withSpans {
			if ms.Series("kernel_exporter_config_up", L("config", n)) != 0 {
				t.Errorf("--programs=all with no span destination started %s", n)
			}
		}
		if ms.Series("kernel_exporter_config_up", L("config", "timers")) != 1 {
			t.Errorf("--programs=all did not start timers")
		}
		if logs := e.Logs(); !strings.Contains(logs, "--programs=all leaves out the programs whose spans would go nowhere") || !strings.Contains(logs, "programs="+strings.Join(withSpans, ",")) {
			t.Errorf("the log does not say which programs all leaves out:\n%s", logs)
		}
	})
	t.Run("named", func(t *testing.T) {
		noSpanDestination(t)
		e := startUp(t, "exec_trace", "--programs=all,exec_trace")
		row := landingRow(e.Get("/"), "exec_trace")
		if !strings.Contains(row, `<span class="mark">spans go nowhere</span>: `+html.EscapeString("nowhere set: neither OTEL_EXPORTER_OTLP_TRACES_ENDPOINT nor OTEL_EXPORTER_OTLP_ENDPOINT is set")) {
			t.Errorf("landing row of exec_trace does not say its spans go nowhere: %s", row)
		}
	})
	t.Run("endpoint", func(t *testing.T) {
		noSpanDestination(t)
		var posts atomic.Int64
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<24))
			if r.Method == http.MethodPost && r.URL.Path == "/v1/traces" {
				posts.Add(1)
			}
			w.Header().Set("Content-Type", "application/x-protobuf")
		}))
		defer srv.Close()
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
		t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
		e := startUp(t, withSpans[0], "--programs=all")
		ms := e.Scrape()
		up := 0
		for _, n := range programs.Names() {
			if ms.Series("kernel_exporter_config_up", L("config", n)) != 1 {
				t.Errorf("--programs=all with a span destination did not start %s", n)
			}
			if ms.Value("kernel_exporter_config_up", L("config", n)) == 1 {
				up++
			}
		}
		row := landingRow(e.Get("/"), withSpans[0])
		if want := fmt.Sprintf("spans: OTLP http/protobuf to %s (OTEL_EXPORTER_OTLP_ENDPOINT)", srv.URL); !strings.Contains(row, want) || strings.Contains(row, "nowhere") {
			t.Errorf("landing row of %s lacks %q: %s", withSpans[0], want, row)
		}
		// exec_trace: a process started now ends in a span.
		Eventually(t, 20*time.Second, func() bool {
			_ = exec.Command("true").Run()
			return posts.Load() > 0
		}, "no span request reached %s", srv.URL)
		t.Logf("%d programs started, %d of them up; %d OTLP span requests received", len(programs.Names()), up, posts.Load())
	})
}

// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"errors"
	"fmt"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// timersYAML is a copy of the timers config, with known line numbers:
// line 3 is the counter's name, 5 its labels, 9 the label's decoder.
const timersYAML = `metrics:
  counters:
    - name: %s
      help: Timer starts by callback function
      labels:
        - name: function
          size: %d
          decoders:
            - name: %s
`

// brokenConfigs writes into dir a good user config (the bundled timers
// program under the name "good") and four broken ones, and returns the
// broken ones' names with the exact reason each must be reported with.
func brokenConfigs(t *testing.T, dir string) (names []string, reasons map[string]string) {
	t.Helper()
	copyFile := func(src, dst string) {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	obj := filepath.Join(repoRoot, "programs", "timers.bpf.o")
	copyFile(filepath.Join(repoRoot, "programs", "timers.yaml"), filepath.Join(dir, "good.yaml"))
	copyFile(obj, filepath.Join(dir, "good.bpf.o"))

	cfg := func(name, yaml string, withObject bool) {
		if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		if withObject {
			copyFile(obj, filepath.Join(dir, name+".bpf.o"))
		}
	}
	file := func(name string) string { return filepath.Join(dir, name+".yaml") }
	reasons = map[string]string{}

	// (a) A 4-byte label for the map's 8-byte key.
	cfg("bad_keysize", fmt.Sprintf(timersYAML, "timer_starts_total", 4, "uint"), true)
	reasons["bad_keysize"] = file("bad_keysize") + `:5: metrics.counters[0].labels: label sizes add up to 4 bytes, but map "timer_starts_total" has 8-byte keys`
	// (b) A decoder that does not exist (the list of known ones follows).
	cfg("bad_decoder", fmt.Sprintf(timersYAML, "timer_starts_total", 8, "nosuch"), true)
	reasons["bad_decoder"] = file("bad_decoder") + `:9: metrics.counters[0].labels[0].decoders[0].name: unknown decoder "nosuch" (known: `
	// (c) No bad_noobject.bpf.o next to the YAML.
	cfg("bad_noobject", fmt.Sprintf(timersYAML, "timer_starts_total", 8, "ksym"), false)
	reasons["bad_noobject"] = file("bad_noobject") + ": BPF object " + filepath.Join(dir, "bad_noobject.bpf.o") + " not found"
	// (d) A metric whose map is not in the object.
	cfg("bad_nomap", fmt.Sprintf(timersYAML, "timer_stops_total", 8, "ksym"), true)
	reasons["bad_nomap"] = file("bad_nomap") + `:3: metrics.counters[0].name: map "timer_stops_total" not found in ` + filepath.Join(dir, "bad_nomap.bpf.o") + " (maps: timer_starts_total)"

	return []string{"bad_keysize", "bad_decoder", "bad_noobject", "bad_nomap"}, reasons
}

// TestFailureIsolation starts one good user config among four broken ones:
// the good one must serve moving metrics, each broken one must be down with
// its exact reason in the metrics and on the landing page.
func TestFailureIsolation(t *testing.T) {
	dir := t.TempDir()
	bad, reasons := brokenConfigs(t, dir)
	names := "good," + strings.Join(bad, ",")
	e := Start(t, "--programs=none", "--config.dir="+dir, "--config.names="+names)

	// The good config counts timers: 20 loopback connections arm 20
	// request-socket timers (see TestTimerStarts).
	ms := e.Scrape()
	if v := ms.Value("kernel_exporter_config_up", L("config", "good")); v != 1 {
		t.Fatalf("config_up{config=good} = %v, want 1\n%s", v, e.Logs())
	}
	if v := ms.Value("kernel_exporter_program_attached", L("config", "good")); v != 1 {
		t.Errorf("program_attached{config=good} = %v, want 1", v)
	}
	const metric = "kernel_timer_starts_total"
	before := ms.Value(metric, L("function", "reqsk_timer_handler"))
	tcpPingPong(t, 20, 1)
	var d float64
	Eventually(t, 5*time.Second, func() bool {
		d = e.Scrape().Value(metric, L("function", "reqsk_timer_handler")) - before
		return d >= 20
	}, "good config: %s{function=reqsk_timer_handler} moved by %v after 20 connections, want >= 20", metric, d)

	ms = e.Scrape()
	for _, name := range bad {
		if n := ms.Series("kernel_exporter_config_up", L("config", name)); n != 1 {
			t.Errorf("config_up{config=%q}: %d series, want 1", name, n)
		}
		if v := ms.Value("kernel_exporter_config_up", L("config", name)); v != 0 {
			t.Errorf("config_up{config=%q} = %v, want 0", name, v)
		}
		got := ms.LabelValues("kernel_exporter_config_error_info", "reason")
		found := ""
		if mf, ok := ms["kernel_exporter_config_error_info"]; ok {
			for _, m := range mf.GetMetric() {
				if matches(m, L("config", name)) {
					for _, lp := range m.GetLabel() {
						if lp.GetName() == "reason" {
							found = lp.GetValue()
						}
					}
				}
			}
		}
		if !strings.Contains(found, reasons[name]) {
			t.Errorf("config_error_info{config=%q} reason = %q, want it to contain %q (all reasons: %q)", name, found, reasons[name], got)
		}
	}
	if n := ms.Series("kernel_exporter_config_error_info", L("config", "good")); n != 0 {
		t.Errorf("config_error_info{config=good}: %d series, want 0", n)
	}

	page := e.Get("/")
	if row := landingRow(page, "good"); !strings.Contains(row, `class="up">up<`) {
		t.Errorf("landing page: config good not shown up, row %q", row)
	}
	for _, name := range bad {
		row := landingRow(page, name)
		if !strings.Contains(row, `class="down">down<`) || !strings.Contains(row, html.EscapeString(reasons[name])) {
			t.Errorf("landing page: config %s not shown down with reason %q; row %q", name, reasons[name], row)
		}
	}
}

// runExporter runs the binary to completion (at most 30 s) and returns its
// stdout, stderr and exit code.
func runExporter(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ctx.Err() == nil:
		code = ee.ExitCode()
	default:
		t.Fatalf("run kernel_exporter %v: %v\n%s%s", args, err, o.String(), e.String())
	}
	return o.String(), e.String(), code
}

// TestConfigCheckAndStrict checks that --config.check reports one line per
// config and fails, and that --config.strict refuses to start, when some
// configs are broken.
func TestConfigCheckAndStrict(t *testing.T) {
	dir := t.TempDir()
	bad, reasons := brokenConfigs(t, dir)
	args := []string{"--programs=none", "--config.dir=" + dir, "--config.names=good," + strings.Join(bad, ",")}

	out, errOut, code := runExporter(t, append(args, "--config.check")...)
	if code == 0 {
		t.Errorf("--config.check exited 0 with broken configs\n%s", out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 1+len(bad) {
		t.Errorf("--config.check printed %d lines, want %d:\n%s", len(lines), 1+len(bad), out)
	}
	want := map[string]string{"good": "ok    good (" + filepath.Join(dir, "good.yaml") + "): 1 program attached"}
	for _, name := range bad {
		want[name] = "FAIL  " + name + " (" + filepath.Join(dir, name+".yaml") + "): " + reasons[name]
	}
	for _, prefix := range want {
		n := 0
		for _, l := range lines {
			if strings.HasPrefix(l, prefix) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("--config.check: %d lines start with %q, want 1\nstdout:\n%s\nstderr:\n%s", n, prefix, out, errOut)
		}
	}

	port := freePort(t)
	out, errOut, code = runExporter(t, append(args, "--config.strict", fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port))...)
	if code == 0 {
		t.Errorf("--config.strict exited 0 with broken configs\n%s%s", out, errOut)
	}
	if !strings.Contains(errOut, "config.strict") {
		t.Errorf("--config.strict: log does not say why it stopped:\n%s", errOut)
	}
}

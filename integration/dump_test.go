// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prom2json"
)

// dumpRun is one finished kernel_exporter dump.
type dumpRun struct {
	stdout, stderr string
	code           int
	// held are the BPF programs the process held while it counted, by ID,
	// with their kernel names.
	held map[ebpf.ProgramID]string
}

// runDump runs kernel_exporter with args (starting with "dump") while
// sleep 0.01 runs in a loop, so that the scheduler programs see wakeups,
// and records the programs the process holds once its loads have ended.
func runDump(t *testing.T, args ...string) dumpRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	var stdout bytes.Buffer
	stderr := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = &stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var r dumpRun
	var err error
	for counting := false; ; {
		select {
		case err = <-done:
		case <-time.After(10 * time.Millisecond):
			if !counting && strings.Contains(stderr.String(), "dump: every config's load has ended") {
				counting = true
				r.held = map[ebpf.ProgramID]string{}
				all := programIDs(t)
				for id := range bpfFDs(t, cmd.Process.Pid)["prog_id"] {
					r.held[ebpf.ProgramID(id)] = all[ebpf.ProgramID(id)]
				}
			}
			_ = exec.Command("sleep", "0.01").Run()
			continue
		}
		break
	}
	r.stdout, r.stderr = stdout.String(), stderr.String()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ee.Exited():
		r.code = ee.ExitCode()
	default:
		t.Fatalf("kernel_exporter %v: %v\n%s", args, err, r.stderr)
	}
	if r.held == nil {
		t.Fatalf("kernel_exporter %v never reported the end of its loads (exit %d)\n%s", args, r.code, r.stderr)
	}
	return r
}

// checkNothingLeft fails unless every program r's process held is gone
// from the kernel (enumerated with BPF_PROG_GET_NEXT_ID) and the held set
// holds a program named after each program the dump reported attached.
func checkNothingLeft(t *testing.T, r dumpRun, attached []string) {
	t.Helper()
	for _, p := range attached {
		found := false
		for _, n := range r.held {
			// Without BTF the kernel keeps only 15 bytes of a name.
			found = found || n == p || (len(n) == 15 && strings.HasPrefix(p, n))
		}
		if !found {
			t.Errorf("program %s was attached, but the dump held no program of that name (held %v)", p, r.held)
		}
	}
	var left []string
	Eventually(t, 10*time.Second, func() bool {
		left = left[:0]
		now := programIDs(t)
		for id, name := range r.held {
			if now[id] == name {
				left = append(left, fmt.Sprintf("program %d (%s)", id, name))
			}
		}
		return len(left) == 0
	}, "after the dump exited, still loaded: %v", left)
}

// jsonHistogram is a prom2json.Histogram with its buckets typed as a
// classic histogram's (upper bound -> cumulative count).
type jsonHistogram struct {
	Labels  map[string]string `json:"labels"`
	Buckets map[string]string `json:"buckets"`
	Count   string            `json:"count"`
	Sum     string            `json:"sum"`
}

// TestDumpJSON runs a 3 s JSON dump of runqlat while processes sleep and
// wake: stdout decodes into prom2json's types, the run-queue latency
// histogram has observations in its buckets, the config is up, no Go
// runtime metric is printed, the exit code is 0, and no program of the
// dump is left loaded.
func TestDumpJSON(t *testing.T) {
	const metric = "kernel_run_queue_latency_seconds"
	r := runDump(t, "dump", "--duration=3s", "--format=json", "--programs=runqlat")
	if r.code != 0 {
		t.Fatalf("dump exit code %d, want 0\n%s", r.code, r.stderr)
	}
	var fams []*prom2json.Family
	if err := json.Unmarshal([]byte(r.stdout), &fams); err != nil {
		t.Fatalf("stdout does not decode into []*prom2json.Family: %v\n%s", err, r.stdout)
	}
	byName := map[string]*prom2json.Family{}
	for _, f := range fams {
		byName[f.Name] = f
		if strings.HasPrefix(f.Name, "go_") || strings.HasPrefix(f.Name, "process_") {
			t.Errorf("the dump holds the runtime metric %s", f.Name)
		}
	}
	f := byName[metric]
	if f == nil || f.Type != "HISTOGRAM" || len(f.Metrics) != 1 {
		t.Fatalf("%s: %+v, want one histogram series", metric, f)
	}
	var hs []jsonHistogram
	b, _ := json.Marshal(f.Metrics)
	if err := json.Unmarshal(b, &hs); err != nil {
		t.Fatalf("%s: %v", metric, err)
	}
	h := hs[0]
	if h.Count == "0" || h.Count == "" || len(h.Buckets) < 2 || h.Buckets["+Inf"] != h.Count {
		t.Errorf("%s: count %q, %d buckets (+Inf %q): want observations in classic buckets", metric, h.Count, len(h.Buckets), h.Buckets["+Inf"])
	}
	var attached []string
	if up := byName["kernel_exporter_config_up"]; up == nil {
		t.Error("no kernel_exporter_config_up")
	} else {
		var ms []prom2json.Metric
		b, _ := json.Marshal(up.Metrics)
		_ = json.Unmarshal(b, &ms)
		if len(ms) != 1 || ms[0].Labels["config"] != "runqlat" || ms[0].Value != "1" {
			t.Errorf("kernel_exporter_config_up = %+v, want runqlat 1", ms)
		}
	}
	if a := byName["kernel_exporter_program_attached"]; a != nil {
		var ms []prom2json.Metric
		b, _ := json.Marshal(a.Metrics)
		_ = json.Unmarshal(b, &ms)
		for _, m := range ms {
			if m.Value == "1" {
				attached = append(attached, m.Labels["program"])
			}
		}
	}
	if len(attached) == 0 {
		t.Errorf("no program attached in the dump")
	}
	t.Logf("%s: count %s, sum %s, %d buckets; programs held %v", metric, h.Count, h.Sum, len(h.Buckets), r.held)
	checkNothingLeft(t, r, attached)
}

// TestDumpText runs a text dump of runqlat: stdout parses with expfmt and
// holds the histogram with observations and the status metrics, every
// family once in one list sorted by name (docs/dump.md: runqlat's
// kernel_run_queue_* after kernel_exporter_*, not grouped first).
func TestDumpText(t *testing.T) {
	const metric = "kernel_run_queue_latency_seconds"
	r := runDump(t, "dump", "--duration=1s", "--format=text", "--programs=runqlat")
	if r.code != 0 {
		t.Fatalf("dump exit code %d, want 0\n%s", r.code, r.stderr)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(r.stdout))
	if err != nil {
		t.Fatalf("stdout does not parse as the text exposition: %v\n%s", err, r.stdout)
	}
	ms := Metrics(mfs)
	if c, _, _ := ms.Hist(metric, nil, 0); c == 0 {
		t.Errorf("%s: no observations in 1 s of sleeps and wakeups", metric)
	}
	if v := ms.Value("kernel_exporter_config_up", L("config", "runqlat")); v != 1 {
		t.Errorf("kernel_exporter_config_up{config=runqlat} = %v, want 1", v)
	}
	if _, ok := ms["go_goroutines"]; ok {
		t.Error("the dump holds go_goroutines")
	}
	var families []string
	for _, line := range strings.Split(r.stdout, "\n") {
		if f, ok := strings.CutPrefix(line, "# TYPE "); ok {
			families = append(families, strings.Fields(f)[0])
		}
	}
	if !slices.IsSorted(families) || slices.Index(families, metric) < slices.Index(families, "kernel_exporter_config_up") {
		t.Errorf("families in the order %q, want sorted by name with %s after kernel_exporter_config_up", families, metric)
	}
	checkNothingLeft(t, r, ms.LabelValues("kernel_exporter_program_attached", "program"))
}

// TestDumpFailedConfig runs a dump with one config that cannot load: the
// other is still dumped, stderr names the failed config and its reason,
// the output shows it down, and the exit code is 1.
func TestDumpFailedConfig(t *testing.T) {
	// A user config whose object is missing (a bundled program that does
	// not exist is a flag error: TestFlagsUnknownProgram).
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "nosuch.yaml"), []byte(fmt.Sprintf(timersYAML, "nosuch_total", 8, "ksym")), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runDump(t, "dump", "--duration=1s", "--programs=runqlat", "--config.dir="+dir, "--config.names=nosuch")
	if r.code != 1 {
		t.Errorf("dump exit code %d, want 1\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, fmt.Sprintf("kernel_exporter dump: config nosuch (%s) failed: %s: BPF object %s not found", filepath.Join(dir, "nosuch.yaml"), filepath.Join(dir, "nosuch.yaml"), filepath.Join(dir, "nosuch.bpf.o"))) {
		t.Errorf("stderr does not name the failed config and its reason:\n%s", r.stderr)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(r.stdout))
	if err != nil {
		t.Fatalf("stdout does not parse: %v", err)
	}
	ms := Metrics(mfs)
	if v := ms.Value("kernel_exporter_config_up", L("config", "nosuch")); v != 0 || ms.Series("kernel_exporter_config_up", L("config", "nosuch")) != 1 {
		t.Errorf("kernel_exporter_config_up{config=nosuch} = %v, want one series at 0", v)
	}
	if ms.Series("kernel_exporter_config_error_info", L("config", "nosuch")) != 1 {
		t.Error("no kernel_exporter_config_error_info{config=nosuch}")
	}
	if v := ms.Value("kernel_exporter_config_up", L("config", "runqlat")); v != 1 {
		t.Errorf("kernel_exporter_config_up{config=runqlat} = %v, want 1", v)
	}
	checkNothingLeft(t, r, ms.LabelValues("kernel_exporter_program_attached", "program"))
}

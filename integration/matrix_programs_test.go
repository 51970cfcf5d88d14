// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/kernel-exporter/kernel_exporter/internal/plural"
	"github.com/kernel-exporter/kernel_exporter/programs"
)

// TestMatrixPrograms starts every bundled program at once (--programs=all)
// and prints one MATRIX row per program: "up" with its attach kinds, or
// "down" with the reason the exporter gives. Every down program must be
// down because this kernel lacks something, and the reason must name it
// ("not supported by this kernel", a requires: line, a missing kernel
// function or helper); any other reason fails the test, as does a
// tracepoint-only program (tracepointPrograms) that is down on this host.
//
// KE_MATRIX_DOWN (make test-kernels sets it per kernel) pins the programs
// expected down on this kernel, comma-separated ("none" for none): a
// program that comes up or goes down against it fails the test, so the
// per-kernel status in docs/kernel-matrix.md cannot drift unnoticed.
func TestMatrixPrograms(t *testing.T) {
	// Programs with spans are named (all leaves them out while spans go
	// nowhere); their spans are decoded and counted, not sent.
	noSpanDestination(t)
	t.Setenv("OTEL_TRACES_EXPORTER", "none")
	e := Start(t, "--programs=all,"+strings.Join(spanPrograms(t), ","))
	ms := e.Scrape()
	names := programs.Names()
	var down []string
	for _, name := range names {
		if ms.Value("kernel_exporter_config_up", L("config", name)) != 1 {
			down = append(down, name)
		}
		// A subtest per program: its row is printed when it ends, in name
		// order.
		t.Run(name, func(t *testing.T) { programRow(t, ms, name) })
	}
	if want, ok := os.LookupEnv("KE_MATRIX_DOWN"); ok && want != "" {
		var w []string
		if want != "none" {
			w = strings.Split(want, ",")
		}
		sort.Strings(w)
		if !slices.Equal(w, down) {
			t.Errorf("programs down on this kernel: %v, KE_MATRIX_DOWN expects %v", down, w)
		}
	}
	t.Logf("%d of %d bundled programs up; down: %v", len(names)-len(down), len(names), down)
}

// programRow checks one program's state in ms and reports its MATRIX row.
func programRow(t *testing.T, ms Metrics, name string) {
	r := matrixReport(t, name, "all")
	if ms.Value("kernel_exporter_config_up", L("config", name)) == 1 {
		var kinds []string
		n := 0
		for _, m := range ms["kernel_exporter_program_attached"].GetMetric() {
			if !matches(m, L("config", name)) {
				continue
			}
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "section" {
					k, _, _ := strings.Cut(lp.GetValue(), "/")
					if !slices.Contains(kinds, k) {
						kinds = append(kinds, k)
					}
				}
			}
			if m.GetGauge().GetValue() != 1 {
				t.Errorf("config %s is up but a program is not attached\n%s", name, ms.seriesDump("kernel_exporter_program_attached"))
			}
			n++
		}
		sort.Strings(kinds)
		r.attach = fmt.Sprintf("%s (%s)", strings.Join(kinds, "+"), plural.Count(n, "program"))
		r.result = "up"
		return
	}
	reason := errorReason(ms, name)
	r.result = "down: " + strings.TrimPrefix(reason, "programs/"+name+".bpf.o: ")
	if !namesMissingFeature(reason) {
		t.Errorf("program %s is down for a reason that names no missing kernel feature: %q", name, reason)
	}
	if os.Getenv("KE_MATRIX_DOWN") == "" && slices.Contains(tracepointPrograms, name) {
		t.Errorf("tracepoint program %s is down: %q", name, reason)
	}
}

// namesMissingFeature reports whether a down config's reason says which
// kernel feature, function or helper this kernel lacks.
func namesMissingFeature(reason string) bool {
	for _, s := range []string{"not supported by this kernel", "requires ", "does not exist in this kernel"} {
		if strings.Contains(reason, s) {
			return true
		}
	}
	return false
}

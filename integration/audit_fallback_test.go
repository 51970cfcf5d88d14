// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestAuditFallback is the self-audit's third fault: a fallback that sees
// fewer events. The test config audit_fallback (testdata/fallback) counts
// context switches on tp_btf/sched_switch, else on the tracepoint
// sched:sched_wakeup, which fires once per wakeup where the kernel counts
// a switch in and a switch out (and preemptions without a wakeup), and is
// audited against /proc/stat ctxt every 2 s. With the preferred program
// (it attaches on this kernel) the ratio must be within [0.98, 1.02]; with
// tp_btf disabled (--attach.disable=tp_btf, as on a kernel without it) the
// loader falls back to the wakeup tracepoint and the ratio must be below
// 0.98 two intervals after the config is up, and marked on the landing
// page. A load of 4 threads sleeping 200 µs at a time keeps switches
// coming.
func TestAuditFallback(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"audit_fallback.bpf.o", "audit_fallback.yaml"} {
		b, err := os.ReadFile(filepath.Join(repoRoot, "integration", "testdata", "fallback", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
					time.Sleep(200 * time.Microsecond)
				}
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()

	for _, tc := range []struct {
		name, program string
		args          []string
		inBand        bool
	}{
		{"preferred", "switch_btf", nil, true},
		{"fallback", "wakeup_tracepoint", []string{"--attach.disable=tp_btf"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := Start(t, append([]string{"--programs=none", "--config.dir=" + dir, "--config.names=audit_fallback",
				"--audit.interval=" + auditInterval.String()}, tc.args...)...)
			waitUp(t, e, "audit_fallback")
			up := time.Now()
			ms := e.Scrape()
			if v := ms.Value("kernel_exporter_program_attached", L("config", "audit_fallback", "program", tc.program, "alternative", "switch")); v != 1 {
				t.Fatalf("program %s attached = %v, want 1\n%s", tc.program, v, e.Logs())
			}
			// The first interval sets the baseline (at start-up), the
			// second compares: two intervals after the config is up, and
			// a second of slack for the tick, a ratio is served.
			time.Sleep(2*auditInterval + time.Second - time.Since(up))
			var ratios []string
			for i := range 4 {
				if i > 0 {
					time.Sleep(auditInterval)
				}
				ms := e.Scrape()
				want := L("config", "audit_fallback", "source", "context_switches")
				if ms.Series("kernel_exporter_audit_ratio", want) != 1 {
					t.Fatalf("no audit ratio %.1f s after the config came up\n%s", time.Since(up).Seconds(), e.Logs())
				}
				r := ms.Value("kernel_exporter_audit_ratio", want)
				tot := auditTotals(ms)["audit_fallback/context_switches"]
				ratios = append(ratios, fmt.Sprintf("%.4f (totals ours %.0f, kernel %.0f)", r, tot[0], tot[1]))
				if inBand := r >= 0.98 && r <= 1.02; inBand != tc.inBand {
					t.Errorf("interval %d: ratio %.4f with %s, want in [0.98, 1.02]: %v", i+1, r, tc.program, tc.inBand)
				}
			}
			t.Logf("%s (%s): ratios %s", tc.name, tc.program, strings.Join(ratios, ", "))
			row := landingRow(e.Get("/"), "audit_fallback")
			want := `context_switches <span class="">`
			if !tc.inBand {
				want = `context_switches <span class="mark">`
			}
			if !strings.Contains(row, want) {
				t.Errorf("landing row lacks %q:\n%s", want, row)
			}
		})
	}
}

// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/kernel-exporter/kernel_exporter/collector"
	"github.com/kernel-exporter/kernel_exporter/exporter"
	"github.com/kernel-exporter/kernel_exporter/internal/plural"
	"github.com/kernel-exporter/kernel_exporter/runcount"
)

// runCheck is serve --config.check: load and attach every config, print
// one line per config and exit 1 if any failed.
func (f *serveFlags) runCheck(e *env) int {
	exp := f.load.exporter(nil, e.log)
	defer exp.Close()
	ctx, stop := signalContext(e.log)
	defer stop()
	var runs *runcount.Window
	if f.verbose {
		// Run counts since the load: statistics on before it.
		var err error
		runs, err = runcount.Enable(exp.Status)
		defer runs.Close()
		if err != nil {
			e.log.Info("--config.check: cannot tell programs that never ran", "err", err)
		}
	}
	exp.Start(ctx)
	<-exp.Loaded()
	if ctx.Err() != nil {
		return 1
	}
	return report(e.stdout, exp, f.verbose, runs)
}

// report prints one line per config and returns 1 if any failed; with
// verbose, each config's layouts and, from runs (nil: none), the programs
// that ran 0 times since the load.
func report(w io.Writer, exp *exporter.Exporter, verbose bool, runs *runcount.Window) int {
	rc := 0
	idle := map[string][]runcount.Idle{}
	span := ""
	if runs != nil {
		for _, i := range runs.Idle() {
			idle[i.Config] = append(idle[i.Config], i)
		}
		span = fmt.Sprintf("in the %v since its load", runcount.Round(runs.Elapsed()))
	}
	for _, st := range exp.Status.States() {
		if st.Up {
			var alts []string
			for _, a := range st.Alternatives {
				chosen := a.Chosen
				if chosen == "" {
					chosen = "none works"
				}
				alts = append(alts, a.Name+": "+chosen)
			}
			extra := ""
			if len(alts) > 0 {
				extra = " (" + strings.Join(alts, "; ") + ")"
			}
			fmt.Fprintf(w, "ok    %s (%s): %s attached%s\n", st.Name, st.Source, plural.Count(len(st.Programs), "program"), extra)
			warnings(w, st)
			for _, i := range idle[st.Name] {
				fmt.Fprintf(w, "idle  %s (%s): %s\n", st.Name, st.Source, i.Message(span))
			}
			if verbose && st.Collector != nil {
				printLayouts(w, st.Collector.Layouts())
			}
			continue
		}
		rc = 1
		fmt.Fprintf(w, "FAIL  %s (%s): %s\n", st.Name, st.Source, st.Reason)
		warnings(w, st)
	}
	return rc
}

// warnings prints a config's warnings, one line each.
func warnings(w io.Writer, st collector.State) {
	for _, msg := range st.Warnings {
		fmt.Fprintf(w, "warn  %s (%s): %s\n", st.Name, st.Source, msg)
	}
}

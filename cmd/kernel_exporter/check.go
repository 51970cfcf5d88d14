// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/kernel-exporter/kernel_exporter/exporter"
	"github.com/kernel-exporter/kernel_exporter/internal/plural"
)

// runCheck is serve --config.check: load and attach every config, print
// one line per config and exit 1 if any failed.
func (f *serveFlags) runCheck(e *env) int {
	exp := f.load.exporter(nil, e.log)
	defer exp.Close()
	ctx, stop := signalContext(e.log)
	defer stop()
	exp.Start(ctx)
	<-exp.Loaded()
	if ctx.Err() != nil {
		return 1
	}
	return report(e.stdout, exp, f.verbose)
}

// report prints one line per config and returns 1 if any failed.
func report(w io.Writer, exp *exporter.Exporter, verbose bool) int {
	rc := 0
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
			if verbose && st.Collector != nil {
				printLayouts(w, st.Collector.Layouts())
			}
			continue
		}
		rc = 1
		fmt.Fprintf(w, "FAIL  %s (%s): %s\n", st.Name, st.Source, st.Reason)
	}
	return rc
}

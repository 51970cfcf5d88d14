// SPDX-License-Identifier: Apache-2.0

package dump

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/kernel-exporter/kernel_exporter/exporter"
	"github.com/kernel-exporter/kernel_exporter/internal/printable"
	"github.com/kernel-exporter/kernel_exporter/runcount"
)

// Exit codes returned by Run.
const (
	// ExitOK: every config was up and the whole output was written.
	ExitOK = 0
	// ExitFailed: a config was down or still loading, something could not
	// be read, or the output could not be written.
	ExitFailed = 1
)

// Options configure Run.
type Options struct {
	// Duration is the wait between the end of the loads and the read;
	// CheckDuration bounds it.
	Duration time.Duration
	Format   Format
	// Stdout gets the metrics; Stderr one line per config that is not up
	// and per read error.
	Stdout, Stderr io.Writer
	// AfterLoad, when set, runs once every config's load has ended, before
	// the wait (kernel_exporter drops its capabilities there, as the
	// server does).
	AfterLoad func()
	Logger    *slog.Logger
}

// Run is the dump command. It starts exp's configs, waits for every load
// to end (or time out, --config.load-timeout), waits o.Duration, writes
// every metric once to o.Stdout (Write) and closes exp, detaching and
// unloading every program and map it loaded. A load still running when
// Run returns (after an interrupt) closes what it loaded when it ends.
//
// When ctx is done (SIGINT or SIGTERM), the wait or the loads end early
// and what was gathered so far is still printed: a config still loading
// then is reported as such and makes the result ExitFailed.
//
// Run returns ExitOK or ExitFailed (see the package documentation).
// Programs that ran 0 times over the wait (runcount: BPF run-time
// statistics are on for it) are named on o.Stderr; they do not change the
// result. Configs that are not up are named on o.Stderr with their reason, as
// they are in kernel_exporter_config_up and
// kernel_exporter_config_error_info.
func Run(ctx context.Context, exp *exporter.Exporter, o Options) int {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	defer exp.Close()
	exp.Start(ctx)
	<-exp.Loaded()
	// Run counts over the window: statistics on before the capabilities
	// go (BPF_ENABLE_STATS needs CAP_SYS_ADMIN), off when Run returns.
	runs, err := runcount.Enable(exp.Status)
	defer runs.Close()
	if err != nil {
		log.Info("dump: cannot tell programs that never ran", "err", err)
	}
	runs.Mark()
	if ctx.Err() == nil {
		if o.AfterLoad != nil {
			o.AfterLoad()
		}
		log.Info("dump: every config's load has ended: counting", "duration", o.Duration)
		t := time.NewTimer(o.Duration)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	if ctx.Err() != nil {
		log.Warn("dump: interrupted: printing what was counted so far")
	}
	window := runs.Elapsed()
	for _, i := range runs.Idle() {
		fmt.Fprintf(o.Stderr, "kernel_exporter dump: config %s (%s): %s\n", printable.String(i.Config), printable.String(i.Source), i.Message(fmt.Sprintf("in the %v window", runcount.Round(window))))
	}
	rc := ExitOK
	if err := Write(o.Stdout, o.Format, exp.Status, exp.Registry); err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintf(o.Stderr, "kernel_exporter dump: %s\n", line)
		}
		rc = ExitFailed
	}
	for _, st := range exp.Status.States() {
		switch {
		case st.Up:
			continue
		case st.Loading:
			fmt.Fprintf(o.Stderr, "kernel_exporter dump: config %s (%s): still loading when interrupted\n", st.Name, st.Source)
		default:
			fmt.Fprintf(o.Stderr, "kernel_exporter dump: config %s (%s) failed: %s\n", st.Name, st.Source, st.Reason)
		}
		rc = ExitFailed
	}
	return rc
}

// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"slices"
	"time"

	"github.com/alecthomas/kingpin/v2"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"

	"github.com/kernel-exporter/kernel_exporter/dump"
	"github.com/kernel-exporter/kernel_exporter/loader"
)

// dumpFlags are the flags of dump.
type dumpFlags struct {
	load     *loadFlags
	src      *sourceFlags
	duration time.Duration
	format   string

	// Set by check.
	parsed dump.Format
}

// dumpCommand declares dump: load the configs, count for --duration, print
// every metric once and exit (package dump).
func dumpCommand(app *kingpin.Application) *command {
	c := app.Command("dump", "Load the configs, wait --duration, print every metric once to stdout and exit, leaving no program attached. Exit code 0 when every config was up, 1 when one failed (named on stderr), 2 for bad flags. Takes serve's flags except --web.*, --otlp.*, --bpf.cpu-budget and its kin, --config.check and --config.strict.")
	f := &dumpFlags{src: addSourceFlags(c), load: addLoadFlags(c)}
	c.Flag("duration", fmt.Sprintf("Time to count events after every config has loaded, more than 0 and at most %v; SIGINT ends it early and still prints.", dump.MaxDuration)).Default(dump.DefaultDuration.String()).DurationVar(&f.duration)
	c.Flag("format", "Output format: text (the Prometheus text exposition) or json (prom2json's format).").Default(string(dump.FormatText)).EnumVar(&f.format, string(dump.FormatText), string(dump.FormatJSON))
	return &command{clause: c, check: f.check, run: f.run,
		privileges: func() (string, []loader.Privilege) { return "dump", slices.Concat(loader.PrivLoad, loader.PrivConfigs) }}
}

// check checks dump's flags.
func (f *dumpFlags) check() error {
	var err error
	if f.parsed, err = dump.ParseFlags(f.duration, f.format); err != nil {
		return err
	}
	sources, err := f.src.sources(f.load.configDir)
	if err != nil {
		return err
	}
	if len(sources) == 0 {
		return errNothingToRun
	}
	return f.load.check(sources)
}

// run loads, counts, prints and exits (dump.Run).
func (f *dumpFlags) run(e *env) int {
	f.load.ref.skipCacheNote(e.log)
	f.src.noteLeftOut(e.log)
	defer f.load.start(e.log)()
	exp := f.load.exporter(nil, e.log)
	defer exp.Close()
	ctx, stop := signalContext(e.log)
	defer stop()
	exp.Registry.MustRegister(versioncollector.NewCollector("kernel_exporter"))
	return dump.Run(ctx, exp, dump.Options{Duration: f.duration, Format: f.parsed, Stdout: e.stdout, Stderr: e.stderr,
		Logger: e.log, AfterLoad: f.load.dropCaps(e.log)})
}

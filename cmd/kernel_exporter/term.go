// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/kernel-exporter/kernel_exporter/exporter"
	"github.com/kernel-exporter/kernel_exporter/profile"
	proftop "github.com/kernel-exporter/kernel_exporter/profile/top"
	"github.com/kernel-exporter/kernel_exporter/term"
)

// The terminal commands (package term).
const (
	termHist = term.CommandHist
	termTop  = term.CommandTop
)

// termFlags are the flags of hist or top.
type termFlags struct {
	name     string // termHist or termTop
	load     *loadFlags
	target   string
	interval time.Duration
	count    int

	// frequency: top cpu's samples per second per CPU.
	frequency int

	// Set by check.
	source exporter.Source
	metric string
	view   topView
}

// A topView is a view of top built in rather than a program's counters:
// top <name> runs it instead of loading a config of that name.
type topView func(ctx context.Context, f *termFlags, e *env) int

// topViews are top's built-in views, by name.
var topViews = map[string]topView{
	proftop.Target: func(ctx context.Context, f *termFlags, e *env) int {
		return proftop.Run(ctx, proftop.Options{Frequency: f.frequency, Interval: f.interval, Count: f.count,
			Stdout: e.stdout, Stderr: e.stderr, Logger: e.log})
	},
}

// topViewNames lists topViews' names, sorted.
func topViewNames() string {
	var names []string
	for n := range topViews {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// termCommand declares hist or top (name): load one program and draw its
// histograms or counters in the terminal until --count intervals or
// Ctrl-C.
func termCommand(app *kingpin.Application, name string) *command {
	f := &termFlags{name: name}
	var c *kingpin.CmdClause
	switch name {
	case termHist:
		c = app.Command(name, "Load one program, and every --interval print each of its histograms as bcc's tools do (a table per label set: bucket range, count of the interval, '*' bar), until --count intervals or Ctrl-C; then detach. Takes serve's load flags (--config.dir, --btf.path, --attach.*, --decoder.*, --capabilities.keep, ...), not --web.*, --programs, --config.names, --config.check or --config.strict.")
		c.Arg("program[.metric]", "A bundled program (or, with --config.dir, <dir>/<program>.yaml), optionally with one of its histograms: biolatency, biolatency.bio_latency_seconds.").Required().StringVar(&f.target)
		c.Flag("interval", fmt.Sprintf("Time between tables, %v to %v.", term.MinInterval, term.MaxInterval)).Default(term.DefaultInterval.String()).DurationVar(&f.interval)
		c.Flag("count", fmt.Sprintf("Intervals to print, then exit; 0 (up to %d) runs until Ctrl-C.", term.MaxCount)).Default("0").IntVar(&f.count)
	default:
		c = app.Command(name, "Load one program and show its counters, one row per label set sorted by rate per second, redrawn in place every --interval until --count intervals or Ctrl-C; then detach. Takes hist's flags. Built-in views instead of a program: "+topViewNames()+" (top cpu: the hottest kernel and user functions, as perf top).")
		c.Arg("program", "A bundled program (or, with --config.dir, <dir>/<program>.yaml), or a built-in view: "+topViewNames()+".").Required().StringVar(&f.target)
		c.Flag("frequency", fmt.Sprintf("top cpu: samples per second per CPU, 1 to %d.", profile.MaxFrequency)).Default(fmt.Sprint(profile.DefaultFrequency)).IntVar(&f.frequency)
		c.Flag("interval", fmt.Sprintf("Time between frames, %v to %v.", term.MinInterval, term.MaxInterval)).Default(term.DefaultInterval.String()).DurationVar(&f.interval)
		c.Flag("count", fmt.Sprintf("Frames to show, then exit; 0 (up to %d) runs until Ctrl-C.", term.MaxCount)).Default("0").IntVar(&f.count)
	}
	f.load = addLoadFlags(c)
	return &command{clause: c, check: f.check, run: f.run, quiet: true}
}

// check checks the flags and the program argument.
func (f *termFlags) check() error {
	if err := term.CheckFlags(f.interval, f.count); err != nil {
		return err
	}
	if f.name == termTop {
		if f.view = topViews[f.target]; f.view != nil {
			if f.frequency < 1 || f.frequency > profile.MaxFrequency {
				return fmt.Errorf("--frequency %d: must be 1 to %d", f.frequency, profile.MaxFrequency)
			}
			return nil
		}
	}
	var err error
	if f.source, f.metric, err = term.ParseTarget(f.name, f.target, f.load.configDir); err != nil {
		return err
	}
	return f.load.check([]exporter.Source{f.source})
}

// run draws until --count or a signal (term.Run).
func (f *termFlags) run(e *env) int {
	if f.view != nil {
		ctx, stop := signalContext(e.log, syscall.SIGHUP)
		defer stop()
		return f.view(ctx, f, e)
	}
	f.load.ref.skipCacheNote(e.log)
	defer f.load.start(e.log)()
	exp := f.load.exporter(nil, e.log)
	defer exp.Close()
	// Closing the terminal (or its tmux session) sends SIGHUP: detach as
	// on Ctrl-C.
	ctx, stop := signalContext(e.log, syscall.SIGHUP)
	defer stop()
	return term.Run(ctx, exp, term.Options{Command: f.name, Program: f.source.Name, Metric: f.metric,
		Interval: f.interval, Count: f.count, Stdout: e.stdout, Stderr: e.stderr, Logger: e.log,
		AfterLoad: f.load.dropCaps(e.log)})
}

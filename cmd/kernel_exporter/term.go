// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/kernel-exporter/kernel_exporter/exporter"
	"github.com/kernel-exporter/kernel_exporter/loader"
	"github.com/kernel-exporter/kernel_exporter/profile"
	proftop "github.com/kernel-exporter/kernel_exporter/profile/top"
	"github.com/kernel-exporter/kernel_exporter/term"
)

// The terminal commands (package term).
const (
	termHist = term.CommandHist
	termTop  = term.CommandTop
)

// A topView is a view of top built in rather than a program's counters:
// top <name> runs it instead of loading a config of that name. Its name
// is reserved (no bundled program has it, TestTopViewsReserved).
type topView struct {
	name, help string
	// flags are the flags of top it takes besides --interval and --count.
	flags []string
	// need is what the view needs (CheckPrivileges).
	need []loader.Privilege
	run  func(ctx context.Context, f *termFlags, e *env) int
}

// topViews are top's built-in views. Adding a view: one entry here.
var topViews = []topView{
	{name: term.BPFView.Name, help: term.BPFView.Help, need: loader.PrivListBPF, run: func(ctx context.Context, f *termFlags, e *env) int {
		return term.RunBuiltin(ctx, term.BPFView, term.RedrawOptions{Interval: f.interval, Count: f.count, Stdout: e.stdout, Stderr: e.stderr}, e.log)
	}},
	{name: proftop.Target, help: "the hottest kernel and user functions, as perf top", flags: []string{"--frequency"}, need: slices.Concat(loader.PrivLoad, loader.PrivProfile),
		run: func(ctx context.Context, f *termFlags, e *env) int {
			return proftop.Run(ctx, proftop.Options{Frequency: f.frequency, Interval: f.interval, Count: f.count,
				Stdout: e.stdout, Stderr: e.stderr, Logger: e.log})
		}},
}

// termFlags are the flags of hist or top.
type termFlags struct {
	name     string // termHist or termTop
	load     *loadFlags
	target   string
	interval time.Duration
	count    int

	// frequency: top cpu's samples per second per CPU.
	frequency int
	// given lists the flags given other than --interval and --count (a
	// built-in view takes only its own).
	given []string

	// Set by check.
	source exporter.Source
	metric string
	view   *topView
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
		c = app.Command(name, "Load one program and show its counters, one row per label set sorted by rate per second, redrawn in place every --interval until --count intervals or Ctrl-C; then detach. Takes hist's flags. Or show a built-in view: "+viewsHelp()+".")
		c.Arg("program", "A bundled program (or, with --config.dir, <dir>/<program>.yaml), or a built-in view ("+viewNames()+"), which takes --interval, --count and its own flags only.").Required().StringVar(&f.target)
		c.Flag("frequency", fmt.Sprintf("top cpu: samples per second per CPU, 1 to %d.", profile.MaxFrequency)).Default(fmt.Sprint(profile.DefaultFrequency)).IntVar(&f.frequency)
		c.Flag("interval", fmt.Sprintf("Time between frames, %v to %v.", term.MinInterval, term.MaxInterval)).Default(term.DefaultInterval.String()).DurationVar(&f.interval)
		c.Flag("count", fmt.Sprintf("Frames to show, then exit; 0 (up to %d) runs until Ctrl-C.", term.MaxCount)).Default("0").IntVar(&f.count)
	}
	f.load = addLoadFlags(c)
	if name == termTop {
		for _, fl := range c.Model().Flags {
			if n := fl.Name; n != "interval" && n != "count" {
				c.GetFlag(n).Action(func(*kingpin.ParseContext) error { f.given = append(f.given, "--"+n); return nil })
			}
		}
	}
	return &command{clause: c, check: f.check, run: f.run, quiet: true, privileges: f.privileges}
}

// viewsHelp describes the built-in views for top's --help.
func viewsHelp() string {
	var parts []string
	for _, v := range topViews {
		parts = append(parts, "top "+v.name+", "+v.help)
	}
	return strings.Join(parts, "; ")
}

// viewNames lists the built-in views' names.
func viewNames() string {
	var names []string
	for _, v := range topViews {
		names = append(names, v.name)
	}
	return strings.Join(names, ", ")
}

// topProgram is how errors name top with a program.
const topProgram = "top <program>"

// topFlagTargets names what takes top's flag: the built-in views that
// declare it ("top cpu"), else top <program> (the load flags).
func topFlagTargets(flag string) string {
	var with []string
	for _, v := range topViews {
		if slices.Contains(v.flags, flag) {
			with = append(with, "top "+v.name)
		}
	}
	if len(with) == 0 {
		return topProgram
	}
	return strings.Join(with, " and ")
}

// topFlagError is the one error for a flag of top given with a target
// that does not take it, built-in view or program alike.
func topFlagError(flag, target string) error {
	err := fmt.Errorf("%s applies to %s only, not top %s", flag, topFlagTargets(flag), target)
	if slices.ContainsFunc(topViews, func(v topView) bool { return v.name == target }) {
		err = fmt.Errorf("%w (a built-in view takes --interval, --count and its own flags only)", err)
	}
	return err
}

// check checks the flags and the program argument.
func (f *termFlags) check() error {
	if err := term.CheckFlags(f.interval, f.count); err != nil {
		return err
	}
	if i := slices.IndexFunc(topViews, func(v topView) bool { return v.name == f.target }); i >= 0 && f.name == termTop {
		v := &topViews[i]
		for _, g := range f.given {
			if !slices.Contains(v.flags, g) {
				return topFlagError(g, f.target)
			}
		}
		if slices.Contains(v.flags, "--frequency") && (f.frequency < 1 || f.frequency > profile.MaxFrequency) {
			return fmt.Errorf("--frequency %d: must be 1 to %d", f.frequency, profile.MaxFrequency)
		}
		f.view = v
		return nil
	}
	for _, g := range f.given {
		if topFlagTargets(g) != topProgram {
			return topFlagError(g, f.target)
		}
	}
	var err error
	if f.source, f.metric, err = term.ParseTarget(f.name, f.target, f.load.configDir); err != nil {
		return err
	}
	return f.load.check([]exporter.Source{f.source})
}

// privileges returns what the command needs: a built-in view's own, else
// loading.
func (f *termFlags) privileges() (string, []loader.Privilege) {
	name := f.name + " " + f.target
	if f.view != nil {
		return name, f.view.need
	}
	return name, slices.Concat(loader.PrivLoad, loader.PrivConfigs)
}

// run draws until --count or a signal (term.Run, or the built-in view's
// run).
func (f *termFlags) run(e *env) int {
	if f.view != nil {
		ctx, stop := signalContext(e.log, syscall.SIGHUP)
		defer stop()
		return f.view.run(ctx, f, e)
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

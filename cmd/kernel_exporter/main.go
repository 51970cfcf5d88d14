// SPDX-License-Identifier: Apache-2.0

// Command kernel_exporter runs eBPF programs in the kernel and serves their
// maps as Prometheus metrics. See README.md for flags and examples.
//
// Each command has its own file: serve.go (the default command, and its
// --config.check mode in check.go), dump.go, term.go (hist and top),
// new.go (package scaffold), compare.go (package compare), profile.go (profile and profile diff,
// package profile) and helper.go (the hidden privileged helper). A
// command declares its flags on its own kingpin clause, so that a flag
// another command has is refused; the flags several commands share are
// declared by the groups of flags.go (loadFlags, sourceFlags). main.go only builds the application, parses,
// turns every flag error into one line naming the flag and exit code 2
// (flagError), and runs the chosen command.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/promslog"
	promslogflag "github.com/prometheus/common/promslog/flag"
	"github.com/prometheus/common/version"

	"github.com/kernel-exporter/kernel_exporter/loader"
)

// DefaultAddress is outside 9100-9999, the fully allocated range of the
// Prometheus exporter port registry (ebpf_exporter has 9435).
const DefaultAddress = ":19435"

// ExitBadFlags is the exit code of every flag error.
const ExitBadFlags = 2

// ExitNoPrivilege is the exit code of a command run without the
// capabilities it needs (LSB's "user had insufficient privilege").
const ExitNoPrivilege = 4

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// A command is one of kernel_exporter's commands.
type command struct {
	clause *kingpin.CmdClause
	// check validates the command's flags once they are parsed; every
	// error names its flag. Nil: nothing to check.
	check func() error
	// quiet commands draw on the terminal: they log warnings and errors
	// only, unless --log.level asks for debug.
	quiet bool
	// privileges returns the capabilities the command needs with the
	// flags and arguments given (loader.PrivLoad, ...), and its name as
	// typed ("top bpf"), checked before it runs: without them it exits
	// with ExitNoPrivilege and an error naming them. Nil: it needs none.
	privileges func() (name string, need []loader.Privilege)
	// run runs the command and returns the exit code.
	run func(env *env) int
}

// env is what a command runs with.
type env struct {
	log            *slog.Logger
	stdout, stderr io.Writer
}

// flagError reports a flag found bad while the command runs (one the
// checks cannot see before, as --otlp.metrics' endpoint) on the same path
// as the others, and returns ExitBadFlags.
func (e *env) flagError(err error) int {
	return flagError(e.stderr, err)
}

// commands declares every command on app. Adding a command: a file with a
// function returning its *command, and one line here.
func commands(app *kingpin.Application) []*command {
	cmds := []*command{
		serveCommand(app),
		dumpCommand(app),
		termCommand(app, termHist),
		termCommand(app, termTop),
		newCommand(app),
		compareCommand(app),
	}
	cmds = append(cmds, profileCommands(app)...)
	return append(cmds, kubeReadyCommand(app), helperCommand(app))
}

// run parses args, checks the flags and runs the chosen command. It
// returns the process' exit code.
func run(args []string, stdout, stderr io.Writer) int {
	app := kingpin.New("kernel_exporter", "Runs eBPF programs in the kernel and serves their maps as Prometheus metrics.")
	logCfg := &promslog.Config{Writer: stderr}
	promslogflag.AddFlags(app, logCfg)
	logRef := addRefLogFlags(app)
	cmds := commands(app)
	app.Version(version.Print("kernel_exporter"))
	// --version and --help to stdout (kingpin's default is stderr), so that
	// kernel_exporter --version | grep works; errors stay on stderr.
	app.UsageWriter(stdout)
	app.ErrorWriter(stderr)
	app.UsageTemplate(usageTemplate)
	app.HelpFlag.Short('h')
	// --help and --version end the parse through Terminate.
	exit := -1
	app.Terminate(func(code int) {
		if exit < 0 {
			exit = code
		}
	})
	args = commandFirst(app, args)
	selected, err := app.Parse(args)
	if exit >= 0 {
		return exit
	}
	if err != nil {
		return flagError(stderr, nameFlag(app, args, err))
	}
	var cmd *command
	for _, c := range cmds {
		if c.clause.FullCommand() == selected {
			cmd = c
		}
	}
	if cmd == nil {
		return flagError(stderr, fmt.Errorf("no command %q", selected))
	}
	if err := logRef.apply(logCfg); err != nil {
		return flagError(stderr, err)
	}
	if cmd.check != nil {
		if err := cmd.check(); err != nil {
			return flagError(stderr, err)
		}
	}
	if checkOnly {
		return 0
	}
	if cmd.privileges != nil {
		if err := loader.CheckPrivileges(cmd.privileges()); err != nil {
			fmt.Fprintf(stderr, "kernel_exporter: error: %v\n", err)
			return ExitNoPrivilege
		}
	}
	if cmd.quiet && logCfg.Level.String() == "info" {
		_ = logCfg.Level.Set("warn")
	}
	log := logRef.logger(promslog.New(logCfg))
	slog.SetDefault(log)
	return cmd.run(&env{log: log, stdout: stdout, stderr: stderr})
}

// checkOnly, set by tests, ends run once the flags are checked, with exit
// code 0, before the command runs: a test of flags never loads anything.
var checkOnly bool

// flagError writes the one line of a flag error and returns ExitBadFlags.
func flagError(stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "kernel_exporter: error: %v, try --help\n", err)
	return ExitBadFlags
}

// signalContext returns a context cancelled by the first SIGINT, SIGTERM
// or one of extra; a second one exits at once.
func signalContext(log *slog.Logger, extra ...os.Signal) (context.Context, context.CancelFunc) {
	sigc := make(chan os.Signal, 2)
	signal.Notify(sigc, append([]os.Signal{syscall.SIGINT, syscall.SIGTERM}, extra...)...)
	ctx, stop := context.WithCancel(context.Background())
	go func() {
		sig := <-sigc
		log.Info("shutting down: detaching programs", "signal", sig.String())
		stop()
		sig = <-sigc
		log.Warn("second signal: exiting at once", "signal", sig.String())
		os.Exit(1)
	}()
	return ctx, stop
}

// usageTemplate is kingpin's default usage with, when no command is given,
// the flags of the default command (serve) too, and for a command with a
// default subcommand, that subcommand's flags and arguments:
// kernel_exporter --help lists what kernel_exporter alone takes, and
// kernel_exporter profile --help what kernel_exporter profile takes.
var usageTemplate = strings.Replace(kingpin.DefaultUsageTemplate, "{{if .Context.Args -}}", `{{if not .Context.SelectedCommand -}}
{{range .App.Commands}}{{if .Default -}}
Flags of {{.Name}}, the default command:
{{.Flags|FlagsToTwoColumns|FormatTwoColumns}}
{{end}}{{end -}}
{{else -}}
{{range .Context.SelectedCommand.Commands}}{{if .Default -}}
Flags of {{.FullCommand}}, the default subcommand:
{{.Flags|FlagsToTwoColumns|FormatTwoColumns}}
{{end}}{{end -}}
{{end -}}
{{if .Context.Args -}}`, 1)

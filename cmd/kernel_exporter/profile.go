package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/kernel-exporter/kernel_exporter/budget"
	"github.com/kernel-exporter/kernel_exporter/loader"
	"github.com/kernel-exporter/kernel_exporter/profile"
	"github.com/kernel-exporter/kernel_exporter/profile/top"
	"github.com/kernel-exporter/kernel_exporter/term"
)

// profileFlags are the flags and commands of package profile: profile,
// profile diff, top cpu, and serve's /profile/ endpoints.
type profileFlags struct {
	enable    *bool
	frequency *int
	maxHTTP   *time.Duration

	record, diff                                   *kingpin.CmdClause
	duration, minBlock                             *time.Duration
	freq                                           *int
	offcpu, kernelOnly, userOnly, idle             *bool
	pids, comms, cgroups                           *[]string
	output, format                                 *string
	diffBase, diffNew, diffFormat, diffSort, dKind *string
	diffTop                                        *int
}

// profileCaps are the capabilities serve keeps with --profile.enable:
// opening perf events and attaching (perfmon), kallsyms (syslog), other
// users' /proc/<pid>/maps and /proc/<pid>/root (sys_ptrace), their files
// (dac_read_search).
const profileCaps = "perfmon,syslog,sys_ptrace,dac_read_search"

func addProfileFlags(app *kingpin.Application) *profileFlags {
	p := &profileFlags{}
	p.enable = app.Flag("profile.enable", "Serve CPU and off-CPU profiles on "+profile.PathCPU+" and "+profile.PathOffCPU+" (pprof, or ?format=folded), behind the web config's TLS and authentication. Stacks show what runs on the host: off by default. Keeps the capabilities profiling needs ("+profileCaps+").").Bool()
	p.frequency = app.Flag("profile.frequency", fmt.Sprintf("Default sampling frequency of %s, per CPU (1 to %d).", profile.PathCPU, profile.MaxFrequency)).Default(fmt.Sprint(profile.DefaultFrequency)).Int()
	p.maxHTTP = app.Flag("profile.max-duration", "Longest profile /profile/* takes (?seconds=).").Default(profile.DefaultMaxHTTPDuration.String()).Duration()
	cmd := app.Command("profile", "Take a CPU (or --offcpu) profile of every process, or those given, and write it as pprof or folded stacks, with no server; nothing stays attached. profile diff compares two profiles.")
	p.record = cmd.Command("record", "Take a profile (the default subcommand).").Default()
	p.duration = p.record.Flag("duration", fmt.Sprintf("Length of the profile, up to %v; Ctrl-C ends it early and still writes it.", profile.MaxDuration)).Default(profile.DefaultDuration.String()).Duration()
	p.freq = p.record.Flag("frequency", fmt.Sprintf("On-CPU samples per second per CPU, 1 to %d (19 for always-on, 49 or 99 for an investigation).", profile.MaxFrequency)).Default("99").Int()
	p.offcpu = p.record.Flag("offcpu", "Profile time blocked off the CPU (sched_switch), in nanoseconds by stack, instead of on-CPU samples.").Bool()
	p.minBlock = p.record.Flag("min-block", "With --offcpu: shortest block counted.").Default(profile.DefaultMinBlock.String()).Duration()
	p.pids = p.record.Flag("pid", "Only these processes (repeatable, or comma-separated).").Strings()
	p.comms = p.record.Flag("comm", "Only threads of this name (repeatable).").Strings()
	p.cgroups = p.record.Flag("cgroup", "Only this cgroup v2: an id or a path such as /system.slice/ssh.service (repeatable).").Strings()
	p.kernelOnly = p.record.Flag("kernel-only", "Kernel frames only.").Bool()
	p.userOnly = p.record.Flag("user-only", "User frames only.").Bool()
	p.idle = p.record.Flag("include-idle", "Keep the samples of the idle tasks (swapper).").Bool()
	p.output = p.record.Flag("output", "File to write (default standard output).").Short('o').String()
	p.format = p.record.Flag("format", "pprof (gzipped protobuf, for go tool pprof) or folded (for flamegraph.pl). Default: pprof, or folded for an output ending in .folded or .txt.").String()
	p.diff = cmd.Command("diff", "Compare two profiles (pprof or folded, of two hosts or two times): the functions whose share of samples grew and shrank most, each profile normalised by its total.")
	p.diffBase = p.diff.Arg("base", "The profile compared against.").Required().String()
	p.diffNew = p.diff.Arg("new", "The profile compared.").Required().String()
	p.diffFormat = p.diff.Flag("format", "table, or folded: difffolded.pl's lines (stack, base scaled to new's total, new) for flamegraph.pl's differential flame graph.").Default("table").String()
	p.diffTop = p.diff.Flag("top", "Functions listed as grown and as shrunk.").Default("20").Int()
	p.diffSort = p.diff.Flag("sort", "Rank by total (share of stacks holding the function: the path that changed) or self (share where it is the innermost frame).").Default("total").String()
	p.dKind = p.diff.Flag("kind", "Kind of folded inputs: cpu or offcpu (pprof files say theirs).").Default("cpu").String()
	return p
}

// run runs the commands of package profile: profile, profile diff and top
// cpu. handled is false for any other command.
func (p *profileFlags) run(command, topCommand, topTarget string, topInterval time.Duration, topCount int, memBudget string, log *slog.Logger) (code int, handled bool) {
	switch {
	case command == p.diff.FullCommand():
		by, err := profile.ParseMeasure(*p.diffSort)
		if err != nil {
			log.Error("bad flags", "err", fmt.Errorf("--sort: %w", err))
			return 2, true
		}
		return profile.DiffFiles(*p.diffBase, *p.diffNew, profile.DiffOptions{Format: *p.diffFormat, Top: *p.diffTop, By: by,
			Kind: profile.Kind(*p.dKind), Stdout: os.Stdout, Stderr: os.Stderr, Logger: log}), true
	case command == p.record.FullCommand():
	case command == topCommand && topTarget == top.Target:
	default:
		return 0, false
	}
	filter, err := profile.ParseFilterValues(*p.pids, *p.comms, *p.cgroups)
	if err == nil && (*p.kernelOnly && *p.userOnly) {
		err = fmt.Errorf("--kernel-only and --user-only exclude each other")
	}
	mem, merr := budget.ParseMemoryBudget(memBudget)
	if err == nil {
		err = merr
	}
	if err == nil && command == topCommand {
		err = term.CheckFlags(topInterval, topCount)
	}
	if err != nil {
		log.Error("bad flags", "err", err)
		return 2, true
	}
	filter.KernelOnly, filter.UserOnly, filter.IncludeIdle = *p.kernelOnly, *p.userOnly, *p.idle
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	if command == topCommand {
		return top.Run(ctx, top.Options{Frequency: *p.frequency, Interval: topInterval, Count: topCount,
			Stdout: os.Stdout, Stderr: os.Stderr, Logger: log}), true
	}
	kind := profile.CPU
	if *p.offcpu {
		kind = profile.OffCPU
	}
	return profile.Record(ctx, profile.RecordOptions{
		Options: profile.Options{Kind: kind, Duration: *p.duration, Frequency: *p.freq, MinBlock: *p.minBlock,
			Filter: filter, MemoryBudget: mem, Logger: log},
		Output: *p.output, Format: *p.format, Stdout: os.Stdout, Stderr: os.Stderr,
	}), true
}

// serve returns the /profile/ routes (nil without --profile.enable), the
// CPU budget target t extended with the profiles' programs, and the
// capabilities to keep.
func (p *profileFlags) serve(ledger *budget.Ledger, t budget.Target, log *slog.Logger) (map[string]http.Handler, budget.Target, loader.CapSet, error) {
	if !*p.enable {
		return nil, t, 0, nil
	}
	if *p.frequency < 1 || *p.frequency > profile.MaxFrequency {
		return nil, t, 0, fmt.Errorf("--profile.frequency %d: must be 1 to %d", *p.frequency, profile.MaxFrequency)
	}
	if *p.maxHTTP < time.Second || *p.maxHTTP > profile.MaxDuration {
		return nil, t, 0, fmt.Errorf("--profile.max-duration %v: must be 1s to %v", *p.maxHTTP, profile.MaxDuration)
	}
	h := profile.NewHandler(profile.HandlerOptions{Ledger: ledger, Frequency: *p.frequency, MaxDuration: *p.maxHTTP, Logger: log})
	configs, detach, reattach := t.Configs, t.Detach, t.Reattach
	t.Configs = func() []budget.Config { return append(configs(), h.BudgetConfigs()...) }
	t.Detach = func(c, reason string) {
		if !h.Detach(c, reason) {
			detach(c, reason)
		}
	}
	t.Reattach = func(c string) error {
		if h.Reattach(c) {
			return nil
		}
		return reattach(c)
	}
	caps, _, err := loader.ParseKeep(profileCaps)
	return h.Routes(), t, caps, err
}

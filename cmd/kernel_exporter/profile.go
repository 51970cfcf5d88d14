// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/alecthomas/units"

	"github.com/kernel-exporter/kernel_exporter/budget"
	"github.com/kernel-exporter/kernel_exporter/internal/printable"
	"github.com/kernel-exporter/kernel_exporter/loader"
	"github.com/kernel-exporter/kernel_exporter/profile"
	"github.com/kernel-exporter/kernel_exporter/profile/otlpprofile"
	"github.com/kernel-exporter/kernel_exporter/profile/symbolize"
	"github.com/kernel-exporter/kernel_exporter/ui"
)

// profileCaps are the capabilities serve keeps with --profile.enable:
// opening perf events and attaching (perfmon), kallsyms (syslog), other
// users' /proc/<pid>/maps and /proc/<pid>/root (sys_ptrace), their files
// (dac_read_search).
const profileCaps = "perfmon,syslog,sys_ptrace,dac_read_search"

// profileRecordFlags are the flags of profile (profile record).
type profileRecordFlags struct {
	duration, minBlock                 time.Duration
	freq                               int
	offcpu, kernelOnly, userOnly, idle bool
	pids, comms, cgroups               []string
	output, format                     string
	memBudget                          string

	// Set by check.
	filter profile.Filter
	mem    uint64
}

// profileDiffFlags are the arguments and flags of profile diff.
type profileDiffFlags struct {
	base, new, format, sort, kind string
	top                           int
	inputs                        profile.InputOptions
	maxBytes                      string

	// Set by check.
	by                profile.Measure
	baseList, newList []string
}

// profileCommands declares profile, with its subcommands record (the
// default) and diff (package profile).
func profileCommands(app *kingpin.Application) []*command {
	cmd := app.Command("profile", "Take a CPU (or --offcpu) profile of every process, or those given, and write it as pprof or folded stacks, with no server; nothing stays attached. profile diff compares two profiles.")
	r := &profileRecordFlags{}
	rc := cmd.Command("record", "Take a profile (the default subcommand).").Default()
	rc.Flag("duration", fmt.Sprintf("Length of the profile, up to %v; Ctrl-C ends it early and still writes it.", profile.MaxDuration)).Default(profile.DefaultDuration.String()).DurationVar(&r.duration)
	rc.Flag("frequency", fmt.Sprintf("On-CPU samples per second per CPU, 1 to %d (19 for always-on, 49 or 99 for an investigation).", profile.MaxFrequency)).Default("99").IntVar(&r.freq)
	rc.Flag("offcpu", "Profile time blocked off the CPU (sched_switch), in nanoseconds by stack, instead of on-CPU samples.").BoolVar(&r.offcpu)
	rc.Flag("min-block", "With --offcpu: shortest block counted.").Default(profile.DefaultMinBlock.String()).DurationVar(&r.minBlock)
	rc.Flag("pid", "Only these processes (repeatable, or comma-separated).").StringsVar(&r.pids)
	rc.Flag("comm", "Only threads of this name (repeatable).").StringsVar(&r.comms)
	rc.Flag("cgroup", "Only this cgroup v2: an id or a path such as /system.slice/ssh.service (repeatable).").StringsVar(&r.cgroups)
	rc.Flag("kernel-only", "Kernel frames only.").BoolVar(&r.kernelOnly)
	rc.Flag("user-only", "User frames only.").BoolVar(&r.userOnly)
	rc.Flag("include-idle", "Keep the samples of the idle tasks (swapper).").BoolVar(&r.idle)
	rc.Flag("output", "File to write (default standard output).").Short('o').StringVar(&r.output)
	rc.Flag("format", "pprof (gzipped protobuf, for go tool pprof) or folded (for flamegraph.pl). Default: pprof, or folded for an output ending in .folded or .txt.").EnumVar(&r.format, "pprof", "folded")
	rc.Flag("bpf.memory-budget", "Kernel memory the profile's maps may hold, estimated before they are created (as 256MiB; 0: no budget).").Default(budget.DefaultMemoryBudgetText).StringVar(&r.memBudget)

	d := &profileDiffFlags{}
	dc := cmd.Command("diff", "Compare two profiles (pprof or folded, of two hosts or two times; files or exporters' "+profile.PathCPU+" URLs): the functions whose share of samples grew and shrank most, each profile normalised by its total. A side of several inputs (comma-separated) is their merge, every input weighted equally.")
	dc.Arg("base", "The profile compared against: a file or an http(s):// URL (as http://host:9435"+profile.PathCPU+"?seconds=10), or several separated by commas, fetched at once and merged with equal weight.").Required().StringVar(&d.base)
	dc.Arg("new", "The profile compared, as base.").Required().StringVar(&d.new)
	dc.Flag("timeout", "Time each URL may take, its ?seconds= included.").Default(profile.DefaultFetchTimeout.String()).DurationVar(&d.inputs.Timeout)
	dc.Flag("max-bytes", "Largest response body a URL may send, as 64MiB (1KiB to 1GiB).").Default("64MiB").StringVar(&d.maxBytes)
	dc.Flag("http.bearer-token-file", "File holding a bearer token sent to the URLs.").StringVar(&d.inputs.Client.BearerTokenFile)
	dc.Flag("http.username", "Basic auth user name for the URLs.").StringVar(&d.inputs.Client.Username)
	dc.Flag("http.password-file", "File holding the basic auth password.").StringVar(&d.inputs.Client.PasswordFile)
	dc.Flag("http.tls.ca-file", "CA certificates (PEM) that verify the exporters' certificates.").StringVar(&d.inputs.Client.CAFile)
	dc.Flag("http.tls.cert-file", "Client certificate (PEM).").StringVar(&d.inputs.Client.CertFile)
	dc.Flag("http.tls.key-file", "Client certificate's key (PEM).").StringVar(&d.inputs.Client.KeyFile)
	dc.Flag("http.tls.insecure-skip-verify", "Do not verify the exporters' certificates.").BoolVar(&d.inputs.Client.InsecureSkipVerify)
	dc.Flag("format", "table, or folded: difffolded.pl's lines (stack, base scaled to new's total, new) for flamegraph.pl's differential flame graph.").Default("table").EnumVar(&d.format, "table", profile.FormatFolded)
	dc.Flag("top", "Functions listed as grown and as shrunk, 1 to 10000.").Default("20").IntVar(&d.top)
	dc.Flag("sort", "Rank by total (share of stacks holding the function: the path that changed) or self (share where it is the innermost frame).").Default("total").EnumVar(&d.sort, "total", "self")
	dc.Flag("kind", "Kind of folded inputs: cpu or offcpu (pprof files say theirs).").Default("cpu").EnumVar(&d.kind, string(profile.CPU), string(profile.OffCPU))
	return []*command{
		{clause: rc, check: r.check, run: r.run, privileges: func() (string, []loader.Privilege) {
			return "profile", slices.Concat(loader.PrivLoad, loader.PrivProfile)
		}},
		{clause: dc, check: d.check, run: d.run},
	}
}

func (r *profileRecordFlags) check() error {
	if r.duration <= 0 || r.duration > profile.MaxDuration {
		return fmt.Errorf("--duration %v: must be more than 0 and at most %v", r.duration, profile.MaxDuration)
	}
	if r.freq < 1 || r.freq > profile.MaxFrequency {
		return fmt.Errorf("--frequency %d: must be 1 to %d", r.freq, profile.MaxFrequency)
	}
	if r.minBlock < 0 {
		return fmt.Errorf("--min-block %v: must not be negative", r.minBlock)
	}
	if r.kernelOnly && r.userOnly {
		return errors.New("--kernel-only and --user-only exclude each other")
	}
	// One flag at a time, so that an error names its flag.
	for _, v := range []struct {
		flag                 string
		pids, comms, cgroups []string
	}{{"--pid", r.pids, nil, nil}, {"--comm", nil, r.comms, nil}, {"--cgroup", nil, nil, r.cgroups}} {
		f, err := profile.ParseFilterValues(v.pids, v.comms, v.cgroups)
		if err != nil {
			return fmt.Errorf("%s: %w", v.flag, err)
		}
		r.filter.PIDs, r.filter.Comms, r.filter.Cgroups = append(r.filter.PIDs, f.PIDs...), append(r.filter.Comms, f.Comms...), append(r.filter.Cgroups, f.Cgroups...)
	}
	var err error
	r.filter.KernelOnly, r.filter.UserOnly, r.filter.IncludeIdle = r.kernelOnly, r.userOnly, r.idle
	if r.mem, err = budget.ParseMemoryBudget(r.memBudget); err != nil {
		return err
	}
	return nil
}

// run takes the profile and writes it (profile.Record).
func (r *profileRecordFlags) run(e *env) int {
	ctx, stop := signalContext(e.log, syscall.SIGHUP)
	defer stop()
	kind := profile.CPU
	if r.offcpu {
		kind = profile.OffCPU
	}
	return profile.Record(ctx, profile.RecordOptions{
		Options: profile.Options{Kind: kind, Duration: r.duration, Frequency: r.freq, MinBlock: r.minBlock,
			Filter: r.filter, MemoryBudget: r.mem, Logger: e.log},
		Output: r.output, Format: r.format, Stdout: e.stdout, Stderr: e.stderr,
	})
}

func (d *profileDiffFlags) check() error {
	if d.top < 1 || d.top > 10000 {
		return fmt.Errorf("--top %d: must be 1 to 10000", d.top)
	}
	var err error
	if d.by, err = profile.ParseMeasure(d.sort); err != nil {
		return err
	}
	if d.inputs.Timeout <= 0 {
		return fmt.Errorf("--timeout %v: must be positive", d.inputs.Timeout)
	}
	b, err := units.ParseBase2Bytes(d.maxBytes)
	if err != nil || b < units.KiB || b > units.GiB {
		return fmt.Errorf("--max-bytes %s: must be 1KiB to 1GiB", printable.Quote(d.maxBytes, 32))
	}
	d.inputs.MaxBytes, d.inputs.FlagPrefix = int64(b), "--http."
	if d.baseList, err = splitInputs("base", d.base); err != nil {
		return err
	}
	d.newList, err = splitInputs("new", d.new)
	return err
}

// splitInputs splits a side of profile diff into its inputs: arg is one
// file when it names one (a file name may hold a comma), else a
// comma-separated list of files and URLs.
func splitInputs(side, arg string) ([]string, error) {
	if !profile.IsURL(arg) {
		if _, err := os.Stat(arg); err == nil {
			return []string{arg}, nil
		}
	}
	parts := strings.Split(arg, ",")
	if len(parts) > profile.MaxInputs {
		return nil, fmt.Errorf("%s: %d inputs, at most %d", side, len(parts), profile.MaxInputs)
	}
	for _, p := range parts {
		if p == "" {
			return nil, fmt.Errorf("%s %s: an empty input in the comma-separated list", side, printable.Quote(arg, 256))
		}
	}
	return parts, nil
}

// run compares the two sides (profile.DiffInputs).
func (d *profileDiffFlags) run(e *env) int {
	ctx, stop := signalContext(e.log)
	defer stop()
	return profile.DiffInputs(ctx, d.baseList, d.newList, profile.DiffOptions{Format: d.format, Top: d.top, By: d.by,
		Kind: profile.Kind(d.kind), Inputs: d.inputs, Stdout: e.stdout, Stderr: e.stderr, Logger: e.log})
}

// profileServeFlags are serve's flags of the /profile/ endpoints.
type profileServeFlags struct {
	enable    bool
	frequency int
	maxHTTP   time.Duration
	// --otlp.profiles: push CPU profiles over OTLP.
	otlp        bool
	otlpEvery   time.Duration
	otlpTimeout time.Duration
	otlpSet     [2]bool
}

// addProfileServeFlags declares serve's --profile.* flags on c.
func addProfileServeFlags(c *kingpin.CmdClause) *profileServeFlags {
	p := &profileServeFlags{}
	c.Flag("profile.enable", "Serve CPU and off-CPU profiles on "+profile.PathCPU+" and "+profile.PathOffCPU+" (pprof, or ?format=folded) and their flame graphs on "+ui.ProfilePath+", behind the web config's TLS and authentication. Stacks show what runs on the host: off by default. Keeps the capabilities profiling needs ("+profileCaps+").").BoolVar(&p.enable)
	c.Flag("profile.frequency", fmt.Sprintf("Default sampling frequency of %s, per CPU (1 to %d).", profile.PathCPU, profile.MaxFrequency)).Default(fmt.Sprint(profile.DefaultFrequency)).IntVar(&p.frequency)
	c.Flag("profile.max-duration", fmt.Sprintf("Longest profile /profile/* takes (?seconds=), 1s to %v.", profile.MaxDuration)).Default(profile.DefaultMaxHTTPDuration.String()).DurationVar(&p.maxHTTP)
	c.Flag("otlp.profiles", "Also push host-wide CPU profiles (at --profile.frequency) over OTLP profiles (development signal: the Collector needs --feature-gates=service.profilesSupport), one per --otlp.profiles.interval, to the endpoint, protocol (grpc or http/protobuf) and headers of the OTEL_EXPORTER_OTLP_[PROFILES_]* variables (docs/profiles.md). Keeps the capabilities profiling needs ("+profileCaps+").").BoolVar(&p.otlp)
	c.Flag("otlp.profiles.interval", fmt.Sprintf("Length of each profile pushed, %v to %v.", otlpprofile.MinInterval, otlpprofile.MaxInterval)).Default(otlpprofile.DefaultInterval.String()).IsSetByUser(&p.otlpSet[0]).DurationVar(&p.otlpEvery)
	c.Flag("otlp.profiles.timeout", "Time one OTLP profile push may take.").Default("10s").IsSetByUser(&p.otlpSet[1]).DurationVar(&p.otlpTimeout)
	return p
}

func (p *profileServeFlags) check() error {
	if p.frequency < 1 || p.frequency > profile.MaxFrequency {
		return fmt.Errorf("--profile.frequency %d: must be 1 to %d", p.frequency, profile.MaxFrequency)
	}
	if p.maxHTTP < time.Second || p.maxHTTP > profile.MaxDuration {
		return fmt.Errorf("--profile.max-duration %v: must be 1s to %v", p.maxHTTP, profile.MaxDuration)
	}
	if !p.otlp && (p.otlpSet[0] || p.otlpSet[1]) {
		return errors.New("--otlp.profiles.interval and --otlp.profiles.timeout apply with --otlp.profiles only")
	}
	if p.otlpEvery < otlpprofile.MinInterval || p.otlpEvery > otlpprofile.MaxInterval {
		return fmt.Errorf("--otlp.profiles.interval %v: must be %v to %v", p.otlpEvery, otlpprofile.MinInterval, otlpprofile.MaxInterval)
	}
	if p.otlpTimeout <= 0 {
		return fmt.Errorf("--otlp.profiles.timeout %v: must be positive", p.otlpTimeout)
	}
	return nil
}

// pushOTLP starts --otlp.profiles' sender (nothing without the flag) and
// returns the capabilities to keep; its error names the variable at fault.
func (p *profileServeFlags) pushOTLP(ctx context.Context, ledger *budget.Ledger, version string, log *slog.Logger) (loader.CapSet, error) {
	if !p.otlp {
		return 0, nil
	}
	s, err := otlpprofile.NewSender(version)
	if err != nil {
		return 0, fmt.Errorf("--otlp.profiles: %w", err)
	}
	o := profile.Options{Kind: profile.CPU, Duration: p.otlpEvery, Frequency: p.frequency, Ledger: ledger, Logger: log,
		Symbolizer: symbolize.New(symbolize.Options{Logger: log})}
	log.Info("otlp profiles", "to", s.String(), "interval", p.otlpEvery, "frequency", p.frequency)
	go func() {
		defer s.Close()
		s.Run(ctx, o, p.otlpTimeout, log)
	}()
	caps, _, err := loader.ParseKeep(profileCaps)
	if err != nil {
		panic(err) // a constant
	}
	return caps, nil
}

// serve returns the /profile/ routes and the flame graph page (without
// --profile.enable, routes that say how to turn them on), the
// CPU budget target t extended with the profiles' programs, and the
// capabilities to keep.
func (p *profileServeFlags) serve(ledger *budget.Ledger, t budget.Target, log *slog.Logger) (map[string]http.Handler, budget.Target, loader.CapSet) {
	if !p.enable {
		return profile.DisabledRoutes(ui.ProfilePath), t, 0
	}
	h := profile.NewHandler(profile.HandlerOptions{Ledger: ledger, Frequency: p.frequency, MaxDuration: p.maxHTTP, Logger: log})
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
	if err != nil {
		panic(err) // a constant
	}
	routes := h.Routes()
	routes[ui.ProfilePath] = ui.ProfileHandler() // the flame graph page
	return routes, t, caps
}

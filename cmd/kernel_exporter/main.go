// Command kernel_exporter runs eBPF programs in the kernel and serves their
// maps as Prometheus metrics. See README.md for flags and examples.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/alecthomas/kingpin/v2"
	"github.com/cilium/ebpf"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/common/promslog"
	promslogflag "github.com/prometheus/common/promslog/flag"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web/kingpinflag"
	"go.opentelemetry.io/otel"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"

	"github.com/kernel-exporter/kernel_exporter/budget"
	"github.com/kernel-exporter/kernel_exporter/collector"
	"github.com/kernel-exporter/kernel_exporter/config"
	"github.com/kernel-exporter/kernel_exporter/dump"
	"github.com/kernel-exporter/kernel_exporter/exporter"
	"github.com/kernel-exporter/kernel_exporter/exposition/otlp"
	"github.com/kernel-exporter/kernel_exporter/kube"
	"github.com/kernel-exporter/kernel_exporter/loader"
	"github.com/kernel-exporter/kernel_exporter/privsep"
	"github.com/kernel-exporter/kernel_exporter/programs"
	"github.com/kernel-exporter/kernel_exporter/term"
	"github.com/kernel-exporter/kernel_exporter/web"
)

// DefaultAddress is outside 9100-9999, the fully allocated range of the
// Prometheus exporter port registry (ebpf_exporter has 9435).
const DefaultAddress = ":19435"

func main() {
	os.Exit(run())
}

func run() int {
	app := kingpin.New("kernel_exporter", "Runs eBPF programs in the kernel and serves their maps as Prometheus metrics.")
	var (
		progList    = app.Flag("programs", "Comma-separated bundled programs to run, \"all\" or \"none\". Default: "+strings.Join(programs.Default, ",")+" (none when --config.names is set).").String()
		configDir   = app.Flag("config.dir", "Directory holding <name>.yaml and <name>.bpf.o user programs.").String()
		configNames = app.Flag("config.names", "Comma-separated user programs to load from --config.dir.").String()
		strict      = app.Flag("config.strict", "Exit at start if any config fails to load or attach.").Bool()
		check       = app.Flag("config.check", "Load and attach every config, print a report, and exit (non-zero if any failed).").Bool()
		verbose     = app.Flag("verbose", "With --config.check: also print each metric's key layout, label by label (name, byte offset, size, decoders), saying which labels were inferred from the BTF of the map's key.").Bool()
		loadTimeout = app.Flag("config.load-timeout", "Time each config may take to load and attach; one still loading then is marked down.").Default(exporter.DefaultLoadTimeout.String()).Duration()
		btfPath     = app.Flag("btf.path", "External vmlinux BTF file for kernels without /sys/kernel/btf/vmlinux.").String()
		attachTo    = app.Flag("attach.to", "Kernel function for a config's attach_to programs: <config>=<function> or <config>.<program>=<function> (repeatable), e.g. funclatency=vfs_read.").Strings()
		disable     = app.Flag("attach.disable", "Comma-separated attach kinds to treat as unsupported, so alternatives fall through: "+strings.Join(loader.AttachKinds, ", ")+".").String()
		cacheSize   = app.Flag("decoder.cache-size", "Decoded keys cached per metric, at most the map's max_entries (only keys present in the map at the last scrape are kept); also bounds each decoder cache, up to 100000 entries.").Default("1048576").Int()
		maxSeries   = app.Flag("config.max-series", "Series limit of every metric whose config sets no max_series; map entries beyond it are summed into one overflow series per metric (labels \""+collector.OverflowValue+"\").").Default(strconv.Itoa(config.DefaultMaxSeries)).Int()
		memBudget   = app.Flag("bpf.memory-budget", "Kernel memory all configs' maps together may hold, estimated from their specs before they are created (as 256MiB, 1GiB); a config that would go over it is refused. 0 means no budget.").Default(budget.DefaultMemoryBudgetText).String()
		bpfStats    = app.Flag("bpf.stats", "Turn on kernel.bpf_stats_enabled while running (restored on exit), for per-program run time and count.").Bool()
		cpuBudget   = app.Flag("bpf.cpu-budget", "BPF run time one config's programs may use, in CPU seconds per second summed over CPUs (0.05: 5% of one core); a config over it for a whole measuring window is detached. 0 turns it off.").Default(strconv.FormatFloat(budget.DefaultCPUBudget, 'g', -1, 64)).Float64()
		cpuBackoff  = app.Flag("bpf.budget-backoff", "Wait before a config detached over its CPU budget is attached again; doubled at every new trip, up to 1h.").Default(budget.DefaultBackoff.String()).Duration()
		cpuPeriod   = app.Flag("bpf.budget-period", "CPU budget: one measuring window every this long.").Default(budget.DefaultPeriod.String()).Hidden().Duration()
		cpuWindow   = app.Flag("bpf.budget-window", "CPU budget: how long BPF run-time statistics are on in each period.").Default(budget.DefaultWindow.String()).Hidden().Duration()
		metricsPath = app.Flag("web.telemetry-path", "Path under which to expose metrics.").Default("/metrics").String()
		maxRequests = app.Flag("web.max-requests", "Maximum number of parallel scrape requests; more get 503. 0 means no limit.").Default(strconv.Itoa(web.DefaultMaxRequests)).Int()
		maxConns    = app.Flag("web.max-connections", "Maximum number of open HTTP connections (idle ones included); at most half of the open-file limit. At the cap, a new client closes the connection idle longest.").Default(strconv.Itoa(web.DefaultMaxConnections)).Int()
		noExpMetric = app.Flag("web.disable-exporter-metrics", "Exclude the exporter's process_* and go_* metrics.").Bool()
		enablePprof = app.Flag("web.enable-pprof", "Serve Go profiling under /debug/pprof/.").Bool()
		lifecycle   = app.Flag("web.enable-lifecycle", "Reload the configs on POST /-/reload (as SIGHUP does); without it that path answers 403.").Bool()
		kubeNode    = app.Flag("kube.node-name", "Node whose pods the kube_namespace, kube_pod and kube_container decoders watch through the Kubernetes API (from the downward API's spec.nodeName).").Envar("NODE_NAME").String()
		kubeConfig  = app.Flag("kube.kubeconfig", "Kubeconfig file of the Kubernetes API for the kube_* decoders. Default: the in-cluster service account when KUBERNETES_SERVICE_HOST is set, else no API access (pods are labelled by UID, containers by id).").String()
		kubeCache   = app.Flag("kube.cache-size", fmt.Sprintf("Pods the kube_* decoders keep names of: this many live and this many deleted ones, 1 to %d.", kube.MaxCacheSize)).Default(strconv.Itoa(kube.DefaultCacheSize)).Int()
		capsKeep    = app.Flag("capabilities.keep", "Capabilities to keep once every program is attached, besides CAP_BPF (which reading maps needs on kernels before 6.5): comma-separated names (cap_syslog, CAP_SYS_ADMIN, perfmon), \"none\", or \"all\" to drop nothing. Every other capability is dropped from all sets and no_new_privs is set.").Default("none").String()
		otlpOn      = app.Flag("otlp.metrics", "Also push every metric served on /metrics (the exporter's own included) over OTLP, to the endpoint, protocol (grpc or http/protobuf), headers and TLS of the OTEL_EXPORTER_OTLP_* variables (docs/otlp.md). Serve only.").Bool()
		otlpEvery   = app.Flag("otlp.metrics.interval", fmt.Sprintf("Time between OTLP pushes, %v to %v.", otlp.MinInterval, otlp.MaxInterval)).Default(otlp.DefaultInterval.String()).Duration()
		otlpTimeout = app.Flag("otlp.metrics.timeout", "Time one OTLP push may take, all its requests together; at most the interval.").Default(otlp.DefaultTimeout.String()).Duration()
		webFlags    = kingpinflag.AddFlags(app, DefaultAddress)
	)
	logCfg := &promslog.Config{}
	promslogflag.AddFlags(app, logCfg)
	ref := addRefFlags(app)
	app.Command("serve", "Load the configs and serve their metrics over HTTP until SIGINT or SIGTERM (the default command).").Default()
	dumpCmd := app.Command("dump", "Load the configs, wait --duration, print every metric once to stdout and exit, leaving no program attached. Exit code 0 when every config was up, 1 when one failed (named on stderr), 2 for bad flags. Takes serve's flags except --web.*, --config.check and --config.strict.")
	dumpDuration := dumpCmd.Flag("duration", fmt.Sprintf("Time to count events after every config has loaded, more than 0 and at most %v; SIGINT ends it early and still prints.", dump.MaxDuration)).Default(dump.DefaultDuration.String()).Duration()
	dumpFormat := dumpCmd.Flag("format", "Output format: text (the Prometheus text exposition) or json (prom2json's format).").Default(string(dump.FormatText)).String()
	histCmd := app.Command(term.CommandHist, "Load one program, and every --interval print each of its histograms as bcc's tools do (a table per label set: bucket range, count of the interval, '*' bar), until --count intervals or Ctrl-C; then detach. Takes serve's flags except --web.*, --programs, --config.names, --config.check and --config.strict.")
	histTarget := histCmd.Arg("program[.metric]", "A bundled program (or, with --config.dir, <dir>/<program>.yaml), optionally with one of its histograms: biolatency, biolatency.bio_latency_seconds.").Required().String()
	histInterval := histCmd.Flag("interval", fmt.Sprintf("Time between tables, %v to %v.", term.MinInterval, term.MaxInterval)).Default(term.DefaultInterval.String()).Duration()
	histCount := histCmd.Flag("count", fmt.Sprintf("Intervals to print, then exit; 0 (up to %d) runs until Ctrl-C.", term.MaxCount)).Default("0").Int()
	topCmd := app.Command(term.CommandTop, "Load one program and show its counters, one row per label set sorted by rate per second, redrawn in place every --interval until --count intervals or Ctrl-C; then detach. Takes hist's flags.")
	topTarget := topCmd.Arg("program", "A bundled program (or, with --config.dir, <dir>/<program>.yaml).").Required().String()
	topInterval := topCmd.Flag("interval", fmt.Sprintf("Time between frames, %v to %v.", term.MinInterval, term.MaxInterval)).Default(term.DefaultInterval.String()).Duration()
	topCount := topCmd.Flag("count", fmt.Sprintf("Frames to show, then exit; 0 (up to %d) runs until Ctrl-C.", term.MaxCount)).Default("0").Int()
	app.Command(privsep.Command, "Internal: the privileged helper the exporter starts for itself (see package privsep).").Hidden()
	prof := addProfileFlags(app)
	app.Version(version.Print("kernel_exporter"))
	// --version and --help to stdout (kingpin's default is stderr), so that
	// kernel_exporter --version | grep works; errors stay on stderr.
	app.UsageWriter(os.Stdout)
	app.HelpFlag.Short('h')
	command, err := app.Parse(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	// The terminal mode's screen is for its tables: it logs warnings and
	// errors only, unless --log.level asks for debug.
	terminal := command == histCmd.FullCommand() || command == topCmd.FullCommand()
	if err := ref.apply(logCfg, webFlags); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if terminal && logCfg.Level.String() == "info" {
		_ = logCfg.Level.Set("warn")
	}
	log := ref.logger(promslog.New(logCfg))
	ref.skipCacheNote(log)
	slog.SetDefault(log)
	if command == privsep.Command {
		return privsep.Main(log)
	}
	// profile, profile diff and top cpu (package profile).
	if code, ok := prof.run(command, topCmd.FullCommand(), *topTarget, *topInterval, *topCount, *memBudget, log); ok {
		return code
	}
	termOpts := term.Options{Command: command, Stdout: os.Stdout, Stderr: os.Stderr, Logger: log}
	var termSource exporter.Source
	if terminal {
		target, interval, count := *histTarget, *histInterval, *histCount
		if command == topCmd.FullCommand() {
			target, interval, count = *topTarget, *topInterval, *topCount
		}
		termOpts.Interval, termOpts.Count = interval, count
		err = term.CheckFlags(interval, count)
		if err == nil {
			termSource, termOpts.Metric, err = term.ParseTarget(command, target, *configDir)
			termOpts.Program = termSource.Name
		}
		if err == nil && (*check || *strict || *progList != "" || *configNames != "") {
			err = fmt.Errorf("--programs, --config.names, --config.check and --config.strict apply to serve, not %s (which loads the one program it is given)", command)
		}
		if err != nil {
			log.Error("bad flags", "err", err)
			return 2
		}
	}
	dumping := command == dumpCmd.FullCommand()
	dumpOpts := dump.Options{Duration: *dumpDuration, Stdout: os.Stdout, Stderr: os.Stderr, Logger: log}
	if dumping {
		dumpOpts.Format, err = dump.ParseFlags(*dumpDuration, *dumpFormat)
		if err == nil && (*check || *strict) {
			err = errors.New("--config.check and --config.strict apply to serve, not dump (which exits 1 when a config fails)")
		}
		if err != nil {
			log.Error("bad flags", "err", err)
			return 2
		}
	}

	sources, err := sources(*progList, *configDir, *configNames)
	if terminal {
		sources, err = []exporter.Source{termSource}, nil
	}
	if err != nil {
		log.Error("bad flags", "err", err)
		return 2
	}
	attachOverrides, err := exporter.ParseAttachTo(*attachTo, sources)
	if err != nil {
		log.Error("bad flags", "err", err)
		return 2
	}
	disabled := splitList(*disable)
	for _, k := range disabled {
		if !slices.Contains(loader.AttachKinds, k) {
			log.Error("bad flags", "err", fmt.Sprintf("--attach.disable: unknown attach kind %q (known: %s)", k, strings.Join(loader.AttachKinds, ", ")))
			return 2
		}
	}
	capsToKeep, keepAllCaps, err := loader.ParseKeep(*capsKeep)
	if err != nil {
		log.Error("bad flags", "err", fmt.Errorf("--capabilities.keep: %w", err))
		return 2
	}
	if *loadTimeout <= 0 {
		log.Error("bad flags", "err", fmt.Sprintf("--config.load-timeout %v: must be positive", *loadTimeout))
		return 2
	}
	if *maxSeries < 1 || *maxSeries > config.MaxMaxSeries {
		log.Error("bad flags", "err", fmt.Sprintf("--config.max-series %d: must be 1 to %d", *maxSeries, config.MaxMaxSeries))
		return 2
	}
	if *otlpOn {
		err := otlp.CheckOptions(*otlpEvery, *otlpTimeout)
		if err == nil && (dumping || terminal || *check) {
			err = errors.New("--otlp.metrics applies to serve only")
		}
		if err != nil {
			log.Error("bad flags", "err", err)
			return 2
		}
	}
	if *kubeCache < 1 || *kubeCache > kube.MaxCacheSize {
		log.Error("bad flags", "err", fmt.Sprintf("--kube.cache-size %d: must be 1 to %d", *kubeCache, kube.MaxCacheSize))
		return 2
	}
	// client-go logs through klog: send it to this process' log.
	klog.SetSlogLogger(log)
	// The OpenTelemetry SDK reports what it cannot return to a caller (an
	// attribute over a limit, an exporter's internal error) through its
	// global handler, which prints with the standard log: send it here too.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("OpenTelemetry SDK", "err", err)
	}))
	memBytes, err := budget.ParseMemoryBudget(*memBudget)
	if err != nil {
		log.Error("bad flags", "err", err)
		return 2
	}
	cpuOpts := budget.CPUOptions{Budget: *cpuBudget, Backoff: *cpuBackoff, Period: *cpuPeriod, Window: *cpuWindow, StatsOn: *bpfStats, Logger: log}
	if err := budget.CheckCPUOptions(cpuOpts, runtime.NumCPU()); err != nil {
		log.Error("bad flags", "err", err)
		return 2
	}
	if *bpfStats {
		closer, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
		if err != nil {
			log.Error("enable BPF stats", "err", err)
		} else {
			defer closer.Close()
		}
	}

	// The CPU budget turns statistics on and re-attaches after the
	// capability drop: a helper started now keeps what that needs, so
	// that this process does not (package privsep).
	var helper *privsep.Client
	if !dumping && !terminal && !*check && cpuOpts.Budget > 0 && !keepAllCaps {
		helper = privsep.StartLogged(log)
		defer helper.Stop()
		cpuOpts.EnableStats = helper.StatsFunc()
	}
	exp := exporter.New(exporter.Options{Sources: sources, CacheSize: *cacheSize, MaxSeries: *maxSeries, BTFPath: *btfPath, AttachTo: attachOverrides, DisableAttach: disabled, LoadTimeout: *loadTimeout, MemoryBudget: memBytes, Tracepoints: helper.Tracepoints(), Logger: log,
		Compat: ref.Compat, DefaultNamespace: ref.namespace(),
		Kube: &kube.Options{NodeName: *kubeNode, Kubeconfig: *kubeConfig, CacheSize: *kubeCache, Logger: log}})
	defer exp.Close()

	// The first SIGINT or SIGTERM stops start-up or serving; a second one
	// exits at once.
	sigc := make(chan os.Signal, 2)
	signal.Notify(sigc, syscall.SIGINT, syscall.SIGTERM)
	if terminal {
		// Closing the terminal (or its tmux session) sends SIGHUP: detach
		// as on Ctrl-C.
		signal.Notify(sigc, syscall.SIGHUP)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() {
		sig := <-sigc
		log.Info("shutting down: detaching programs", "signal", sig.String())
		stop()
		sig = <-sigc
		log.Warn("second signal: exiting at once", "signal", sig.String())
		os.Exit(1)
	}()

	if dumping {
		exp.Registry.MustRegister(versioncollector.NewCollector("kernel_exporter"))
		if !keepAllCaps {
			dumpOpts.AfterLoad = func() { loader.DropAfterAttach(capsToKeep, log) }
		}
		return dump.Run(ctx, exp, dumpOpts)
	}

	if terminal {
		if !keepAllCaps {
			termOpts.AfterLoad = func() { loader.DropAfterAttach(capsToKeep, log) }
		}
		return term.Run(ctx, exp, termOpts)
	}

	if *check {
		exp.Start(ctx)
		<-exp.Loaded()
		if ctx.Err() != nil {
			return 1
		}
		return report(exp, *verbose)
	}

	if !*noExpMetric {
		exp.Registry.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewGoCollector())
	}
	exp.Registry.MustRegister(versioncollector.NewCollector("kernel_exporter"))
	if *otlpOn {
		p, err := otlp.New(ctx, exp.Status, exp.Registry, otlp.Options{Interval: *otlpEvery, Timeout: *otlpTimeout,
			Version: version.Version, Registerer: exp.Registry, Logger: log})
		if err != nil {
			log.Error("bad flags", "err", fmt.Errorf("--otlp.metrics: %w", err))
			return 2
		}
		go p.Run(ctx)
	}
	if err := web.CheckConfigFile(*webFlags.WebConfigFile); err != nil {
		log.Error("bad flags", "err", err)
		return 2
	}
	// --profile.enable: the /profile/ endpoints, under the budgets.
	profRoutes, cpuTarget, profCaps, err := prof.serve(exp.Memory, budget.Target{Configs: budget.StatusConfigs(exp.Status), Reattach: exp.Reattach,
		Detach: func(c, reason string) { _ = exp.Detach(c, budget.ResourceCPU, reason) }}, log)
	if err != nil {
		log.Error("bad flags", "err", err)
		return 2
	}
	capsToKeep |= profCaps
	cpu := budget.NewCPU(cpuOpts, cpuTarget)
	srv, err := web.NewServer(exp.Registry, exp.Registry, exp.Status, webFlags, web.Options{Handlers: profRoutes,
		MetricsPath: *metricsPath, MaxRequests: *maxRequests, MaxConnections: *maxConns,
		EnablePprof: *enablePprof, Version: version.Version, Loaded: exp.Loaded(), Logger: log,
		CPURates: cpu.LastRates, EnableLifecycle: *lifecycle,
		Reload: func(ctx context.Context) error { _, err := exp.Reload(ctx); return err },
	})
	if err != nil {
		log.Error("bad flags", "err", err)
		return 2
	}
	// The port opens before any config loads, so that one slow config
	// never keeps /metrics down for the others.
	if err := srv.Listen(); err != nil {
		log.Error("listen", "err", err)
		return 1
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve() }()
	exp.Start(ctx)
	go cpu.Run(ctx)
	// SIGHUP reloads the configs (serve only: hist and top exit on it).
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				_, _ = exp.Reload(ctx) // logs each config's outcome
			}
		}
	}()

	loaded := exp.Loaded()
	for {
		select {
		case err := <-errc:
			if err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("serve", "err", err)
				return 1
			}
			return 0
		case <-ctx.Done():
			srv.Shutdown()
			return 0
		case <-loaded:
			loaded = nil
			if ctx.Err() != nil {
				continue
			}
			// Every config has finished loading (or timed out): nothing
			// attaches after this point, and the decoders have read what
			// needs privileges (kallsyms), so the capabilities that
			// loading needed can go.
			if !keepAllCaps {
				loader.DropAfterAttach(capsToKeep, log)
				// exporter-toolkit reads the web config and its
				// certificates at every request: they must stay readable
				// without the capabilities just dropped.
				if err := web.CheckConfigFile(*webFlags.WebConfigFile); err != nil {
					log.Error("the web config is unreadable after the capability drop, so every request would fail: make it and its certificate files readable by this user, or keep cap_dac_read_search with --capabilities.keep", "err", err)
					srv.Shutdown()
					return 1
				}
			}
			if failed := exp.Failed(); *strict && len(failed) > 0 {
				log.Error("config failed and --config.strict is set", "config", failed[0].Name, "reason", failed[0].Reason)
				srv.Shutdown()
				return 1
			}
		}
	}
}

// sources turns the flags into the list of configs to start.
func sources(progList, dir, names string) ([]exporter.Source, error) {
	var out []exporter.Source
	var bundled []string
	switch progList {
	case "":
		if names == "" {
			bundled = programs.Default
		}
	case "none":
	case "all":
		bundled = programs.Names()
	default:
		bundled = splitList(progList)
	}
	seen := map[string]string{}
	add := func(flag, n, dir string) error {
		// Plain names only: a config is always <dir>/<name>.yaml, and its
		// name labels every self-metric, so it is given once.
		if err := config.CheckName(n); err != nil {
			return fmt.Errorf("%s: %w", flag, err)
		}
		if prev, ok := seen[n]; ok {
			return fmt.Errorf("%s: config %s is already given by %s", flag, n, prev)
		}
		seen[n] = flag
		out = append(out, exporter.Source{Name: n, Dir: dir})
		return nil
	}
	for _, n := range bundled {
		if err := add("--programs", n, ""); err != nil {
			return nil, err
		}
	}
	if names != "" {
		if dir == "" {
			return nil, errors.New("--config.names needs --config.dir")
		}
		for _, n := range splitList(names) {
			if err := add("--config.names", n, dir); err != nil {
				return nil, err
			}
		}
	}
	if len(out) == 0 {
		return nil, errors.New("nothing to run: give --programs or --config.names")
	}
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// report prints one line per config and returns 1 if any failed.
func report(exp *exporter.Exporter, verbose bool) int {
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
			fmt.Printf("ok    %s (%s): %d programs attached%s\n", st.Name, st.Source, len(st.Programs), extra)
			if verbose && st.Collector != nil {
				printLayouts(os.Stdout, st.Collector.Layouts())
			}
			continue
		}
		rc = 1
		fmt.Printf("FAIL  %s (%s): %s\n", st.Name, st.Source, st.Reason)
	}
	return rc
}

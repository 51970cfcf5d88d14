// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/common/version"
	toolkit "github.com/prometheus/exporter-toolkit/web"
	"github.com/prometheus/exporter-toolkit/web/kingpinflag"

	"github.com/kernel-exporter/kernel_exporter/bpfstats"
	"github.com/kernel-exporter/kernel_exporter/budget"
	"github.com/kernel-exporter/kernel_exporter/exposition/otlp"
	"github.com/kernel-exporter/kernel_exporter/loader"
	"github.com/kernel-exporter/kernel_exporter/privsep"
	"github.com/kernel-exporter/kernel_exporter/web"
)

// maxWebLimit bounds --web.max-requests and --web.max-connections (the
// server lowers the latter further to half of the open-file limit).
const maxWebLimit = 1 << 20

// serveFlags are the flags of serve, the default command.
type serveFlags struct {
	load *loadFlags
	src  *sourceFlags
	prof *profileServeFlags

	check, strict, verbose bool

	web         *toolkit.FlagConfig
	metricsPath string
	maxRequests int
	maxConns    int
	maxPerAddr  int
	maxHeader   int
	healthAddr  string
	noExpMetric bool
	enablePprof bool
	lifecycle   bool

	otlpOn      bool
	otlpEvery   time.Duration
	otlpTimeout time.Duration
	// otlpSet: --otlp.metrics.interval or .timeout was given.
	otlpSet [2]bool

	bpf   *bpfFlags
	audit *auditFlags

	cpuBudget  float64
	cpuBackoff time.Duration
	cpuPeriod  time.Duration
	cpuWindow  time.Duration
}

// serveCommand declares serve: load the configs and serve their metrics
// over HTTP (or, with --config.check, report and exit: check.go).
func serveCommand(app *kingpin.Application) *command {
	c := app.Command("serve", "Load the configs and serve their metrics over HTTP until SIGINT or SIGTERM (the default command).").Default()
	f := &serveFlags{src: addSourceFlags(c), load: addLoadFlags(c), prof: addProfileServeFlags(c)}
	c.Flag("config.strict", "Exit at start if any config fails to load or attach.").BoolVar(&f.strict)
	c.Flag("config.check", "Load and attach every config, print a report, and exit (non-zero if any failed).").BoolVar(&f.check)
	c.Flag("verbose", "With --config.check: also print each metric's key layout, label by label (name, byte offset, size, decoders), saying which labels were inferred from the BTF of the map's key.").BoolVar(&f.verbose)
	f.bpf = addBPFFlags(c)
	f.audit = addAuditFlags(c)
	c.Flag("bpf.cpu-budget", "BPF run time one config's programs may use, in CPU seconds per second summed over CPUs (0.05: 5% of one core); a config over it for a whole measuring window is detached. 0 turns it off.").Default(strconv.FormatFloat(budget.DefaultCPUBudget, 'g', -1, 64)).Float64Var(&f.cpuBudget)
	c.Flag("bpf.budget-backoff", "Wait before a config detached over its CPU budget is attached again; doubled at every new trip, up to 1h.").Default(budget.DefaultBackoff.String()).DurationVar(&f.cpuBackoff)
	c.Flag("bpf.budget-period", "CPU budget: one measuring window every this long.").Default(budget.DefaultPeriod.String()).Hidden().DurationVar(&f.cpuPeriod)
	c.Flag("bpf.budget-window", "CPU budget: how long BPF run-time statistics are on in each period.").Default(budget.DefaultWindow.String()).Hidden().DurationVar(&f.cpuWindow)
	c.Flag("web.telemetry-path", "Path under which to expose metrics.").Default("/metrics").StringVar(&f.metricsPath)
	c.Flag("web.max-requests", "Maximum number of parallel scrape requests; more get 503. 0 means no limit.").Default(strconv.Itoa(web.DefaultMaxRequests)).IntVar(&f.maxRequests)
	c.Flag("web.max-connections", "Maximum number of open HTTP connections (idle ones included); at most half of the open-file limit. At the cap, a new client closes the oldest connection that has sent no complete request, else the one idle longest.").Default(strconv.Itoa(web.DefaultMaxConnections)).IntVar(&f.maxConns)
	c.Flag("web.max-connections-per-address", "Maximum number of open HTTP connections from one client address (an IPv4 address, an IPv6 /64); more than --web.max-connections means no limit of its own. Over it, a new connection closes one of the address's own that has sent no complete request or is idle, else it is closed.").Default(strconv.Itoa(web.DefaultMaxConnectionsPerAddress)).IntVar(&f.maxPerAddr)
	c.Flag("web.health-address", "Loopback address (127.0.0.1:<port> or [::1]:<port>) of a second listener that serves /-/healthy and /-/ready alone, over plain HTTP without --web.config.file's TLS and authentication: for probes that should carry no credentials (a kubelet's, with host networking). Default: none.").StringVar(&f.healthAddr)
	c.Flag("web.max-header-bytes", fmt.Sprintf("Maximum size in bytes of a request's line and headers, %d to %d; longer ones get 431.", web.MinMaxHeaderBytes, web.MaxMaxHeaderBytes)).Default(strconv.Itoa(web.DefaultMaxHeaderBytes)).IntVar(&f.maxHeader)
	c.Flag("web.disable-exporter-metrics", "Exclude the exporter's process_* and go_* metrics.").BoolVar(&f.noExpMetric)
	c.Flag("web.enable-pprof", "Serve Go profiling under /debug/pprof/.").BoolVar(&f.enablePprof)
	c.Flag("web.enable-lifecycle", "Reload the configs on POST /-/reload (as SIGHUP does); without it that path answers 403.").BoolVar(&f.lifecycle)
	f.web = kingpinflag.AddFlags(c, DefaultAddress)
	c.Flag("otlp.metrics", "Also push every metric served on /metrics (the exporter's own included) over OTLP, to the endpoint, protocol (grpc or http/protobuf), headers and TLS of the OTEL_EXPORTER_OTLP_* variables (docs/otlp.md).").BoolVar(&f.otlpOn)
	c.Flag("otlp.metrics.interval", fmt.Sprintf("Time between OTLP pushes, %v to %v.", otlp.MinInterval, otlp.MaxInterval)).Default(otlp.DefaultInterval.String()).IsSetByUser(&f.otlpSet[0]).DurationVar(&f.otlpEvery)
	c.Flag("otlp.metrics.timeout", "Time one OTLP push may take, all its requests together; at most the interval.").Default(otlp.DefaultTimeout.String()).IsSetByUser(&f.otlpSet[1]).DurationVar(&f.otlpTimeout)
	return &command{clause: c, check: f.checkFlags, run: f.run, privileges: f.privileges}
}

// privileges returns what serve needs: loading its configs, or with none
// (--programs=none) listing the host's BPF objects for the host BPF
// collector; and what it uses besides: the decoders', the CPU budget's
// and the collector's, and with --profile.enable or --otlp.profiles the
// profile's.
func (f *serveFlags) privileges() (string, []loader.Privilege) {
	if f.check {
		return "serve --config.check", slices.Concat(loader.PrivLoad, loader.PrivConfigs)
	}
	var need []loader.Privilege
	if len(f.load.sources) == 0 {
		need = loader.PrivListBPF
	} else {
		need = slices.Concat(loader.PrivLoad, loader.PrivConfigs)
		if f.bpf.on || f.cpuBudget > 0 {
			need = append(need, loader.Optional(loader.PrivListBPF)...)
		}
	}
	if f.prof.enable || f.prof.otlp {
		need = append(need, loader.PrivProfile...)
	}
	return "serve", need
}

// cpuOptions returns the CPU budget's options.
func (f *serveFlags) cpuOptions() budget.CPUOptions {
	return budget.CPUOptions{Budget: f.cpuBudget, Backoff: f.cpuBackoff, Period: f.cpuPeriod, Window: f.cpuWindow, StatsOn: f.load.bpfStats,
		SysctlOn: bpfstats.SysctlStatsOn}
}

// checkFlags checks serve's flags.
func (f *serveFlags) checkFlags() error {
	sources, err := f.src.sources(f.load.configDir)
	if err != nil {
		return err
	}
	if err := f.prof.check(); err != nil {
		return err
	}
	if err := f.load.check(sources); err != nil {
		return err
	}
	if f.verbose && !f.check {
		return errors.New("--verbose applies to --config.check only")
	}
	// With no config, serve still serves the host BPF collector.
	if len(sources) == 0 && (f.check || !f.bpf.on) {
		why := "--no-collector.bpf turns off the host BPF collector, the only other source of metrics"
		if f.check {
			why = "--config.check has no config to check"
		}
		return fmt.Errorf("%w: %s", errNothingToRun, why)
	}
	if err := applySystemdFD(f.web); err != nil {
		return err
	}
	if err := checkListenAddresses(*f.web.WebListenAddresses); err != nil {
		return err
	}
	if err := web.CheckMetricsPath(f.metricsPath, f.enablePprof); err != nil {
		return err
	}
	if f.maxRequests < 0 || f.maxRequests > maxWebLimit {
		return fmt.Errorf("--web.max-requests %d: must be 0 (no limit) to %d", f.maxRequests, maxWebLimit)
	}
	if f.maxConns < 1 || f.maxConns > maxWebLimit {
		return fmt.Errorf("--web.max-connections %d: must be 1 to %d", f.maxConns, maxWebLimit)
	}
	if f.maxPerAddr < 1 || f.maxPerAddr > maxWebLimit {
		return fmt.Errorf("--web.max-connections-per-address %d: must be 1 to %d", f.maxPerAddr, maxWebLimit)
	}
	// More than the connection cap means no limit of its own.
	f.maxPerAddr = min(f.maxPerAddr, f.maxConns)
	if err := web.CheckHealthAddress(f.healthAddr); err != nil {
		return err
	}
	if f.maxHeader < web.MinMaxHeaderBytes || f.maxHeader > web.MaxMaxHeaderBytes {
		return fmt.Errorf("--web.max-header-bytes %d: must be %d to %d", f.maxHeader, web.MinMaxHeaderBytes, web.MaxMaxHeaderBytes)
	}
	if !f.otlpOn && (f.otlpSet[0] || f.otlpSet[1]) {
		return errors.New("--otlp.metrics.interval and --otlp.metrics.timeout apply with --otlp.metrics only")
	}
	if f.otlpOn {
		if err := otlp.CheckOptions(f.otlpEvery, f.otlpTimeout); err != nil {
			return err
		}
		if f.check {
			return errors.New("--otlp.metrics applies to serve only, not --config.check")
		}
	}
	if err := budget.CheckCPUOptions(f.cpuOptions(), runtime.NumCPU()); err != nil {
		return err
	}
	if err := f.bpf.check(); err != nil {
		return err
	}
	if err := f.audit.check(); err != nil {
		return err
	}
	return web.CheckConfigFile(*f.web.WebConfigFile)
}

// checkListenAddresses checks the form of each --web.listen-address:
// host:port (a port number or service name), or vsock://, which
// exporter-toolkit parses itself.
func checkListenAddresses(addrs []string) error {
	for _, a := range addrs {
		if strings.HasPrefix(a, "vsock://") {
			continue
		}
		_, port, err := net.SplitHostPort(a)
		if err == nil {
			_, err = net.LookupPort("tcp", port)
		}
		if err != nil {
			return fmt.Errorf("--web.listen-address %s: want host:port, :port or vsock://<cid>:<port> (%v)", quote(a), err)
		}
	}
	return nil
}

// run serves until SIGINT or SIGTERM, or runs --config.check.
func (f *serveFlags) run(e *env) int {
	log := e.log
	f.load.ref.skipCacheNote(log)
	f.src.noteLeftOut(log)
	defer f.load.start(log)()
	if f.check {
		return f.runCheck(e)
	}

	// Reloads load, the CPU budget turns statistics on and re-attaches,
	// after the capability drop: a helper started now keeps what that
	// needs, so that this process does not (package privsep).
	cpuOpts := f.cpuOptions()
	cpuOpts.Logger = log
	var helper *privsep.Client
	if !f.load.keepAll {
		helper = privsep.StartLogged(log, f.load.helperSettings(), f.load.loadTimeout)
		defer helper.Stop()
		cpuOpts.EnableStats = helper.StatsFunc()
	}
	exp := f.load.exporter(helper, log)
	defer exp.Close()
	ctx, stop := signalContext(log)
	defer stop()

	if !f.noExpMetric {
		exp.Registry.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewGoCollector())
	}
	exp.Registry.MustRegister(versioncollector.NewCollector("kernel_exporter"))
	if helper != nil {
		exp.Registry.MustRegister(helper)
	}
	// The host's BPF programs, measured over the CPU budget's windows.
	probe := statsProbe(log)
	cpuOpts.Probe = probe
	hostBPF := f.bpf.collector(exp, helper, f.load.bpfStats, probe, log)
	if hostBPF != nil {
		exp.Registry.MustRegister(hostBPF)
		cpuOpts.Observers = append(cpuOpts.Observers, hostBPF)
		// One figure per program: the config's run series are the
		// host collector's.
		exp.Status.RunFigures(hostBPF.ProgramFigures())
	}
	if f.otlpOn {
		p, err := otlp.New(ctx, exp.Status, exp.Registry, otlp.Options{Interval: f.otlpEvery, Timeout: f.otlpTimeout,
			Version: version.Version, Registerer: exp.Registry, Logger: log})
		if err != nil {
			return e.flagError(fmt.Errorf("--otlp.metrics: %w", err))
		}
		go p.Run(ctx)
	}
	// --profile.enable: the /profile/ endpoints, under the budgets.
	profRoutes, cpuTarget, profCaps := f.prof.serve(exp.Memory, budget.Target{Configs: budget.StatusConfigs(exp.Status), Reattach: exp.Reattach,
		Detach: func(c, reason string) { _ = exp.Detach(c, budget.ResourceCPU, reason) }}, log)
	f.load.keep |= profCaps
	otlpCaps, err := f.prof.pushOTLP(ctx, exp.Memory, version.Version, log)
	if err != nil {
		return e.flagError(err)
	}
	f.load.keep |= otlpCaps
	cpu := budget.NewCPU(cpuOpts, cpuTarget)
	auditStates := f.audit.start(ctx, exp, log)
	srv, err := web.NewServer(exp.Registry, exp.Registry, exp.Status, f.web, web.Options{Handlers: profRoutes,
		MetricsPath: f.metricsPath, MaxRequests: f.maxRequests, MaxConnections: f.maxConns,
		MaxConnectionsPerAddress: f.maxPerAddr, MaxHeaderBytes: f.maxHeader, HealthAddress: f.healthAddr,
		EnablePprof: f.enablePprof, Version: version.Version, Loaded: exp.Loaded(), Logger: log,
		CPURates: cpu.LastRates, IdlePrograms: cpu.LastIdle, HostBPF: hostBPF.Top5(), Audit: auditStates, EnableLifecycle: f.lifecycle,
		Reload: func(ctx context.Context) error { _, err := exp.Reload(ctx); return err },
	})
	if err != nil {
		return e.flagError(err)
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
			helper.Stopping()
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
			if drop := f.load.dropCaps(log); drop != nil {
				drop()
				// The server reads the web config and its
				// certificates again when they change: they must stay
				// readable without the capabilities just dropped.
				if err := web.CheckConfigFile(*f.web.WebConfigFile); err != nil {
					log.Error("the web config is unreadable after the capability drop, so every request would fail: make it and its certificate files readable by this user, or keep cap_dac_read_search with --capabilities.keep", "err", err)
					srv.Shutdown()
					return 1
				}
			}
			if failed := exp.Failed(); f.strict && len(failed) > 0 {
				log.Error("config failed and --config.strict is set", "config", failed[0].Name, "reason", failed[0].Reason)
				srv.Shutdown()
				return 1
			}
		}
	}
}

// Command kernel_exporter runs eBPF programs in the kernel and serves their
// maps as Prometheus metrics. See README.md for flags and examples.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/alecthomas/kingpin/v2"
	"github.com/cilium/ebpf"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/promslog"
	promslogflag "github.com/prometheus/common/promslog/flag"
	"github.com/prometheus/common/version"
	toolkit "github.com/prometheus/exporter-toolkit/web"
	"github.com/prometheus/exporter-toolkit/web/kingpinflag"
	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/exporter"
	"github.com/kernel-exporter/kernel_exporter/loader"
	"github.com/kernel-exporter/kernel_exporter/programs"
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
		btfPath     = app.Flag("btf.path", "External vmlinux BTF file for kernels without /sys/kernel/btf/vmlinux.").String()
		attachTo    = app.Flag("attach.to", "Kernel function for a config's attach_to programs: <config>=<function> or <config>.<program>=<function> (repeatable), e.g. funclatency=vfs_read.").Strings()
		disable     = app.Flag("attach.disable", "Comma-separated attach kinds to treat as unsupported, so alternatives fall through: "+strings.Join(loader.AttachKinds, ", ")+".").String()
		cacheSize   = app.Flag("decoder.cache-size", "Decoded keys cached per metric (only keys present in the map at the last scrape are kept); also bounds each decoder cache, up to 100000 entries.").Default("1048576").Int()
		bpfStats    = app.Flag("bpf.stats", "Turn on kernel.bpf_stats_enabled while running (restored on exit), for per-program run time and count.").Bool()
		metricsPath = app.Flag("web.telemetry-path", "Path under which to expose metrics.").Default("/metrics").String()
		enablePprof = app.Flag("web.enable-pprof", "Serve Go profiling under /debug/pprof/.").Bool()
		capsKeep    = app.Flag("capabilities.keep", "Capabilities to keep once every program is attached, besides CAP_BPF (which reading maps needs on kernels before 6.5): comma-separated names (cap_syslog, CAP_SYS_ADMIN, perfmon), \"none\", or \"all\" to drop nothing. Every other capability is dropped from all sets and no_new_privs is set.").Default("none").String()
		webFlags    = kingpinflag.AddFlags(app, DefaultAddress)
	)
	logCfg := &promslog.Config{}
	promslogflag.AddFlags(app, logCfg)
	app.Version(version.Print("kernel_exporter"))
	app.HelpFlag.Short('h')
	if _, err := app.Parse(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	log := promslog.New(logCfg)
	slog.SetDefault(log)

	sources, err := sources(*progList, *configDir, *configNames)
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
	if *bpfStats {
		closer, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
		if err != nil {
			log.Error("enable BPF stats", "err", err)
		} else {
			defer closer.Close()
		}
	}

	exp := exporter.New(exporter.Options{Sources: sources, CacheSize: *cacheSize, BTFPath: *btfPath, AttachTo: attachOverrides, DisableAttach: disabled, Logger: log})
	defer exp.Close()
	failed := exp.Failed()

	if *check {
		return report(exp)
	}
	if !keepAllCaps {
		loader.DropAfterAttach(capsToKeep, log)
	}
	if *strict && len(failed) > 0 {
		log.Error("config failed and --config.strict is set", "config", failed[0].Name, "reason", failed[0].Reason)
		return 1
	}

	exp.Registry.MustRegister(versioncollector.NewCollector("kernel_exporter"))
	mux := http.NewServeMux()
	mux.Handle(*metricsPath, promhttp.HandlerFor(exp.Registry, promhttp.HandlerOpts{
		ErrorLog:            slog.NewLogLogger(log.Handler(), slog.LevelError),
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: 64,
		Registry:            exp.Registry,
	}))
	if *metricsPath != "/" {
		mux.Handle("/", web.Landing(exp.Status, *metricsPath, version.Version))
	}
	if *enablePprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	srv := &http.Server{Handler: mux}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- toolkit.ListenAndServe(srv, webFlags, log) }()
	select {
	case err := <-errc:
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("serve", "err", err)
			return 1
		}
	case <-ctx.Done():
		log.Info("shutting down: detaching programs")
		_ = srv.Shutdown(context.Background())
	}
	return 0
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
	for _, n := range bundled {
		out = append(out, exporter.Source{Name: n})
	}
	if names != "" {
		if dir == "" {
			return nil, errors.New("--config.names needs --config.dir")
		}
		for _, n := range splitList(names) {
			out = append(out, exporter.Source{Name: n, Dir: dir})
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
func report(exp *exporter.Exporter) int {
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
			continue
		}
		rc = 1
		fmt.Printf("FAIL  %s (%s): %s\n", st.Name, st.Source, st.Reason)
	}
	return rc
}

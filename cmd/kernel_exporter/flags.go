package main

import (
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/cilium/ebpf"
	"go.opentelemetry.io/otel"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"

	"github.com/kernel-exporter/kernel_exporter/budget"
	"github.com/kernel-exporter/kernel_exporter/collector"
	"github.com/kernel-exporter/kernel_exporter/config"
	"github.com/kernel-exporter/kernel_exporter/exporter"
	"github.com/kernel-exporter/kernel_exporter/kube"
	"github.com/kernel-exporter/kernel_exporter/loader"
	"github.com/kernel-exporter/kernel_exporter/programs"
)

// loadFlags are the flags of every command that loads configs (serve,
// dump, hist, top): where user configs are, how they load and attach, the
// limits they run under and the capabilities kept after.
type loadFlags struct {
	configDir   string
	loadTimeout time.Duration
	btfPath     string
	attachTo    []string
	disable     string
	cacheSize   int
	maxSeries   int
	memBudget   string
	bpfStats    bool
	capsKeep    string
	kubeNode    string
	kubeConfig  string
	kubeCache   int
	ref         *refLoadFlags

	// Set by check.
	sources  []exporter.Source
	attach   map[string][]string
	disabled []string
	keep     loader.CapSet
	keepAll  bool
	memBytes uint64
}

// addLoadFlags declares the load flags on c.
func addLoadFlags(c *kingpin.CmdClause) *loadFlags {
	f := &loadFlags{}
	c.Flag("config.dir", "Directory holding <name>.yaml and <name>.bpf.o user programs.").StringVar(&f.configDir)
	c.Flag("config.load-timeout", "Time each config may take to load and attach; one still loading then is marked down.").Default(exporter.DefaultLoadTimeout.String()).DurationVar(&f.loadTimeout)
	c.Flag("btf.path", "External vmlinux BTF file for kernels without /sys/kernel/btf/vmlinux.").StringVar(&f.btfPath)
	c.Flag("attach.to", "Kernel function for a config's attach_to programs: <config>=<function> or <config>.<program>=<function> (repeatable), e.g. funclatency=vfs_read.").StringsVar(&f.attachTo)
	c.Flag("attach.disable", "Comma-separated attach kinds to treat as unsupported, so alternatives fall through: "+strings.Join(loader.AttachKinds, ", ")+".").StringVar(&f.disable)
	c.Flag("decoder.cache-size", "Decoded keys cached per metric, at most the map's max_entries (only keys present in the map at the last scrape are kept); also bounds each decoder cache, up to 100000 entries.").Default("1048576").IntVar(&f.cacheSize)
	c.Flag("config.max-series", "Series limit of every metric whose config sets no max_series; map entries beyond it are summed into one overflow series per metric (labels \""+collector.OverflowValue+"\").").Default(strconv.Itoa(config.DefaultMaxSeries)).IntVar(&f.maxSeries)
	c.Flag("bpf.memory-budget", "Kernel memory all configs' maps together may hold, estimated from their specs before they are created (as 256MiB, 1GiB); a config that would go over it is refused. 0 means no budget.").Default(budget.DefaultMemoryBudgetText).StringVar(&f.memBudget)
	c.Flag("bpf.stats", "Turn on kernel.bpf_stats_enabled while running (restored on exit), for per-program run time and count.").BoolVar(&f.bpfStats)
	c.Flag("capabilities.keep", "Capabilities to keep once every program is attached, besides CAP_BPF (which reading maps needs on kernels before 6.5): comma-separated names (cap_syslog, CAP_SYS_ADMIN, perfmon), \"none\", or \"all\" to drop nothing. Every other capability is dropped from all sets and no_new_privs is set.").Default("none").StringVar(&f.capsKeep)
	c.Flag("kube.node-name", "Node whose pods the kube_namespace, kube_pod and kube_container decoders watch through the Kubernetes API (from the downward API's spec.nodeName).").Envar("NODE_NAME").StringVar(&f.kubeNode)
	c.Flag("kube.kubeconfig", "Kubeconfig file of the Kubernetes API for the kube_* decoders. Default: the in-cluster service account when KUBERNETES_SERVICE_HOST is set, else no API access (pods are labelled by UID, containers by id).").StringVar(&f.kubeConfig)
	c.Flag("kube.cache-size", fmt.Sprintf("Pods the kube_* decoders keep names of: this many live and this many deleted ones, 1 to %d.", kube.MaxCacheSize)).Default(strconv.Itoa(kube.DefaultCacheSize)).IntVar(&f.kubeCache)
	f.ref = addRefLoadFlags(c)
	return f
}

// check validates the load flags for the configs sources and keeps what
// they parse to.
func (f *loadFlags) check(sources []exporter.Source) error {
	if err := f.ref.check(); err != nil {
		return err
	}
	var err error
	f.sources = sources
	if f.attach, err = exporter.ParseAttachTo(f.attachTo, sources); err != nil {
		return err
	}
	f.disabled = splitList(f.disable)
	for _, k := range f.disabled {
		if !slices.Contains(loader.AttachKinds, k) {
			return fmt.Errorf("--attach.disable: unknown attach kind %q (known: %s)", k, strings.Join(loader.AttachKinds, ", "))
		}
	}
	if f.keep, f.keepAll, err = loader.ParseKeep(f.capsKeep); err != nil {
		return fmt.Errorf("--capabilities.keep: %w", err)
	}
	if f.loadTimeout <= 0 {
		return fmt.Errorf("--config.load-timeout %v: must be positive", f.loadTimeout)
	}
	if f.maxSeries < 1 || f.maxSeries > config.MaxMaxSeries {
		return fmt.Errorf("--config.max-series %d: must be 1 to %d", f.maxSeries, config.MaxMaxSeries)
	}
	if f.kubeCache < 1 || f.kubeCache > kube.MaxCacheSize {
		return fmt.Errorf("--kube.cache-size %d: must be 1 to %d", f.kubeCache, kube.MaxCacheSize)
	}
	if f.memBytes, err = budget.ParseMemoryBudget(f.memBudget); err != nil {
		return err
	}
	return nil
}

// start prepares the process for loading: client-go's and the
// OpenTelemetry SDK's logs go to log, and --bpf.stats turns statistics
// on. The returned function undoes what start did.
func (f *loadFlags) start(log *slog.Logger) (stop func()) {
	// client-go logs through klog: send it to this process' log.
	klog.SetSlogLogger(log)
	// The OpenTelemetry SDK reports what it cannot return to a caller (an
	// attribute over a limit, an exporter's internal error) through its
	// global handler, which prints with the standard log: send it here too.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("OpenTelemetry SDK", "err", err)
	}))
	if !f.bpfStats {
		return func() {}
	}
	closer, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		log.Error("enable BPF stats", "err", err)
		return func() {}
	}
	return func() { closer.Close() }
}

// exporter returns the exporter of the checked sources under these flags,
// with tracepoints (nil: the exporter's own) to re-attach after the
// capability drop.
func (f *loadFlags) exporter(tracepoints loader.TracepointOpener, log *slog.Logger) *exporter.Exporter {
	return exporter.New(exporter.Options{Sources: f.sources, CacheSize: f.cacheSize, MaxSeries: f.maxSeries, BTFPath: f.btfPath,
		AttachTo: f.attach, DisableAttach: f.disabled, LoadTimeout: f.loadTimeout, MemoryBudget: f.memBytes,
		Tracepoints: tracepoints, Logger: log, Compat: f.ref.Compat, DefaultNamespace: f.ref.namespace(),
		Kube: &kube.Options{NodeName: f.kubeNode, Kubeconfig: f.kubeConfig, CacheSize: f.kubeCache, Logger: log}})
}

// dropCaps returns the function that drops capabilities once every program
// is attached, nil under --capabilities.keep=all.
func (f *loadFlags) dropCaps(log *slog.Logger) func() {
	if f.keepAll {
		return nil
	}
	return func() { loader.DropAfterAttach(f.keep, log) }
}

// sourceFlags choose the configs of the commands that run several (serve
// and dump): bundled programs and user programs from --config.dir.
type sourceFlags struct {
	programs string
	names    string
}

// addSourceFlags declares --programs and --config.names on c.
func addSourceFlags(c *kingpin.CmdClause) *sourceFlags {
	f := &sourceFlags{}
	c.Flag("programs", "Comma-separated bundled programs to run, \"all\" or \"none\". Default: "+strings.Join(programs.Default, ",")+" (none when --config.names is set).").StringVar(&f.programs)
	c.Flag("config.names", "Comma-separated user programs to load from --config.dir.").StringVar(&f.names)
	return f
}

// sources turns the flags into the list of configs to start; dir is
// --config.dir.
func (f *sourceFlags) sources(dir string) ([]exporter.Source, error) {
	return sources(f.programs, dir, f.names)
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

// unknownFlag matches kingpin's error for a flag the command does not
// have.
var unknownFlag = regexp.MustCompile(`^unknown long flag '--([^']+)'$`)

// nameFlag returns kingpin's parse error err of args with the flag it is
// about named: a value a flag's type refuses (kingpin says only
// `time: invalid duration "abc"`) gets the flag and the value in front,
// and a flag of another command says which commands take it.
func nameFlag(app *kingpin.Application, args []string, err error) error {
	ctx, perr := app.ParseContext(args)
	if perr != nil {
		if m := unknownFlag.FindStringSubmatch(perr.Error()); m != nil {
			return otherCommandFlag(app, ctx, m[1], perr)
		}
		return perr
	}
	// Parse stops at the first value its type refuses: setting each
	// value again in order finds it.
	for _, el := range ctx.Elements {
		if el.Value == nil {
			continue
		}
		switch c := el.Clause.(type) {
		case *kingpin.FlagClause:
			if serr := c.Model().Value.Set(*el.Value); serr != nil {
				return fmt.Errorf("--%s %s: %w", c.Model().Name, quote(*el.Value), serr)
			}
		case *kingpin.ArgClause:
			if serr := c.Model().Value.Set(*el.Value); serr != nil {
				return fmt.Errorf("argument %s %s: %w", c.Model().Name, quote(*el.Value), serr)
			}
		}
	}
	return err
}

// otherCommandFlag is the error for --name given to a command that does
// not take it: the commands that do, if any.
func otherCommandFlag(app *kingpin.Application, ctx *kingpin.ParseContext, name string, err error) error {
	var with []string
	for _, c := range app.Model().FlattenedCommands() {
		if c.Hidden {
			continue
		}
		for _, f := range c.Flags {
			if f.Name == name {
				with = append(with, c.FullCommand)
			}
		}
	}
	if len(with) == 0 {
		return err
	}
	selected := "kernel_exporter"
	if ctx != nil && ctx.SelectedCommand != nil {
		selected = ctx.SelectedCommand.FullCommand()
	}
	return fmt.Errorf("--%s applies to %s, not %s", name, strings.Join(with, " and "), selected)
}

// quote quotes a value from the command line for an error message, cut
// to 100 bytes.
func quote(s string) string {
	return truncate(strconv.Quote(s), 100)
}

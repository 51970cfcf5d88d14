// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/cilium/ebpf"
	"github.com/prometheus/common/promslog"
	promslogflag "github.com/prometheus/common/promslog/flag"
	"go.opentelemetry.io/otel"
	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/allowlist"
	"github.com/kernel-exporter/kernel_exporter/budget"
	"github.com/kernel-exporter/kernel_exporter/collector"
	"github.com/kernel-exporter/kernel_exporter/config"
	"github.com/kernel-exporter/kernel_exporter/exporter"
	"github.com/kernel-exporter/kernel_exporter/internal/printable"
	"github.com/kernel-exporter/kernel_exporter/internal/suggest"
	"github.com/kernel-exporter/kernel_exporter/kube"
	"github.com/kernel-exporter/kernel_exporter/loader"
	"github.com/kernel-exporter/kernel_exporter/privsep"
	"github.com/kernel-exporter/kernel_exporter/programs"
	"github.com/kernel-exporter/kernel_exporter/spans"
)

// Bounds of the load flags that no package bounds.
const (
	// maxCacheSize bounds --decoder.cache-size: decoded keys cached per
	// metric (each holds its label values).
	maxCacheSize = 1 << 24
	// maxLoadTimeout bounds --config.load-timeout.
	maxLoadTimeout = time.Hour
	// maxNodeName is the longest Kubernetes node name (a DNS subdomain).
	maxNodeName = 253
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
	kubeNodeSet bool // given as a flag, not by $NODE_NAME
	kubeConfig  string
	kubeCache   int
	allowFile   string
	ref         *refLoadFlags

	// Set by check.
	sources  []exporter.Source
	attach   map[string][]string
	disabled []string
	keep     loader.CapSet
	keepAll  bool
	memBytes uint64
	allowed  *allowlist.List
}

// addLoadFlags declares the load flags on c.
func addLoadFlags(c *kingpin.CmdClause) *loadFlags {
	f := &loadFlags{}
	c.Flag("config.dir", "Directory holding <name>.yaml and <name>.bpf.o user programs.").StringVar(&f.configDir)
	c.Flag("config.allowed-digests-file", fmt.Sprintf("File of the SHA-256 digests of the user programs' <name>.bpf.o objects that may load (sha256sum's output, or one digest a line; at most %d): an object not listed is refused, at start and at reload. Bundled programs are part of the binary and not checked. Default: every object may load.", allowlist.MaxDigests)).StringVar(&f.allowFile)
	c.Flag("config.load-timeout", "Time each config may take to load and attach; one still loading then is marked down.").Default(exporter.DefaultLoadTimeout.String()).DurationVar(&f.loadTimeout)
	c.Flag("btf.path", "External vmlinux BTF file for kernels without /sys/kernel/btf/vmlinux.").StringVar(&f.btfPath)
	c.Flag("attach.to", "Kernel function for a config's attach_to programs: <config>=<function> or <config>.<program>=<function> (repeatable), e.g. funclatency=vfs_read.").StringsVar(&f.attachTo)
	c.Flag("attach.disable", "Comma-separated attach kinds to treat as unsupported, so alternatives fall through: "+strings.Join(loader.AttachKinds, ", ")+".").StringVar(&f.disable)
	c.Flag("decoder.cache-size", "Decoded keys cached per metric, at most the map's max_entries (only keys present in the map at the last scrape are kept); also bounds each decoder cache, up to 100000 entries.").Default("1048576").IntVar(&f.cacheSize)
	c.Flag("config.max-series", "Series limit of every metric whose config sets no max_series; map entries beyond it are summed into one overflow series per metric (labels \""+collector.OverflowValue+"\").").Default(strconv.Itoa(config.DefaultMaxSeries)).IntVar(&f.maxSeries)
	c.Flag("bpf.memory-budget", "Kernel memory all configs' maps together may hold, estimated from their specs before they are created (as 256MiB, 1GiB); a config that would go over it is refused. 0 means no budget.").Default(budget.DefaultMemoryBudgetText).StringVar(&f.memBudget)
	c.Flag("bpf.stats", "Keep BPF run-time statistics on while running (BPF_ENABLE_STATS; kernel.bpf_stats_enabled is left alone): exact run time and runs of every program.").BoolVar(&f.bpfStats)
	c.Flag("capabilities.keep", "Capabilities to keep once every program is attached, besides CAP_BPF (which reading maps needs on kernels before 6.5): comma-separated names (cap_syslog, CAP_SYS_ADMIN, perfmon), \"none\", or \"all\" to drop nothing. Every other capability is dropped from all sets and no_new_privs is set.").Default("none").StringVar(&f.capsKeep)
	c.Flag("kube.node-name", "Node whose pods the kube_namespace, kube_pod and kube_container decoders watch through the Kubernetes API (from the downward API's spec.nodeName).").Envar("NODE_NAME").IsSetByUser(&f.kubeNodeSet).StringVar(&f.kubeNode)
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
	if f.loadTimeout <= 0 || f.loadTimeout > maxLoadTimeout {
		return fmt.Errorf("--config.load-timeout %v: must be more than 0 and at most %v", f.loadTimeout, maxLoadTimeout)
	}
	if f.cacheSize < 1 || f.cacheSize > maxCacheSize {
		return fmt.Errorf("--decoder.cache-size %d: must be 1 to %d", f.cacheSize, maxCacheSize)
	}
	if f.maxSeries < 1 || f.maxSeries > config.MaxMaxSeries {
		return fmt.Errorf("--config.max-series %d: must be 1 to %d", f.maxSeries, config.MaxMaxSeries)
	}
	if f.kubeCache < 1 || f.kubeCache > kube.MaxCacheSize {
		return fmt.Errorf("--kube.cache-size %d: must be 1 to %d", f.kubeCache, kube.MaxCacheSize)
	}
	// $NODE_NAME is a common name that other tools set (CI agents): only
	// the flag is checked.
	if n := f.kubeNode; f.kubeNodeSet && (len(n) > maxNodeName || !nodeName.MatchString(n)) {
		return fmt.Errorf("--kube.node-name %s: not a Kubernetes node name (lowercase letters, digits, '-' and '.', at most %d bytes)", quote(n), maxNodeName)
	}
	for _, file := range []struct{ flag, path string }{{"--btf.path", f.btfPath}, {"--kube.kubeconfig", f.kubeConfig}} {
		if err := checkFile(file.flag, file.path); err != nil {
			return err
		}
	}
	if f.memBytes, err = budget.ParseMemoryBudget(f.memBudget); err != nil {
		return err
	}
	if f.allowFile != "" {
		if f.allowed, err = allowlist.Load(f.allowFile); err != nil {
			return err
		}
	}
	return nil
}

// nodeName matches a DNS subdomain (RFC 1123), as Kubernetes names nodes.
var nodeName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// checkFile checks that path, given by flag, is a regular file, when it is
// not empty. The file is read later, bounded, by the package that uses it.
func checkFile(flag, path string) error {
	if path == "" {
		return nil
	}
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("%s %s: %w", flag, quote(path), errors.Unwrap(err))
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s %s: not a regular file", flag, quote(path))
	}
	return nil
}

// start prepares the process for loading: the OpenTelemetry SDK's logs
// go to log, RLIMIT_MEMLOCK is raised where the kernel charges BPF memory
// to it and CAP_SYS_RESOURCE dropped (loader.PrepareMemlock), and
// --bpf.stats turns statistics on. The returned function undoes what start did.
func (f *loadFlags) start(log *slog.Logger) (stop func()) {
	// The OpenTelemetry SDK reports what it cannot return to a caller (an
	// attribute over a limit, an exporter's internal error) through its
	// global handler, which prints with the standard log: send it here too.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("OpenTelemetry SDK", "err", err)
	}))
	// RLIMIT_MEMLOCK before anything loads or the helper starts (it
	// inherits the limit); CAP_SYS_RESOURCE, used for nothing else, goes
	// at once unless kept.
	loader.PrepareMemlock(!f.keepAll && !f.keep.Has(loader.CapSysResource), log)
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

// exporter returns the exporter of the checked sources under these flags.
// helper (nil: none) re-attaches tracepoint programs and loads the changed
// configs of a reload after the capability drop.
func (f *loadFlags) exporter(helper *privsep.Client, log *slog.Logger) *exporter.Exporter {
	return exporter.New(exporter.Options{Sources: f.sources, CacheSize: f.cacheSize, MaxSeries: f.maxSeries, BTFPath: f.btfPath,
		AttachTo: f.attach, DisableAttach: f.disabled, LoadTimeout: f.loadTimeout, MemoryBudget: f.memBytes,
		Tracepoints: helper.Tracepoints(), Loader: helper.Loader(), Logger: log, Compat: f.ref.Compat, DefaultNamespace: f.ref.namespace(), Allowed: f.allowed,
		Kube: &kube.Options{NodeName: f.kubeNode, Kubeconfig: f.kubeConfig, CacheSize: f.kubeCache, Logger: log}})
}

// helperSettings are what the privileged helper may load for a reload:
// these flags' configs and load settings, fixed at start.
func (f *loadFlags) helperSettings() privsep.Settings {
	return privsep.Settings{Sources: f.sources, AttachTo: f.attach, DisableAttach: f.disabled, BTFPath: f.btfPath, Allowed: f.allowed}
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

	// Set by sources: the opt-in programs --programs=all left out, and
	// why.
	leftOut []string
	why     string
}

// addSourceFlags declares --programs and --config.names on c.
func addSourceFlags(c *kingpin.CmdClause) *sourceFlags {
	f := &sourceFlags{}
	c.Flag("programs", "Comma-separated bundled programs to run, \"all\" or \"none\". Default: "+strings.Join(programs.Default, ",")+" (none when --config.names is set). \"all\" is every program that serves metrics; a program whose output needs a destination (exec_trace's spans) is named, or is in \"all\" once its destination is set (OTEL_EXPORTER_OTLP_ENDPOINT).").StringVar(&f.programs)
	c.Flag("config.names", "Comma-separated user programs to load from --config.dir.").StringVar(&f.names)
	return f
}

// sources turns the flags into the list of configs to start; dir is
// --config.dir. The list is empty for --programs=none without
// --config.names: a command with nothing else to do refuses it
// (errNothingToRun).
func (f *sourceFlags) sources(dir string) ([]exporter.Source, error) {
	var out []exporter.Source
	var err error
	out, f.leftOut, f.why, err = sources(f.programs, dir, f.names)
	return out, err
}

// noteLeftOut logs the programs --programs=all left out.
func (f *sourceFlags) noteLeftOut(log *slog.Logger) {
	if len(f.leftOut) > 0 {
		log.Info("--programs=all leaves out the programs whose spans would go nowhere: name them in --programs to run them anyway", "programs", strings.Join(f.leftOut, ","), "spans", f.why)
	}
}

// sources turns the flags into the list of configs to start, empty only
// for --programs=none without --config.names. "all" in
// progList is every bundled program, less those with spans (optIn) while
// spans have no destination: leftOut names them and why says why.
func sources(progList, dir, names string) (out []exporter.Source, leftOut []string, why string, err error) {
	var bundled []string
	list := splitList(progList)
	switch {
	case progList == "":
		if names == "" {
			bundled = programs.Default
		}
	case slices.Contains(list, "none"):
		if len(list) > 1 {
			return nil, nil, "", fmt.Errorf("--programs %s: none runs no bundled program, and cannot be given with others", quote(progList))
		}
	case len(list) == 0:
		return nil, nil, "", fmt.Errorf("--programs %s: no program named (give \"none\" for none)", quote(progList))
	default:
		bundled = list
	}
	if i := slices.Index(bundled, "all"); i >= 0 {
		// Every program, with the opt-in ones that are named besides
		// or have a destination; names not bundled stay, to be refused.
		named := slices.Delete(slices.Clone(bundled), i, i+1)
		for j, n := range named {
			if slices.Contains(named[j+1:], n) {
				return nil, nil, "", fmt.Errorf("--programs: %s is given twice", quote(n))
			}
		}
		where, sent := spans.Destination()
		bundled = nil
		for _, n := range programs.Names() {
			if !sent && !slices.Contains(named, n) && optIn(n) {
				leftOut, why = append(leftOut, n), where
				continue
			}
			bundled = append(bundled, n)
		}
		for _, n := range named {
			if !slices.Contains(bundled, n) {
				bundled = append(bundled, n)
			}
		}
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
	known := programs.Names()
	for _, n := range bundled {
		if err := add("--programs", n, ""); err != nil {
			return nil, nil, "", err
		}
		if !slices.Contains(known, n) {
			hint := suggest.DidYouMean(n, known, nil)
			if hint == "" {
				hint = fmt.Sprintf(" (bundled: %s; a program of your own is given by --config.dir and --config.names)", strings.Join(known, ", "))
			}
			return nil, nil, "", fmt.Errorf("--programs: no bundled program %s%s", quote(n), hint)
		}
	}
	if names != "" {
		if dir == "" {
			return nil, nil, "", errors.New("--config.names needs --config.dir")
		}
		for _, n := range splitList(names) {
			if err := add("--config.names", n, dir); err != nil {
				return nil, nil, "", err
			}
		}
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return nil, nil, "", fmt.Errorf("--config.dir %s: not a directory", quote(dir))
		}
	}
	return out, leftOut, why, nil
}

// errNothingToRun is a command's error for no config to run
// (--programs=none without --config.names).
var errNothingToRun = errors.New("nothing to run: --programs=none runs no bundled program and no --config.names is given")

// optIn reports whether bundled program name has output that needs a
// destination besides /metrics: a tracing section, whose spans go over
// OTLP. --programs=all leaves such programs out while they would have
// nowhere to go.
func optIn(name string) bool {
	y, err := fs.ReadFile(programs.FS, name+".yaml")
	if err != nil {
		return false
	}
	cfg, err := config.Parse("programs/"+name+".yaml", y)
	return err == nil && len(cfg.Tracing.Spans) > 0
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

// commandFirst moves a command given after flags (kernel_exporter
// --config.dir=/x dump) in front of them, where kingpin looks for it: a
// command's flags are declared on the command, and kingpin would take
// them for the default command's. A flag's value in the next argument
// (--config.dir /x) is skipped, and nothing after "--" is looked at.
func commandFirst(app *kingpin.Application, args []string) []string {
	takesValue := map[string]bool{}
	m := app.Model()
	for _, f := range m.Flags {
		takesValue[f.Name] = !f.IsBoolFlag()
	}
	var cmds []string
	for _, c := range m.FlattenedCommands() {
		cmds = append(cmds, c.FullCommand)
		for _, f := range c.Flags {
			takesValue[f.Name] = !f.IsBoolFlag()
		}
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return args
		case strings.HasPrefix(a, "--"):
			if !strings.Contains(a, "=") && takesValue[a[2:]] {
				i++
			}
		case strings.HasPrefix(a, "-"):
		default:
			if i == 0 || !slices.Contains(cmds, a) {
				return args
			}
			return slices.Concat([]string{a}, args[:i], args[i+1:])
		}
	}
	return args
}

// unexpected matches kingpin's error for an argument no command or flag
// takes.
var unexpected = regexp.MustCompile(`^unexpected (.*)$`)

// unexpectedArg is the error for an argument arg nothing takes: the value
// of a switch (--config.check=yes), else a mistyped command.
func unexpectedArg(app *kingpin.Application, args []string, arg string) error {
	for _, a := range args {
		if name, v, ok := strings.Cut(strings.TrimPrefix(a, "--"), "="); ok && strings.HasPrefix(a, "--") && v == arg {
			return fmt.Errorf("%s: a switch takes no value (give --%s or --no-%s)", quote(a)[1:len(quote(a))-1], name, name)
		}
	}
	var cmds []string
	for _, c := range app.Model().FlattenedCommands() {
		if !c.Hidden {
			cmds = append(cmds, c.FullCommand)
		}
	}
	if hint := suggest.DidYouMean(arg, cmds, nil); hint != "" {
		return fmt.Errorf("unexpected argument %s%s", quote(arg), hint)
	}
	return fmt.Errorf("unexpected argument %s (commands: %s)", quote(arg), strings.Join(cmds, ", "))
}

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
		if m := unexpected.FindStringSubmatch(perr.Error()); m != nil {
			return unexpectedArg(app, args, m[1])
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
				if choices, ok := flagChoices[c.Model().Name]; ok {
					return fmt.Errorf("--%s %s: %w (one of: %s)", c.Model().Name, quote(*el.Value), serr, strings.Join(choices, ", "))
				}
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

// flagChoices are the values of the flags whose own error does not list
// them (promslog's "unrecognized log level").
var flagChoices = map[string][]string{
	promslogflag.LevelFlagName:  promslog.LevelFlagOptions,
	promslogflag.FormatFlagName: promslog.FormatFlagOptions,
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
	selected := "kernel_exporter"
	if ctx != nil && ctx.SelectedCommand != nil {
		selected = ctx.SelectedCommand.FullCommand()
	}
	if len(with) > 0 {
		return fmt.Errorf("--%s applies to %s, not %s", name, strings.Join(with, " and "), selected)
	}
	// A mistyped flag: the closest of those the command takes.
	var known []string
	for _, f := range app.Model().Flags {
		known = append(known, f.Name)
	}
	if ctx != nil && ctx.SelectedCommand != nil {
		for _, f := range ctx.SelectedCommand.Model().Flags {
			known = append(known, f.Name)
		}
	}
	if hint := suggest.DidYouMean(name, known, func(s string) string { return "--" + s }); hint != "" {
		return fmt.Errorf("%w%s", err, hint)
	}
	return err
}

// quote quotes a value from the command line for an error message, cut
// to 100 bytes.
func quote(s string) string {
	return printable.Quote(s, 100)
}

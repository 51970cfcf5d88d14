// SPDX-License-Identifier: Apache-2.0

// Package exporter wires configs, the loader and collectors together: for
// each requested config it parses the YAML, compiles it against the object's
// maps, loads and attaches the object, and registers a collector. One config
// failing never stops the others; its state records why.
package exporter

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kernel-exporter/kernel_exporter/allowlist"
	"github.com/kernel-exporter/kernel_exporter/bounded"
	"github.com/kernel-exporter/kernel_exporter/budget"
	"github.com/kernel-exporter/kernel_exporter/collector"
	"github.com/kernel-exporter/kernel_exporter/config"
	"github.com/kernel-exporter/kernel_exporter/decoder"
	"github.com/kernel-exporter/kernel_exporter/internal/textpages"
	"github.com/kernel-exporter/kernel_exporter/kube"
	"github.com/kernel-exporter/kernel_exporter/loader"
	"github.com/kernel-exporter/kernel_exporter/programs"
	"github.com/kernel-exporter/kernel_exporter/selfprobe"
	"github.com/kernel-exporter/kernel_exporter/spans"
)

// Source names one config: bundled (Dir empty) or <Dir>/<Name>.yaml.
type Source struct {
	Name string
	Dir  string
}

// Options configure an Exporter.
type Options struct {
	Sources []Source
	// CacheSize bounds each metric's decoded-key cache and each decoder's
	// cache (entries; decoder caches at most MaxDecoderCache).
	CacheSize int
	// MaxSeries is the series limit of metrics that set no max_series
	// (--config.max-series; 0: config.DefaultMaxSeries).
	MaxSeries int
	// BTFPath is an external vmlinux BTF file; empty uses the kernel's.
	BTFPath string
	// AttachTo holds command-line attach_to overrides by config name (see
	// ParseAttachTo); DisableAttach lists attach kinds to treat as
	// unsupported (loader.Options.DisableAttach).
	AttachTo      map[string][]string
	DisableAttach []string
	// LoadTimeout bounds each config's load (parse, verify, attach); 0
	// means DefaultLoadTimeout. A config still loading then is marked down
	// with a reason naming the timeout.
	LoadTimeout time.Duration
	// MemoryBudget bounds the estimated kernel memory of all configs' maps
	// together, in bytes (--bpf.memory-budget; 0: no budget).
	MemoryBudget uint64
	// Tracepoints opens tracepoint perf events for Reattach once the
	// process has dropped CAP_PERFMON (privsep.Client); nil: Reattach
	// opens them itself, as at load.
	Tracepoints loader.TracepointOpener
	// Loader loads the changed configs of a reload, for a process that
	// has dropped the capabilities loading needs (privsep.Client); nil:
	// reloads load in this process, as start-up does.
	Loader ObjectLoader
	// Kube configures the pod watch of the kube_* decoders, started when
	// a config first uses one of them (one watch for every config); nil:
	// pods are labelled by UID.
	Kube   *kube.Options
	Logger *slog.Logger
	// Compat is --compat.ebpf-exporter: decoders print what
	// cloudflare/ebpf_exporter prints where the two differ
	// (decoder.Env.Compat).
	Compat bool
	// DefaultNamespace is the namespace of configs that set none
	// (--config.default-namespace; "ebpf_exporter" with
	// --compat.ebpf-exporter); empty: config.DefaultNamespace.
	DefaultNamespace string
	// Allowed lists the digests of the user programs' objects that may
	// load (--config.allowed-digests-file), at start and at every reload;
	// nil allows every object. Bundled programs are not checked.
	Allowed *allowlist.List
}

// ObjectLoader loads and attaches a config's object in another process
// and hands over what it loaded (loader.Adopt). name is the config's,
// digest what LoadObject must find (SourceDigest of the bytes spec and cfg
// were parsed from), and spec and cfg this process's own parse, which the
// object is adopted into. privsep.Client implements it.
type ObjectLoader interface {
	LoadObject(name, digest string, spec *ebpf.CollectionSpec, cfg *config.Config) (*loader.Object, error)
}

// DefaultLoadTimeout is the default of Options.LoadTimeout
// (--config.load-timeout). A config loads in well under a second on a
// machine (the verifier and BTF take most of it), in tens of seconds under
// software emulation; two minutes leaves room for that and for a loaded
// machine while still ending a load that hangs.
const DefaultLoadTimeout = 2 * time.Minute

// MaxDecoderCache bounds the decoders' own caches (cgroup paths, device and
// interface names) whatever Options.CacheSize is: unlike the per-metric key
// caches, which only hold keys present in a map, they remember names of
// things that may be gone (a removed cgroup keeps its path), so with churn
// they fill up to their bound.
const MaxDecoderCache = 100000

// Exporter owns the loaded objects and the registry that serves them.
type Exporter struct {
	Registry *prometheus.Registry
	Status   *collector.Status
	// Exceeded counts configs that went over a CPU or memory budget.
	Exceeded *budget.Exceeded
	// Memory is the memory budget's ledger: each config holds its maps'
	// estimate from before they are created until its object is closed.
	Memory *budget.Ledger
	// Spans exports the spans of configs with a tracing section; Close
	// flushes it.
	Spans *spans.Sink

	opts   Options
	log    *slog.Logger
	states []*collector.State
	loaded chan struct{} // closed when every load has ended or timed out
	once   sync.Once

	mu     sync.Mutex
	claims map[string]string // metric name -> config serving it
	closed bool
	// live holds each config that is up or detached: its object (closed
	// by Close), collector and claimed names. env is Start's.
	live map[string]liveConfig
	env  *decoder.Env
	// digests holds each config's digest when its running version (or
	// its failed start) was loaded; reload serializes Reload.
	digests map[string]string
	reload  *reloadState
	// registered holds the names configs' descriptors took in Registry.
	registered map[string]bool
	// named[i] is closed once the metric names of source i are known (or
	// will not be): a config claims a name only after every config
	// listed before it has said which names it wants (see order).
	named     []chan struct{}
	namedOnce []sync.Once
	// names holds each config's metric names: its running version's, or
	// those it asked for at start-up. conflicts holds, for a config down
	// because an earlier one defines the same metric, that config.
	names     map[string][]string
	conflicts map[string]string
}

// New prepares an exporter for every source, each in the loading state,
// with a registry that serves the status already. Nothing is loaded until
// Start.
func New(opts Options) *Exporter {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	if opts.LoadTimeout <= 0 {
		opts.LoadTimeout = DefaultLoadTimeout
	}
	e := &Exporter{
		Registry:   prometheus.NewRegistry(),
		Status:     &collector.Status{},
		Exceeded:   budget.NewExceeded(),
		opts:       opts,
		log:        log,
		loaded:     make(chan struct{}),
		claims:     map[string]string{},
		live:       map[string]liveConfig{},
		digests:    map[string]string{},
		registered: map[string]bool{},
		reload:     newReloadState(),
		names:      map[string][]string{},
		conflicts:  map[string]string{},
	}
	e.Memory = budget.NewLedger(opts.MemoryBudget, e.Exceeded)
	e.Spans = spans.NewSink(log)
	e.Registry.MustRegister(e.Status, e.Exceeded, e.reload, e.Spans)
	for _, src := range opts.Sources {
		st := &collector.State{Name: src.Name, Source: "bundled", Loading: true}
		if src.Dir != "" {
			st.Source = filepath.Join(src.Dir, src.Name+".yaml")
		}
		e.states = append(e.states, st)
		e.Status.Add(st)
		e.named = append(e.named, make(chan struct{}))
	}
	e.namedOnce = make([]sync.Once, len(opts.Sources))
	return e
}

// Start loads every source, each in its own goroutine, and returns at once.
// A load that has not ended within Options.LoadTimeout is marked down (its
// objects are closed if it ends later). Loaded is closed when every load
// has ended or timed out, or when ctx is done. Start must be called once.
func (e *Exporter) Start(ctx context.Context) {
	env := decoder.NewEnv(min(e.opts.CacheSize, MaxDecoderCache))
	env.Kube = e.opts.Kube
	env.Compat = e.opts.Compat
	e.mu.Lock()
	e.env = env
	e.mu.Unlock()
	var ended, finished sync.WaitGroup
	for i, src := range e.opts.Sources {
		st := e.states[i]
		done := make(chan struct{})
		ended.Add(1)
		finished.Go(func() {
			defer close(done)
			e.run(ctx, i, st, src, env)
		})
		go func() {
			defer ended.Done()
			t := time.NewTimer(e.opts.LoadTimeout)
			defer t.Stop()
			select {
			case <-done:
			case <-ctx.Done():
			case <-t.C:
				e.timeout(st)
				e.nameKnown(i) // later configs no longer wait for it
			}
		}()
	}
	warmed := make(chan struct{})
	go func() {
		ended.Wait()
		// Read kallsyms now, if a decoder wants it, while the process still
		// has CAP_SYSLOG: Loaded is followed by the capability drop, after
		// which the kernel shows every address as 0.
		env.Warm()
		close(warmed)
		e.reload.done(true) // start-up's load counts as the first one
		e.once.Do(func() { close(e.loaded) })
	}()
	go func() {
		finished.Wait()
		<-warmed
		// Start-up used memory that serving does not need (the decoded
		// kernel BTF, the text of kallsyms, the code and read-only data
		// only start-up ran): drop it and give it back to the system now
		// rather than over the next minutes.
		loader.ReleaseKernelTypes()
		ReleaseMemory(e.log)
	}()
	go func() {
		<-ctx.Done()
		e.once.Do(func() { close(e.loaded) })
	}()
}

// ReleaseMemory gives the heap memory the process no longer uses back to
// the system and drops the executable's code and read-only pages from it
// (those serving runs fault back in): at the end of one-off work, start-up
// or the host BPF collector's first listing, so that its garbage and code
// do not stay resident until the runtime's scavenger gets to them, or ever.
// It takes a garbage collection (a few ms at the default set's heap).
func ReleaseMemory(log *slog.Logger) {
	debug.FreeOSMemory()
	if _, err := textpages.Release(); err != nil {
		log.Debug("cannot release the executable's pages", "err", err)
	}
}

// Loaded is closed when every config's load has ended (up or down) or timed
// out, or start-up was cancelled: the point after which nothing more
// attaches.
func (e *Exporter) Loaded() <-chan struct{} { return e.loaded }

// Failed returns the states of the configs that are down (not those still
// loading).
func (e *Exporter) Failed() []collector.State {
	var out []collector.State
	for _, st := range e.Status.States() {
		if !st.Up && !st.Loading {
			out = append(out, st)
		}
	}
	return out
}

// timeout marks a config still loading as down.
func (e *Exporter) timeout(st *collector.State) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var name string
	e.Status.Update(st, func(st *collector.State) {
		if !st.Loading {
			return
		}
		st.Loading = false
		st.Reason = fmt.Sprintf("load did not finish within %v (--config.load-timeout)", e.opts.LoadTimeout)
		name = st.Name
	})
	if name != "" {
		e.log.Error("config down", "config", name, "reason", "load timed out", "timeout", e.opts.LoadTimeout)
	}
}

// run loads source i and publishes the result, unless the load timed
// out or the exporter closed meanwhile, in which case what it loaded is
// closed. Its metric names are claimed in source order (see order).
func (e *Exporter) run(ctx context.Context, i int, st *collector.State, src Source, env *decoder.Env) {
	res := collector.State{Name: st.Name, Source: st.Source}
	dg := digest(src) // before reading: a change during the load shows at the next Reload
	p, err := e.prepare(src, env, false)
	if err == nil {
		err = e.order(ctx, i, p.names)
	}
	e.nameKnown(i)
	var (
		obj   *loader.Object
		c     *collector.Config
		sr    *spans.Reader
		names []string
	)
	if p != nil {
		res.Warnings = p.warnings
	}
	if err == nil {
		names = p.names
		obj, c, sr, err = e.loadPrepared(&res, src, p, false)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.digests[st.Name] = dg
	var late bool
	e.Status.Update(st, func(cur *collector.State) { late = !cur.Loading })
	if err == nil && !late && !e.closed {
		err = e.claim(res.Name, names, c)
	}
	if err != nil || late || e.closed {
		closeSpans(sr)
		if obj != nil {
			obj.Close()
			for i := range res.Programs {
				res.Programs[i].Attached = false
			}
		}
		e.Memory.Release(res.Name)
		if late || e.closed {
			if late {
				e.log.Warn("config load ended after its timeout: closed", "config", res.Name)
			}
			return
		}
		res.Reason = err.Error()
		if _, ok := errors.AsType[*budget.MemoryError](err); ok {
			res.OverBudget = budget.ResourceMemory // marked on the landing page
		}
		e.Status.Update(st, func(cur *collector.State) { *cur = res })
		e.log.Error("config down", "config", res.Name, "from", res.Source, "reason", res.Reason)
		return
	}
	// ttl metrics expire without scrapes
	e.live[res.Name] = liveConfig{obj: obj, c: c, names: names, stop: withSpans(c.StartExpiry(), sr), audit: p.cfg.Audit, ns: p.cfg.MetricName}
	res.Up = true
	res.Collector = c
	e.Status.Update(st, func(cur *collector.State) { *cur = res })
	e.log.Info("config up", "config", res.Name, "from", res.Source, "programs", len(res.Programs))
	for _, a := range res.Alternatives {
		e.log.Info("alternative chosen", "config", res.Name, "alternative", a.Name, "chosen", a.Chosen, "passed_over", strings.Join(a.Passed, "; "))
	}
}

// nameKnown closes named[i] (once).
func (e *Exporter) nameKnown(i int) {
	e.namedOnce[i].Do(func() { close(e.named[i]) })
}

// order makes the config of source i wait until every config listed
// before it has settled its metric names (its YAML parsed and compiled:
// quick, before anything is loaded), then refuses it when one of those
// defines a metric of names, and else records names as its own: the first
// listed config serves a metric, whatever order the loads end in. The
// error names the metric and the config that serves it. A config that is
// down for that is retried at a reload of the other config (conflicts).
func (e *Exporter) order(ctx context.Context, i int, names []string) error {
	for j := range i {
		select {
		case <-e.named[j]:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.conflict(i, names); err != nil {
		return err
	}
	e.names[e.opts.Sources[i].Name] = names
	return nil
}

// conflict returns an error when a config listed before source i defines
// one of names (its running version's names, or those it settled at
// start-up, even if its load then failed: which config serves a metric
// never depends on the kernel's answer of the moment), recording the
// conflict; nil clears the record. The caller holds e.mu.
func (e *Exporter) conflict(i int, names []string) error {
	name := e.opts.Sources[i].Name
	delete(e.conflicts, name)
	for _, src := range e.opts.Sources[:i] {
		for _, n := range e.names[src.Name] {
			if slices.Contains(names, n) {
				e.conflicts[name] = src.Name
				return fmt.Errorf("metric %s of config %s is also defined by config %s, which is listed first (--programs, then --config.names) and so serves it", n, name, src.Name)
			}
		}
	}
	return nil
}

// claim registers a loaded config's metrics: it fails, naming both configs
// and the metric, when another config already serves one of the names, and
// with the registry's error when a name clashes with the exporter's own
// metrics. The caller holds e.mu.
func (e *Exporter) claim(config string, names []string, c *collector.Config) error {
	for _, n := range names {
		if other, ok := e.claims[n]; ok {
			return fmt.Errorf("metric %s of config %s is already served by config %s", n, config, other)
		}
	}
	if err := e.Registry.Register(c.Descs()); err != nil {
		return fmt.Errorf("metrics of config %s: %w", config, err)
	}
	for _, n := range names {
		e.claims[n] = config
	}
	for _, d := range describe(c.Descs()) {
		e.registered[fqName(d)] = true
	}
	return nil
}

// prepared is one config read, parsed and compiled: everything before
// the kernel.
type prepared struct {
	cfg      *config.Config
	data     []byte // the object's bytes
	digest   string // SourceDigest of what was read
	spec     *ebpf.CollectionSpec
	plan     *collector.Plan
	spanPlan *spans.Plan
	names    []string // the metric families it serves
	lopts    loader.Options
	// warnings: the object's (loader.LicenseWarning), already logged.
	warnings []string
}

// prepare reads, parses and compiles one config. remote skips the
// requirements check, which the process that loads it makes (package
// privsep: feature probes need the loading capabilities).
func (e *Exporter) prepare(src Source, env *decoder.Env, remote bool) (*prepared, error) {
	opts := e.opts
	cfg, data, dg, err := read(src, opts.Allowed)
	if err != nil {
		return nil, err
	}
	if cfg.Namespace == "" {
		cfg.Namespace = opts.DefaultNamespace
	}
	p := &prepared{cfg: cfg, data: data, digest: dg, lopts: loader.Options{BTFPath: opts.BTFPath, DisableAttach: opts.DisableAttach}}
	for _, o := range opts.AttachTo[src.Name] {
		if err := cfg.OverrideAttachTo(o); err != nil {
			return nil, err
		}
	}
	if !remote {
		if err := loader.CheckRequires(cfg, p.lopts); err != nil {
			return nil, err
		}
	}
	for _, k := range cfg.Ignored() {
		e.log.Warn("config key ignored", "config", cfg.Name, "file", cfg.File, "key", k)
	}
	if p.spec, err = loader.ParseObject(cfg.Object, data); err != nil {
		return nil, err
	}
	if w := loader.LicenseWarning(cfg.Object, p.spec); w != "" {
		e.log.Warn("config object without a GPL-compatible licence", "config", cfg.Name, "warning", w)
		p.warnings = append(p.warnings, w)
	}
	if p.plan, err = collector.Compile(cfg, p.spec, env); err != nil {
		return nil, err
	}
	for _, w := range p.plan.Warnings {
		e.log.Warn("labels do not match the map key's BTF type; accepted with --compat.ebpf-exporter", "config", cfg.Name, "err", w)
	}
	if p.spanPlan, err = spans.Compile(cfg, p.spec, env); err != nil {
		return nil, err
	}
	for _, m := range p.plan.Metrics {
		p.names = append(p.names, m.Name)
		if m.Histogram {
			p.names = append(p.names, m.Name+"_bucket", m.Name+"_sum", m.Name+"_count")
		}
	}
	return p, nil
}

// loadPrepared loads and attaches a prepared config and binds a collector: in
// this process, or with remote through Options.Loader. It fills st's
// programs and alternatives as far as it gets, and returns the object,
// the collector and, for a config with a tracing section, the reader of
// its ring buffers (already reading; the caller closes it).
func (e *Exporter) loadPrepared(st *collector.State, src Source, p *prepared, remote bool) (*loader.Object, *collector.Config, *spans.Reader, error) {
	opts := e.opts
	if err := testDelay(src.Name); err != nil {
		return nil, nil, nil, err
	}
	// The memory budget: refused here, the kernel allocates nothing. run
	// releases the reservation when the load fails or its object closes.
	need, err := budget.EstimateSpec(p.spec)
	if err == nil {
		err = e.Memory.Reserve(st.Name, need)
	}
	if err != nil {
		return nil, nil, nil, err
	}
	var obj *loader.Object
	if remote {
		obj, err = opts.Loader.LoadObject(src.Name, p.digest, p.spec, p.cfg)
	} else {
		obj, err = loader.Load(p.spec, p.cfg, p.lopts)
		if err != nil {
			err = fmt.Errorf("%s: %w", p.cfg.Object, err)
		}
	}
	if obj != nil {
		for _, pr := range obj.Programs {
			st.Programs = append(st.Programs, collector.ProgramState{Name: pr.Name, Section: pr.Section, Attached: pr.Attached(), Prog: pr.Prog, Alternative: pr.Alternative})
		}
		st.Alternatives = alternativeStates(obj.Alternatives)
	}
	if err != nil {
		// Load left nothing loaded: obj only reports the programs.
		return nil, nil, nil, err
	}
	// Programs on uprobe//proc/self/exe:post_attach_mark run now, in this
	// thread, and so fill their maps before the config's first read.
	selfprobe.Mark()
	c, err := collector.New(p.plan, obj.Collection, collector.Limits{CacheSize: opts.CacheSize, MaxSeries: opts.MaxSeries})
	if err != nil {
		return obj, nil, nil, err
	}
	// perf_event_array readers end with the object, whichever path closes it.
	obj.OnClose(c.Close)
	if err := e.startCgroupIDMap(p.cfg, obj); err != nil {
		return obj, nil, nil, err
	}
	var sr *spans.Reader
	if p.spanPlan != nil {
		st.Spans, st.SpansSent = spans.Destination()
		if sr, err = e.Spans.Start(p.spanPlan, obj.Collection); err != nil {
			return obj, nil, nil, err
		}
	}
	return obj, c, sr, nil
}

// LoadSettings are what LoadObject needs besides its source: the
// exporter's Options.BTFPath and DisableAttach, and the source's
// Options.AttachTo overrides.
type LoadSettings struct {
	BTFPath       string
	DisableAttach []string
	AttachTo      []string
	Allowed       *allowlist.List
}

// LoadObject is the part of a config's load that needs the loading
// capabilities, for the privileged helper (package privsep) to run for a
// reload: it reads src as the exporter does (bounded; bundled programs
// from the binary; a user program's object refused when s.Allowed does
// not list its digest), checks that what it read is want (a SourceDigest;
// "" checks nothing), applies the attach_to overrides, parses the object
// and loads and attaches it (loader.Load). Errors: the read's and
// parse's (naming the file), the load's (led by the object's path), or a
// digest that differs (the files changed since the exporter read them).
func LoadObject(src Source, s LoadSettings, want string) (*loader.Object, error) {
	cfg, data, dg, err := read(src, s.Allowed)
	if err != nil {
		return nil, err
	}
	if want != "" && dg != want {
		return nil, fmt.Errorf("%s: its files changed while it was being reloaded: reload again", cfg.File)
	}
	for _, o := range s.AttachTo {
		if err := cfg.OverrideAttachTo(o); err != nil {
			return nil, err
		}
	}
	spec, err := loader.ParseObject(cfg.Object, data)
	if err != nil {
		return nil, err
	}
	obj, err := loader.Load(spec, cfg, loader.Options{BTFPath: s.BTFPath, DisableAttach: s.DisableAttach})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.Object, err)
	}
	return obj, nil
}

// read returns the parsed config, the object bytes of a source, and the
// SourceDigest of the bytes read. A user program's object whose SHA-256
// allowed does not list is refused (allowlist.List.Check; nil allows all),
// with the config.
func read(src Source, allowed *allowlist.List) (*config.Config, []byte, string, error) {
	if src.Dir == "" {
		file := src.Name + ".yaml"
		y, err := fs.ReadFile(programs.FS, file)
		if err != nil {
			return nil, nil, "", fmt.Errorf("no bundled program %q (bundled: %v)", src.Name, programs.Names())
		}
		cfg, err := config.Parse("programs/"+file, y)
		if err != nil {
			return nil, nil, "", err
		}
		cfg.Name = src.Name
		cfg.Object = "programs/" + src.Name + ".bpf.o"
		obj, err := fs.ReadFile(programs.FS, src.Name+".bpf.o")
		if err != nil {
			return cfg, nil, "", fmt.Errorf("bundled program %q has no object", src.Name)
		}
		return cfg, obj, bundledDigest, nil
	}
	cfg, y, err := config.LoadData(src.Dir, src.Name)
	if err != nil {
		return nil, nil, "", err
	}
	obj, err := bounded.ReadFile(cfg.Object, "BPF object", bounded.MaxObject)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return cfg, nil, "", fmt.Errorf("%s: BPF object %s not found", cfg.File, filepath.Clean(cfg.Object))
		}
		return cfg, nil, "", fmt.Errorf("%s: %w", cfg.File, err)
	}
	if err := allowed.Check(filepath.Clean(cfg.Object), obj); err != nil {
		return cfg, nil, "", err
	}
	return cfg, obj, SourceDigest(y, obj), nil
}

// KubeResolver returns the pod resolver the kube_* decoders share (see
// decoder.Env.KubeResolver); an error before Start.
func (e *Exporter) KubeResolver() (*kube.Resolver, error) {
	e.mu.Lock()
	env := e.env
	e.mu.Unlock()
	if env == nil {
		return nil, errors.New("exporter not started")
	}
	return env.KubeResolver()
}

// Close detaches and unloads every program and map loaded so far; a load
// still running closes its own when it ends.
func (e *Exporter) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	for _, lc := range e.live {
		lc.stop()
	}
	for name, lc := range e.live {
		lc.obj.Close()
		delete(e.live, name)
	}
	// The readers are closed: send what they emitted.
	ctx, cancel := context.WithTimeout(context.Background(), spanFlushTimeout)
	if err := e.Spans.Shutdown(ctx); err != nil {
		e.log.Warn("spans not all exported at shutdown", "err", err)
	}
	cancel()
	e.Memory.ReleaseAll()
	if e.env != nil {
		e.env.Close()
	}
}

// spanFlushTimeout bounds how long Close waits for queued spans to be
// exported.
const spanFlushTimeout = 5 * time.Second

// withSpans is stop that also closes the config's span reader, if any.
func withSpans(stop func(), sr *spans.Reader) func() {
	if sr == nil {
		return stop
	}
	return func() {
		stop()
		sr.Close()
	}
}

// closeSpans closes the span reader of a load that is not kept.
func closeSpans(sr *spans.Reader) {
	if sr != nil {
		sr.Close()
	}
}

// liveConfig is a config that is up or detached.
type liveConfig struct {
	obj      *loader.Object
	c        *collector.Config
	names    []string
	detached bool   // by Detach, until Reattach
	stop     func() // ends its background expiry reads
	// audit is the config's audit section, ns its MetricName.
	audit []config.Audit
	ns    func(string) string
}

// Detach takes a config that is up down for reason, having gone over the
// budget of resource (budget.ResourceCPU): its programs' links are closed
// (loader.Object.Detach), so they stop running, while its programs and
// maps stay loaded, with their memory reservation, and its collector stays
// registered: its series stay in /metrics with the values they had
// (counters stop moving; a ttl metric's series still expire). Its state
// is down (kernel_exporter_config_up 0) with reason
// (kernel_exporter_config_error_info) and OverBudget set to resource, its
// programs not attached. It counts kernel_exporter_budget_exceeded_total
// and logs a WARN. It returns an error when the config is not up.
func (e *Exporter) Detach(config, resource, reason string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	lc, ok := e.live[config]
	if !ok || lc.detached || e.closed {
		return fmt.Errorf("config %s is not up", config)
	}
	st, _ := e.state(config)
	// Detach, count and log first, then show it: whoever sees the config
	// down (config_up 0) sees its programs detached, the counter and the
	// log line too.
	lc.obj.Detach()
	lc.detached = true
	e.live[config] = lc
	e.Exceeded.Inc(config, resource)
	e.log.Warn("config detached: over budget", "config", config, "resource", resource, "reason", reason)
	e.Status.Update(st, func(cur *collector.State) {
		cur.Up, cur.Loading = false, false
		cur.Reason, cur.OverBudget = reason, resource
		for i := range cur.Programs {
			cur.Programs[i].Attached = false
		}
	})
	return nil
}

// Reattach links the programs of a config taken down by Detach again
// (loader.Object.Reattach, with Options.Tracepoints for tracepoint
// programs): nothing is reloaded, its maps carry on from the values they
// held, and the config is up again with its reason and OverBudget
// cleared. Errors: the re-link's, which names the capability missing and
// --capabilities.keep (the config then stays down, its reason saying the
// re-attach failed, and its programs detached), or an error when the
// config is not detached or the exporter is closed.
func (e *Exporter) Reattach(config string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	lc, ok := e.live[config]
	st, _ := e.state(config)
	if !ok || !lc.detached || st == nil || e.closed {
		return fmt.Errorf("config %s cannot be re-attached: not detached", config)
	}
	if err := lc.obj.Reattach(e.opts.Tracepoints); err != nil {
		e.Status.Update(st, func(cur *collector.State) {
			cur.Reason = "re-attach after the budget's backoff failed: " + err.Error()
		})
		return err
	}
	lc.detached = false
	e.live[config] = lc
	e.Status.Update(st, func(cur *collector.State) {
		cur.Up, cur.Reason, cur.OverBudget = true, "", ""
		for i := range cur.Programs {
			for _, p := range lc.obj.Programs {
				if p.Name == cur.Programs[i].Name {
					cur.Programs[i].Attached = p.Attached()
				}
			}
		}
	})
	e.log.Info("config re-attached", "config", config, "programs", len(lc.obj.Programs))
	return nil
}

// state returns the state and source of config (nil when unknown).
func (e *Exporter) state(config string) (*collector.State, Source) {
	for i, src := range e.opts.Sources {
		if src.Name == config {
			return e.states[i], src
		}
	}
	return nil, Source{}
}

// Package exporter wires configs, the loader and collectors together: for
// each requested config it parses the YAML, compiles it against the object's
// maps, loads and attaches the object, and registers a collector. One config
// failing never stops the others; its state records why.
package exporter

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kernel-exporter/kernel_exporter/collector"
	"github.com/kernel-exporter/kernel_exporter/config"
	"github.com/kernel-exporter/kernel_exporter/decoder"
	"github.com/kernel-exporter/kernel_exporter/loader"
	"github.com/kernel-exporter/kernel_exporter/programs"
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
	// BTFPath is an external vmlinux BTF file; empty uses the kernel's.
	BTFPath string
	// AttachTo holds command-line attach_to overrides by config name (see
	// ParseAttachTo); DisableAttach lists attach kinds to treat as
	// unsupported (loader.Options.DisableAttach).
	AttachTo      map[string][]string
	DisableAttach []string
	Logger        *slog.Logger
}

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

	objects []*loader.Object
	log     *slog.Logger
}

// New starts every source. It returns an error only for problems that
// affect all configs (none today); per-config failures are in Status and
// in Failed.
func New(opts Options) *Exporter {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	e := &Exporter{Registry: prometheus.NewRegistry(), Status: &collector.Status{}, log: log}
	e.Registry.MustRegister(e.Status)
	env := decoder.NewEnv(min(opts.CacheSize, MaxDecoderCache))
	for _, src := range opts.Sources {
		st := e.start(src, env, opts)
		e.Status.Add(st)
		if st.Up {
			log.Info("config up", "config", st.Name, "from", st.Source, "programs", len(st.Programs))
			for _, a := range st.Alternatives {
				log.Info("alternative chosen", "config", st.Name, "alternative", a.Name, "chosen", a.Chosen, "passed_over", strings.Join(a.Passed, "; "))
			}
		} else {
			log.Error("config down", "config", st.Name, "from", st.Source, "reason", st.Reason)
		}
	}
	// Start-up used memory that serving does not need (the decoded kernel
	// BTF, the text of kallsyms): drop it and give it back to the system
	// now rather than over the next minutes.
	loader.ReleaseKernelTypes()
	env.Warm()
	debug.FreeOSMemory()
	return e
}

// Failed returns the states of the configs that are down.
func (e *Exporter) Failed() []collector.State {
	var out []collector.State
	for _, st := range e.Status.States() {
		if !st.Up {
			out = append(out, st)
		}
	}
	return out
}

func (e *Exporter) start(src Source, env *decoder.Env, opts Options) *collector.State {
	st := &collector.State{Name: src.Name, Source: "bundled"}
	if src.Dir != "" {
		st.Source = filepath.Join(src.Dir, src.Name+".yaml")
	}
	if err := e.load(st, src, env, opts); err != nil {
		st.Reason = err.Error()
	}
	return st
}

// load runs one config: parse, compile against the object's maps, load and
// attach, register. It fills st's programs and alternatives as far as it
// gets, and sets st.Up on success.
func (e *Exporter) load(st *collector.State, src Source, env *decoder.Env, opts Options) error {
	cfg, data, err := read(src)
	if err != nil {
		return err
	}
	lopts := loader.Options{BTFPath: opts.BTFPath, DisableAttach: opts.DisableAttach}
	for _, o := range opts.AttachTo[src.Name] {
		if err := cfg.OverrideAttachTo(o); err != nil {
			return err
		}
	}
	if err := loader.CheckRequires(cfg, lopts); err != nil {
		return err
	}
	for _, k := range cfg.Ignored() {
		e.log.Warn("config key ignored", "config", cfg.Name, "file", cfg.File, "key", k)
	}
	spec, err := loader.ParseObject(cfg.Object, data)
	if err != nil {
		return err
	}
	plan, err := collector.Compile(cfg, spec, env)
	if err != nil {
		return err
	}
	obj, err := loader.Load(spec, cfg, lopts)
	if obj != nil {
		for _, p := range obj.Programs {
			st.Programs = append(st.Programs, collector.ProgramState{Name: p.Name, Section: p.Section, Attached: p.Attached(), Prog: p.Prog, Alternative: p.Alternative})
		}
		st.Alternatives = alternativeStates(obj.Alternatives)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", cfg.Object, err)
	}
	c, err := collector.New(plan, obj.Collection, opts.CacheSize)
	if err == nil {
		err = e.Registry.Register(c)
	}
	if err != nil {
		obj.Close()
		for i := range st.Programs {
			st.Programs[i].Attached = false
		}
		return err
	}
	e.objects = append(e.objects, obj)
	st.Up = true
	st.Collector = c
	return nil
}

// read returns the parsed config and the object bytes of a source.
func read(src Source) (*config.Config, []byte, error) {
	if src.Dir == "" {
		file := src.Name + ".yaml"
		y, err := fs.ReadFile(programs.FS, file)
		if err != nil {
			return nil, nil, fmt.Errorf("no bundled program %q (bundled: %v)", src.Name, programs.Names())
		}
		cfg, err := config.Parse("programs/"+file, y)
		if err != nil {
			return nil, nil, err
		}
		cfg.Name = src.Name
		cfg.Object = "programs/" + src.Name + ".bpf.o"
		obj, err := fs.ReadFile(programs.FS, src.Name+".bpf.o")
		if err != nil {
			return cfg, nil, fmt.Errorf("bundled program %q has no object", src.Name)
		}
		return cfg, obj, nil
	}
	cfg, err := config.Load(src.Dir, src.Name)
	if err != nil {
		return nil, nil, err
	}
	obj, err := os.ReadFile(cfg.Object)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return cfg, nil, fmt.Errorf("%s: BPF object %s not found", cfg.File, filepath.Clean(cfg.Object))
		}
		return cfg, nil, fmt.Errorf("%s: read BPF object: %w", cfg.File, err)
	}
	return cfg, obj, nil
}

// Close detaches and unloads every program and map.
func (e *Exporter) Close() {
	for _, o := range e.objects {
		o.Close()
	}
	e.objects = nil
}

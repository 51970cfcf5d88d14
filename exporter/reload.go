// SPDX-License-Identifier: Apache-2.0

package exporter

// Hot reload as a diff of config sets: every source is read again and its
// digest (a SHA-256 of the YAML's bytes and the object's bytes) compared
// with the one recorded when its running version was loaded. An unchanged
// config is left alone (its programs, maps and series carry on); a changed
// one is loaded and attached as a new version while the old one still
// runs, then swapped in (in one critical section: the claims, the
// registry's descriptors and the state, so that a scrape sees either
// version, never neither), and only then is the old version closed. A new
// version that fails leaves the old one serving.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kernel-exporter/kernel_exporter/bounded"
	"github.com/kernel-exporter/kernel_exporter/budget"
	"github.com/kernel-exporter/kernel_exporter/collector"
	"github.com/kernel-exporter/kernel_exporter/config"
	"github.com/kernel-exporter/kernel_exporter/loader"
	"github.com/kernel-exporter/kernel_exporter/spans"
)

// Outcomes of one config in a reload (ReloadResult.Outcome).
const (
	// ReloadUnchanged: its files are as when its running version (or its
	// failed start) was loaded; nothing was done.
	ReloadUnchanged = "unchanged"
	// ReloadReloaded: a new version was loaded, attached and swapped in.
	ReloadReloaded = "reloaded"
	// ReloadFailed: the new version failed; the old one (if any) serves.
	ReloadFailed = "failed"
	// ReloadLoading: its start-up load has not ended; it was skipped.
	ReloadLoading = "loading"
)

// ReloadResult is what a reload did with one config.
type ReloadResult struct {
	Config  string
	Outcome string // one of the Reload* outcomes
	Reason  string // why it failed ("" otherwise)
}

// reloadState serializes reloads and holds the reload self-metrics.
type reloadState struct {
	mu        sync.Mutex // one reload at a time
	ok        prometheus.Gauge
	timestamp prometheus.Gauge
}

func newReloadState() *reloadState {
	return &reloadState{
		ok: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kernel_exporter_config_last_reload_successful",
			Help: "Whether the last configuration reload attempt was successful (1) or not (0); start-up's load counts as one.",
		}),
		timestamp: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kernel_exporter_config_last_reload_success_timestamp_seconds",
			Help: "Timestamp of the last successful configuration reload (or of the end of start-up's load), in seconds since the Unix epoch.",
		}),
	}
}

func (r *reloadState) Describe(ch chan<- *prometheus.Desc) {
	r.ok.Describe(ch)
	r.timestamp.Describe(ch)
}

func (r *reloadState) Collect(ch chan<- prometheus.Metric) {
	r.ok.Collect(ch)
	r.timestamp.Collect(ch)
}

// done records the end of a reload (or of start-up's load).
func (r *reloadState) done(ok bool) {
	if ok {
		r.ok.Set(1)
		r.timestamp.Set(float64(time.Now().UnixNano()) / 1e9)
		return
	}
	r.ok.Set(0)
}

// bundledDigest is the digest of every bundled program: they are
// embedded and never change.
const bundledDigest = "bundled"

// digest returns the SHA-256, in hex, of a source's YAML and object bytes
// (SourceDigest), or bundledDigest. A file that cannot be read counts by
// its error (so that it appearing later is a change).
func digest(src Source) string {
	if src.Dir == "" {
		return bundledDigest
	}
	h := sha256.New()
	for _, f := range []struct {
		path, what string
		limit      int64
	}{
		{filepath.Join(src.Dir, src.Name+".yaml"), "config", config.MaxFileSize},
		{filepath.Join(src.Dir, src.Name+".bpf.o"), "BPF object", bounded.MaxObject},
	} {
		b, err := bounded.ReadFile(f.path, f.what, f.limit)
		if err != nil {
			fmt.Fprintf(h, "unreadable %d\n", len(err.Error()))
			continue
		}
		digestPart(h, b)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// SourceDigest is the digest of a config whose YAML and object are these
// bytes: the SHA-256, in hex, of each one's length and bytes in turn.
func SourceDigest(yaml, object []byte) string {
	h := sha256.New()
	digestPart(h, yaml)
	digestPart(h, object)
	return hex.EncodeToString(h.Sum(nil))
}

func digestPart(h hash.Hash, b []byte) {
	fmt.Fprintf(h, "%d\n", len(b))
	h.Write(b)
}

// Reload reads every source again and brings the running set to it:
// unchanged configs are left untouched, changed ones (and configs that
// are down whose files changed) are loaded and attached as a new version
// before the old one is detached and closed, and a new version that fails
// leaves the old one serving, logged. It returns one result per config in
// source order, and an error naming the configs that failed (then
// kernel_exporter_config_last_reload_successful is 0; else 1, with
// kernel_exporter_config_last_reload_success_timestamp_seconds now).
// Reloads run one at a time: a second call waits for the first. It
// returns an error, changing nothing, before Start or after Close, or when
// ctx is done before it begins.
func (e *Exporter) Reload(ctx context.Context) ([]ReloadResult, error) {
	e.reload.mu.Lock()
	defer e.reload.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	e.mu.Lock()
	env, closed := e.env, e.closed
	e.mu.Unlock()
	if env == nil || closed {
		return nil, errors.New("reload: the exporter is not running")
	}
	e.log.Info("reloading configs", "configs", len(e.opts.Sources))
	var (
		out    []ReloadResult
		failed []string
	)
	reloaded := map[string]bool{}
	t0 := time.Now()
	for i, src := range e.opts.Sources {
		t1 := time.Now()
		r := e.reloadOne(i, src, reloaded)
		if r.Outcome == ReloadReloaded {
			reloaded[src.Name] = true
		}
		out = append(out, r)
		switch r.Outcome {
		case ReloadFailed:
			failed = append(failed, r.Config)
			e.log.Error("config reload failed: the running version (if any) keeps serving", "config", r.Config, "reason", r.Reason)
		case ReloadReloaded:
			e.log.Info("config reloaded", "config", r.Config, "took", time.Since(t1).Round(time.Millisecond))
		}
	}
	e.reload.done(len(failed) == 0)
	if len(failed) > 0 {
		return out, fmt.Errorf("reload failed for config %s", strings.Join(failed, ", "))
	}
	e.log.Info("reload done", "took", time.Since(t0).Round(time.Millisecond))
	return out, nil
}

// reloadOne reloads source i when its files changed, or when it is down
// because a config listed before it defines the same metric and that
// config was reloaded (in reloaded) in this pass.
func (e *Exporter) reloadOne(i int, src Source, reloaded map[string]bool) ReloadResult {
	st := e.states[i]
	res := ReloadResult{Config: src.Name, Outcome: ReloadUnchanged}
	dg := digest(src)
	e.mu.Lock()
	old, known := e.digests[src.Name]
	var loading bool
	e.Status.Update(st, func(cur *collector.State) { loading = cur.Loading })
	env := e.env
	other, conflicted := e.conflicts[src.Name]
	e.mu.Unlock()
	switch {
	case loading || !known:
		res.Outcome = ReloadLoading
		return res
	case dg == old && !(conflicted && reloaded[other]):
		return res
	}
	next := collector.State{Name: st.Name, Source: st.Source}
	held := e.Memory.Held(src.Name)
	remote := e.opts.Loader != nil
	var (
		obj   *loader.Object
		c     *collector.Config
		sr    *spans.Reader
		names []string
	)
	p, err := e.prepare(src, env, remote)
	if p != nil {
		next.Warnings = p.warnings
	}
	if err == nil {
		names = p.names
		e.mu.Lock()
		err = e.conflict(i, names)
		e.mu.Unlock()
	}
	if err == nil {
		obj, c, sr, err = e.loadPrepared(&next, src, p, remote)
	}

	e.mu.Lock()
	prev, wasLive := e.live[src.Name]
	if err == nil && e.closed {
		err = errors.New("the exporter closed during the reload")
	}
	if err == nil {
		err = e.swap(src.Name, names, c)
	}
	if err != nil {
		if _, ok := e.conflicts[src.Name]; ok {
			e.digests[src.Name] = dg // retried when the other config reloads or its files change
		}
		e.mu.Unlock()
		closeSpans(sr)
		if obj != nil {
			obj.Close()
		}
		// load replaced the config's reservation: give back the old
		// version's (or nothing, when none runs).
		if wasLive {
			_ = e.Memory.Reserve(src.Name, budget.Estimate{Total: held})
		} else {
			e.Memory.Release(src.Name)
			e.Status.Update(st, func(cur *collector.State) {
				cur.Reason = "reload: " + err.Error()
				cur.Programs, cur.Alternatives = next.Programs, next.Alternatives
				for i := range cur.Programs {
					cur.Programs[i].Attached = false
				}
			})
		}
		res.Outcome, res.Reason = ReloadFailed, err.Error()
		if !remote && errors.Is(err, syscall.EPERM) {
			res.Reason += " (after start-up the exporter drops the capabilities loading needs, and no privileged helper runs to load for it: see --capabilities.keep)"
		}
		return res
	}
	stop := withSpans(c.StartExpiry(), sr)
	e.live[src.Name] = liveConfig{obj: obj, c: c, names: names, stop: stop, audit: p.cfg.Audit, ns: p.cfg.MetricName}
	e.digests[src.Name] = dg
	e.names[src.Name] = names
	next.Up, next.Collector = true, c
	e.Status.Update(st, func(cur *collector.State) { *cur = next })
	e.mu.Unlock()
	if wasLive {
		// The new version serves: end the old one's background reads,
		// then detach and unload it.
		if prev.stop != nil {
			prev.stop()
		}
		prev.obj.Close()
	}
	res.Outcome = ReloadReloaded
	return res
}

// swap moves config's claims from its running version to the new
// collector c serving names: a name may be the old version's own, not
// another config's. On error nothing changed. The caller holds e.mu.
func (e *Exporter) swap(config string, names []string, c *collector.Config) error {
	for _, n := range names {
		if other, ok := e.claims[n]; ok && other != config {
			return fmt.Errorf("metric %s of config %s is already served by config %s", n, config, other)
		}
	}
	// The registry remembers every name ever registered with its help and
	// labels (even once unregistered), and would refuse a new version's
	// changed help: register only the names this exporter's configs never
	// registered, which is what can clash with the exporter's own metrics.
	var fresh descList
	for _, d := range describe(c.Descs()) {
		if !e.registered[fqName(d)] {
			fresh = append(fresh, d)
		}
	}
	if len(fresh) > 0 {
		if err := e.Registry.Register(fresh); err != nil {
			return fmt.Errorf("metrics of config %s: %w", config, err)
		}
		for _, d := range fresh {
			e.registered[fqName(d)] = true
		}
	}
	for n, owner := range e.claims {
		if owner == config {
			delete(e.claims, n)
		}
	}
	for _, n := range names {
		e.claims[n] = config
	}
	return nil
}

// descList is a collector of descriptors only (it collects nothing): it
// claims names in a registry.
type descList []*prometheus.Desc

func (l descList) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range l {
		ch <- d
	}
}

func (descList) Collect(chan<- prometheus.Metric) {}

// describe returns the descriptors of c.
func describe(c prometheus.Collector) []*prometheus.Desc {
	ch := make(chan *prometheus.Desc)
	go func() {
		c.Describe(ch)
		close(ch)
	}()
	var out []*prometheus.Desc
	for d := range ch {
		out = append(out, d)
	}
	return out
}

// fqName returns a descriptor's fully-qualified name, which client_golang
// shows only in Desc.String: Desc{fqName: "name", ...}.
func fqName(d *prometheus.Desc) string {
	s := d.String()
	_, rest, ok := strings.Cut(s, `fqName: "`)
	if !ok {
		return s
	}
	name, _, _ := strings.Cut(rest, `"`)
	return name
}

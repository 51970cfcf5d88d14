// SPDX-License-Identifier: Apache-2.0

// Package audit checks the bundled programs against the kernel's own
// counters. A config's audit section (config.Audit) pairs a metric with a
// kernel counter that counts the same events (config.AuditSources: block
// requests completed, context switches, softirq runs, TCP segments
// retransmitted, OOM kills, direct reclaims). Every interval the Auditor
// reads each audited config afresh (collector.Config.Read), then the
// kernel's counters, and compares what each moved by since the last
// interval: our events (a counter's sum, a histogram's count, over the
// series an entry selects) over the kernel's. A ratio away from 1 means
// the program misses events (a hook that stopped firing, a program
// detached, a full in-flight map, a kernel path without the hook) or
// counts some twice.
//
// It serves, by config and source:
//
//	kernel_exporter_audit_events_total{side="ours"|"kernel"}  counters
//	kernel_exporter_audit_ratio                               gauge
//	kernel_exporter_audit_errors_total                        counter
//
// The ratio is the last interval's, absent while the kernel counted
// nothing in it (or before the second interval). A kernel counter this
// kernel does not keep (UnavailableError: /proc/schedstat without
// CONFIG_SCHEDSTATS) makes its pair "not available", logged once at
// info level, with no ratio and no error counted. The kernel files are
// read with package bounded; their parsers are fuzzed.
package audit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kernel-exporter/kernel_exporter/collector"
	"github.com/kernel-exporter/kernel_exporter/config"
)

// DefaultInterval is the default audit interval (--audit.interval).
const DefaultInterval = 30 * time.Second

// Bounds of the interval.
const (
	MinInterval = 100 * time.Millisecond
	MaxInterval = time.Hour
)

// Band is the range of ratios the audit counts as agreeing: the alert
// rule's (deploy/prometheus/alerts.yml) and the landing page's.
const BandLow, BandHigh = 0.98, 1.02

// Target is a config to audit.
type Target struct {
	Config string
	// Read reads the config's maps (collector.Config.Read).
	Read func() *collector.Snapshot
	// Entries are the config's audit section.
	Entries []config.Audit
	// MetricName turns a metric's name in the config into the name it is
	// served under (config.Config.MetricName).
	MetricName func(string) string
}

// Options configure an Auditor.
type Options struct {
	Interval time.Duration // 0: DefaultInterval
	// Targets returns the configs to audit at each interval
	// (exporter.Exporter.AuditTargets).
	Targets func() []Target
	// Root is the root the kernel's files are read below ("" is "/").
	Root   string
	Logger *slog.Logger
}

// Auditor audits the targets every interval and serves the result.
type Auditor struct {
	opts Options
	log  *slog.Logger

	mu    sync.Mutex
	pairs map[pairKey]*pair
}

type pairKey struct{ config, source string }

// pair is one entry's state.
type pair struct {
	metric string
	based  bool      // ours and kernel hold a previous reading
	start  time.Time // the snapshot's Start of that reading
	ours   float64
	kernel float64 // the mean of the readings before and after the maps'
	// totals since the audit began, of the intervals compared.
	oursTotal, kernelTotal float64
	ratio                  float64
	hasRatio               bool
	// Last interval's deltas, and the error of the last interval.
	dOurs, dKernel float64
	err            string
	errors         uint64
	// unavail is why the kernel does not keep the counter
	// (UnavailableError.Reason), "" while it does.
	unavail string
	seen    bool // in the last interval's targets
}

// New returns an Auditor; Run runs it.
func New(opts Options) *Auditor {
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.Root == "" {
		opts.Root = "/"
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Auditor{opts: opts, log: log, pairs: map[pairKey]*pair{}}
}

// CheckInterval checks an --audit.interval value.
func CheckInterval(d time.Duration) error {
	if d < MinInterval || d > MaxInterval {
		return fmt.Errorf("--audit.interval %v: must be %v to %v", d, MinInterval, MaxInterval)
	}
	return nil
}

// Run audits every interval until ctx is done.
func (a *Auditor) Run(ctx context.Context) {
	t := time.NewTicker(a.opts.Interval)
	defer t.Stop()
	a.Tick()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			a.Tick()
		}
	}
}

// Tick runs one interval. Each target's kernel counters are read just
// before and just after its maps, and their mean taken as the kernel's
// count at the time of the maps' read: the events that happen while the
// maps are read (milliseconds, more when the exporter waits for a CPU)
// then count half on each side of the interval's edge, on both sides of
// the comparison alike.
func (a *Auditor) Tick() {
	targets := a.opts.Targets()
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range a.pairs {
		p.seen = false
	}
	for _, t := range targets {
		before := a.readKernel(t.Entries)
		snap := t.Read()
		after := a.readKernel(t.Entries)
		for i, e := range t.Entries {
			key := pairKey{t.Config, e.Source}
			p := a.pairs[key]
			if p == nil || p.metric != e.Metric {
				p = &pair{metric: e.Metric}
				a.pairs[key] = p
			}
			p.seen = true
			kerr := firstErr(before[i].err, after[i].err)
			var ue *UnavailableError
			if errors.As(kerr, &ue) {
				if p.unavail != ue.Reason {
					a.log.Info("audit: kernel counter not available on this kernel, not compared", "config", t.Config, "kernel_counter", e.Source, "reason", ue.Reason)
				}
				p.setUnavailable(ue.Reason)
				continue
			}
			p.unavail = ""
			ours, oerr := Count(snap, t.MetricName(e.Metric), e.Labels)
			kern := float64(before[i].v)/2 + float64(after[i].v)/2
			p.update(ours, oerr, kern, kerr, snap.Start)
			if p.err != "" {
				a.log.Debug("audit: interval not compared", "config", t.Config, "kernel_counter", e.Source, "err", p.err)
			}
		}
	}
	// Configs gone (down, reloaded without the entry) stop being served.
	for k, p := range a.pairs {
		if !p.seen {
			delete(a.pairs, k)
		}
	}
}

// reading is one kernel counter's value or error.
type reading struct {
	v   uint64
	err error
}

// readKernel reads the kernel counter of each entry, each file once.
func (a *Auditor) readKernel(entries []config.Audit) []reading {
	k := NewKernel(a.opts.Root)
	out := make([]reading, len(entries))
	for i, e := range entries {
		out[i].v, out[i].err = k.Read(e.Source)
	}
	return out
}

// setUnavailable notes that the kernel does not keep the pair's counter:
// no comparison, no ratio, no error.
func (p *pair) setUnavailable(reason string) {
	p.unavail, p.err = reason, ""
	p.hasRatio, p.based = false, false
	p.dOurs, p.dKernel = 0, 0
}

// update compares one interval's readings with the previous ones.
func (p *pair) update(ours float64, oerr error, kern float64, kerr error, start time.Time) {
	p.hasRatio = false
	p.dOurs, p.dKernel = 0, 0
	if err := firstErr(oerr, kerr); err != nil {
		p.err = err.Error()
		p.errors++
		p.based = false
		return
	}
	p.err = ""
	// A reload restarts the config's counters, an expired series takes
	// its count away, a counter of the kernel never goes back (but a
	// disk removed does): compare nothing, start from these readings.
	if p.based && start.Equal(p.start) && ours >= p.ours && kern >= p.kernel {
		p.dOurs, p.dKernel = ours-p.ours, kern-p.kernel
		p.oursTotal += p.dOurs
		p.kernelTotal += p.dKernel
		if p.dKernel > 0 {
			p.ratio, p.hasRatio = p.dOurs/p.dKernel, true
		}
	}
	p.based, p.start, p.ours, p.kernel = true, start, ours, kern
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Count returns our events in snap: the sum of counter metric's series,
// or the count of histogram metric's, over the series whose label values
// equal labels' (all series when labels is empty). Errors: no such
// metric, its read failed, a gauge, or a label it lacks.
func Count(snap *collector.Snapshot, metric string, labels map[string]string) (float64, error) {
	if snap == nil {
		return 0, fmt.Errorf("metric %s: not read", metric)
	}
	for _, f := range snap.Families {
		if f == nil || f.Name != metric {
			continue
		}
		if f.Err != nil {
			return 0, fmt.Errorf("metric %s: read failed: %w", metric, f.Err)
		}
		if f.Kind == collector.KindGauge {
			return 0, fmt.Errorf("metric %s is a gauge: it counts no events", metric)
		}
		type sel struct {
			idx  int
			want string
		}
		var sels []sel
		for _, name := range slices.Sorted(maps.Keys(labels)) {
			i := slices.Index(f.LabelNames, name)
			if i < 0 {
				return 0, fmt.Errorf("metric %s has no label %s (labels: %s)", metric, config.Quote(name), strings.Join(f.LabelNames, ", "))
			}
			sels = append(sels, sel{i, labels[name]})
		}
		var sum float64
		vals := make([]string, 0, len(f.LabelNames))
	series:
		for i := range f.Len() {
			if len(sels) > 0 {
				vals = f.AppendLabelValues(vals[:0], i)
				for _, s := range sels {
					if vals[s.idx] != s.want {
						continue series
					}
				}
			}
			if f.Kind == collector.KindHistogram {
				_, n, _ := f.Histogram(i)
				sum += float64(n)
			} else {
				sum += f.Value(i)
			}
		}
		return sum, nil
	}
	return 0, fmt.Errorf("metric %s: not in the config's read", metric)
}

// State is one audited pair as the landing page shows it.
type State struct {
	Source string
	// Ratio of the last interval, when HasRatio; InBand is whether it is
	// within [BandLow, BandHigh].
	Ratio    float64
	HasRatio bool
	InBand   bool
	// Ours and Kernel are the last interval's events.
	Ours, Kernel float64
	// Err is why the last interval was not compared ("" when it was).
	Err string
	// Unavailable is why the kernel does not keep the counter (package
	// doc, UnavailableError), "" when it does; such a pair is never
	// compared and counts no error.
	Unavailable string
}

// States returns each config's audited pairs, by source name.
func (a *Auditor) States() map[string][]State {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string][]State{}
	for k, p := range a.pairs {
		out[k.config] = append(out[k.config], State{Source: k.source, Ratio: p.ratio, HasRatio: p.hasRatio,
			InBand: p.hasRatio && p.ratio >= BandLow && p.ratio <= BandHigh, Ours: p.dOurs, Kernel: p.dKernel, Err: p.err, Unavailable: p.unavail})
	}
	for _, s := range out {
		slices.SortFunc(s, func(x, y State) int { return strings.Compare(x.Source, y.Source) })
	}
	return out
}

var (
	eventsDesc = prometheus.NewDesc("kernel_exporter_audit_events_total",
		"Events counted over the audit's compared intervals, by config and kernel counter (source): side=\"ours\" by the config's metric, side=\"kernel\" by the kernel's own counter",
		[]string{"config", "source", "side"}, nil)
	ratioDesc = prometheus.NewDesc("kernel_exporter_audit_ratio",
		"Our events over the kernel's in the last audit interval (--audit.interval), by config and kernel counter (source); absent while the kernel counted none",
		[]string{"config", "source"}, nil)
	errorsDesc = prometheus.NewDesc("kernel_exporter_audit_errors_total",
		"Audit intervals not compared because the metric or the kernel counter could not be read, by config and kernel counter (source); a counter this kernel does not keep (no /proc/schedstat) counts none",
		[]string{"config", "source"}, nil)
)

// Describe implements prometheus.Collector.
func (a *Auditor) Describe(ch chan<- *prometheus.Desc) {
	ch <- eventsDesc
	ch <- ratioDesc
	ch <- errorsDesc
}

// Collect implements prometheus.Collector.
func (a *Auditor) Collect(ch chan<- prometheus.Metric) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, p := range a.pairs {
		ch <- prometheus.MustNewConstMetric(eventsDesc, prometheus.CounterValue, p.oursTotal, k.config, k.source, "ours")
		ch <- prometheus.MustNewConstMetric(eventsDesc, prometheus.CounterValue, p.kernelTotal, k.config, k.source, "kernel")
		ch <- prometheus.MustNewConstMetric(errorsDesc, prometheus.CounterValue, float64(p.errors), k.config, k.source)
		if p.hasRatio {
			ch <- prometheus.MustNewConstMetric(ratioDesc, prometheus.GaugeValue, p.ratio, k.config, k.source)
		}
	}
}

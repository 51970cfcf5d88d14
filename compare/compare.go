// SPDX-License-Identifier: Apache-2.0

// Package compare ranks the kernel signals that changed between two sets
// of hosts, or two windows of time, from what Prometheus already holds
// (kernel_exporter compare; docs/compare.md).
//
// It asks Prometheus (through its HTTP query API, client_golang's api/v1)
// for every kernel_* metric the two selectors match, then for each metric
// the per-series increase over each window. It never builds a store of
// its own and holds one metric's series at a time per worker.
//
// For every counter label set (a series' labels without the host label,
// the labels the selectors name and le) it takes each host's rate
// (increase ÷ window seconds, summed over the host's series of that label
// set, 0 for a host that has the metric but not the label set); for every
// histogram label set each host's p50, p90 and p99 (linear interpolation
// inside the bucket, as histogram_quantile), its event rate, and the
// merged distribution of each set (quantiles, Kolmogorov-Smirnov
// statistic, earth mover's distance).
//
// Robustness across hosts: a row's factor is the median host's value in
// the new set ÷ the median host's value in the base set, and its
// consistency is Cliff's delta between the two sets of per-host values
// (the Mann-Whitney U statistic scaled to [-1, 1]; its p-value is given
// too). Rows rank by |delta| × |log2 factor|: a change every host shows
// (delta ±1) outranks a bigger one on a single host, which moves neither
// the median nor delta by more than one host's share. Agree counts the new
// hosts beyond every base host in the direction of the change.
package compare

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/common/model"
	"golang.org/x/sync/errgroup"
)

// Prefix is what the names of the metrics compared start with.
const Prefix = "kernel_"

// Quantiles are the quantiles a histogram row is chosen among.
var Quantiles = []float64{0.5, 0.9, 0.99}

// A Side is one side of the comparison: a selector over a window.
type Side struct {
	Selector   Selector
	Start, End time.Time
}

func (s Side) seconds() float64 { return s.End.Sub(s.Start).Seconds() }

// rangeString is the window as a PromQL range, in whole seconds.
func (s Side) rangeString() string {
	return fmt.Sprintf("%ds", int64(math.Round(s.seconds())))
}

// Options are what Run compares and its bounds.
type Options struct {
	Client    ClientOptions
	Base, New Side
	// HostLabel tells hosts apart ("instance" when empty).
	HostLabel string
	// Ignore are labels left out of a row's label set besides the host
	// label and the labels the selectors name (per-target labels such as
	// a hostname or a zone).
	Ignore []string
	// MaxSeries bounds the series fetched over both sides
	// (DefaultMaxSeries when 0).
	MaxSeries int
	// Timeout bounds each query (DefaultTimeout when 0).
	Timeout time.Duration
	// Concurrency is the number of queries in flight
	// (DefaultConcurrency when 0).
	Concurrency int
}

// A Result is the ranked comparison.
type Result struct {
	Base SideSummary `json:"base"`
	New  SideSummary `json:"new"`
	// Series is the number of series fetched over both sides.
	Series int `json:"series"`
	// Rows, best first.
	Rows []Row `json:"rows"`
}

// SideSummary describes one side.
type SideSummary struct {
	Selector string    `json:"selector"`
	Start    time.Time `json:"start"`
	End      time.Time `json:"end"`
	// Hosts seen in any kernel_* metric compared.
	Hosts int `json:"hosts"`
}

// Row kinds.
const (
	KindCounter   = "counter"   // a counter's per-host rate, per second
	KindHistogram = "histogram" // a histogram's per-host quantile
	KindEvents    = "events"    // a histogram's per-host event rate, per second
)

// A Row is one signal's change.
type Row struct {
	// Signal is the metric with its label set, in PromQL.
	Signal string            `json:"signal"`
	Metric string            `json:"metric"`
	Labels map[string]string `json:"labels"`
	Kind   string            `json:"kind"`
	// Quantile of a histogram row: the one of Quantiles whose change
	// scored highest.
	Quantile float64 `json:"quantile,omitempty"`
	// Base and New are the median host's value (a rate per second, or a
	// quantile in the histogram's unit).
	Base float64 `json:"base"`
	New  float64 `json:"new"`
	// Factor is New ÷ Base (+Inf when Base is 0 and New is not).
	Factor Float `json:"factor"`
	// Agree is the number of new hosts beyond every base host in the
	// direction of the change, of NewHosts.
	Agree     int `json:"agree"`
	BaseHosts int `json:"base_hosts"`
	NewHosts  int `json:"new_hosts"`
	// Delta is Cliff's delta of the new hosts' values against the base
	// hosts' (-1 to 1), P the Mann-Whitney U test's two-sided p-value.
	Delta float64 `json:"cliffs_delta"`
	P     float64 `json:"p_value"`
	// Score ranks the rows: |Delta| × |log2 Factor| (capped at
	// MaxLog2Factor).
	Score float64 `json:"score"`
	// Histogram rows: the merged distribution of each set at Quantiles,
	// and the distances between them.
	BaseQuantiles []Float `json:"base_quantiles,omitempty"`
	NewQuantiles  []Float `json:"new_quantiles,omitempty"`
	KS            *Float  `json:"ks,omitempty"`
	EMD           *Float  `json:"emd,omitempty"`
	// PromQL graphs the row per host.
	PromQL string `json:"promql"`
}

// Float is a float64 that encodes to JSON as a number, or as the strings
// "+Inf", "-Inf" and "NaN" that JSON numbers cannot hold.
type Float float64

// MarshalJSON encodes f.
func (f Float) MarshalJSON() ([]byte, error) {
	v := float64(f)
	switch {
	case math.IsInf(v, 1):
		return []byte(`"+Inf"`), nil
	case math.IsInf(v, -1):
		return []byte(`"-Inf"`), nil
	case math.IsNaN(v):
		return []byte(`"NaN"`), nil
	}
	return []byte(fmt.Sprint(v)), nil
}

// Run compares o.Base with o.New and ranks every kernel_* signal. Errors
// name the query and say what bound was passed (--query.max-series,
// --query.max-bytes, --query.timeout) or what Prometheus answered.
func Run(ctx context.Context, o Options) (*Result, error) {
	if o.HostLabel == "" {
		o.HostLabel = "instance"
	}
	if o.MaxSeries <= 0 {
		o.MaxSeries = DefaultMaxSeries
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	for _, s := range []Side{o.Base, o.New} {
		if !s.End.After(s.Start) || s.seconds() < 1 {
			return nil, fmt.Errorf("window %v to %v: the end must be at least 1 s after the start", s.Start, s.End)
		}
	}
	a, err := newAPI(o.Client, o.MaxSeries)
	if err != nil {
		return nil, err
	}
	r := &runner{o: o, q: querier{api: a, timeout: o.Timeout}}
	return r.run(ctx)
}

type runner struct {
	o       Options
	q       querier
	fetched atomic.Int64

	mu   sync.Mutex
	rows []Row

	// sideHosts are the hosts with any kernel_* series, per side.
	sideHosts [2]map[string]bool
}

// A family is a metric compared: a counter (name_total) or a histogram
// (name_bucket).
type family struct {
	name      string // as queried: kernel_x_total, kernel_y_seconds_bucket
	histogram bool
	on        [2]bool // found on base, new
}

func (r *runner) run(ctx context.Context) (*Result, error) {
	sides := [2]Side{r.o.Base, r.o.New}
	fams := map[string]*family{}
	var total [2]int
	for i, s := range sides {
		names, n, err := r.discover(ctx, s)
		if err != nil {
			return nil, fmt.Errorf("%s side: %w", sideName(i), err)
		}
		total[i] = n
		if r.sideHosts[i], err = r.discoverHosts(ctx, s); err != nil {
			return nil, fmt.Errorf("%s side: %w", sideName(i), err)
		}
		for _, name := range names {
			f := fams[name]
			if f == nil {
				f = &family{name: name, histogram: strings.HasSuffix(name, "_bucket")}
				fams[name] = f
			}
			f.on[i] = true
		}
	}
	if total[0]+total[1] > r.o.MaxSeries {
		return nil, fmt.Errorf("the selectors match %d kernel_* counter and histogram series (base %d, new %d), more than --query.max-series=%d: narrow BASE or NEW, or raise the bound", total[0]+total[1], total[0], total[1], r.o.MaxSeries)
	}
	names := make([]string, 0, len(fams))
	for n := range fams {
		names = append(names, n)
	}
	sort.Strings(names)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(r.o.Concurrency)
	for _, n := range names {
		f := fams[n]
		g.Go(func() error { return r.family(gctx, f) })
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	slices.SortFunc(r.rows, func(a, b Row) int {
		if a.Score != b.Score {
			if a.Score > b.Score {
				return -1
			}
			return 1
		}
		la, lb := math.Abs(math.Log2(float64(a.Factor))), math.Abs(math.Log2(float64(b.Factor)))
		if la != lb && !math.IsNaN(la) && !math.IsNaN(lb) {
			if la > lb {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Signal, b.Signal)
	})
	res := &Result{Series: int(r.fetched.Load()), Rows: r.rows}
	for i, s := range sides {
		sum := SideSummary{Selector: "{" + s.Selector.String() + "}", Start: s.Start.UTC(), End: s.End.UTC(), Hosts: len(r.sideHosts[i])}
		if i == 0 {
			res.Base = sum
		} else {
			res.New = sum
		}
	}
	return res, nil
}

func sideName(i int) string {
	if i == 0 {
		return "base"
	}
	return "new"
}

// discover lists the counter and histogram metrics a side has over its
// window, with their series counts, in one query.
func (r *runner) discover(ctx context.Context, s Side) ([]string, int, error) {
	sel := `__name__=~"` + Prefix + `.+"`
	if m := s.Selector.String(); m != "" {
		sel += "," + m
	}
	q := fmt.Sprintf("count by (__name__) (last_over_time({%s}[%s]))", sel, s.rangeString())
	vec, err := r.q.vector(ctx, q, s.End)
	if err != nil {
		return nil, 0, err
	}
	if len(vec) > r.o.MaxSeries {
		return nil, 0, fmt.Errorf("query %s: %d metrics, more than --query.max-series=%d", q, len(vec), r.o.MaxSeries)
	}
	var names []string
	n := 0
	for _, smp := range vec {
		name := string(smp.Metric[model.MetricNameLabel])
		if !strings.HasPrefix(name, Prefix) || !model.LegacyValidation.IsValidMetricName(name) {
			return nil, 0, fmt.Errorf("query %s: answer holds a bad metric name %s", q, quoteShort(name))
		}
		c := float64(smp.Value)
		if math.IsNaN(c) || c < 0 || c > MaxMaxSeries {
			return nil, 0, fmt.Errorf("query %s: answer holds a bad series count %v for %s", q, c, name)
		}
		if strings.HasSuffix(name, "_total") || strings.HasSuffix(name, "_bucket") {
			names = append(names, name)
			n += int(c)
		}
	}
	return names, n, nil
}

// discoverHosts lists the hosts that have any kernel_* series on a side.
func (r *runner) discoverHosts(ctx context.Context, s Side) (map[string]bool, error) {
	sel := `__name__=~"` + Prefix + `.+"`
	if m := s.Selector.String(); m != "" {
		sel += "," + m
	}
	q := fmt.Sprintf("count by (%s) (last_over_time({%s}[%s]))", r.o.HostLabel, sel, s.rangeString())
	vec, err := r.q.vector(ctx, q, s.End)
	if err != nil {
		return nil, err
	}
	if len(vec) > r.o.MaxSeries {
		return nil, fmt.Errorf("query %s: %d hosts, more than --query.max-series=%d", q, len(vec), r.o.MaxSeries)
	}
	hosts := make(map[string]bool, len(vec))
	for _, smp := range vec {
		hosts[string(smp.Metric[model.LabelName(r.o.HostLabel)])] = true
	}
	return hosts, nil
}

// A sample is one series' increase: its label set's key, its host, le.
type sample struct {
	key, host string
	le        float64
	v         float64
}

// family fetches one metric on both sides and adds its rows.
func (r *runner) family(ctx context.Context, f *family) error {
	sides := [2]Side{r.o.Base, r.o.New}
	var got [2][]sample
	labels := map[string]map[string]string{}
	var hosts [2]map[string]bool
	skip := map[string]bool{r.o.HostLabel: true, "le": true}
	for _, s := range sides {
		for n := range s.Selector.names() {
			skip[n] = true
		}
	}
	for _, l := range r.o.Ignore {
		skip[l] = true
	}
	for i, s := range sides {
		hosts[i] = map[string]bool{}
		if !f.on[i] {
			continue // a metric the side lacks: 0 on each of its hosts (below)
		}
		sel := f.name + "{" + s.Selector.String() + "}"
		q := fmt.Sprintf("increase(%s[%s])", sel, s.rangeString())
		vec, err := r.q.vector(ctx, q, s.End)
		if err != nil {
			return fmt.Errorf("%s side: %w", sideName(i), err)
		}
		if n := r.fetched.Add(int64(len(vec))); n > int64(r.o.MaxSeries) {
			return fmt.Errorf("%s side: query %s: answers hold %d series so far, more than --query.max-series=%d", sideName(i), q, n, r.o.MaxSeries)
		}
		got[i] = make([]sample, 0, len(vec))
		for _, smp := range vec {
			v := float64(smp.Value)
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				continue
			}
			host := string(smp.Metric[model.LabelName(r.o.HostLabel)])
			le := math.NaN()
			if f.histogram {
				var err error
				if le, err = parseLe(string(smp.Metric["le"])); err != nil {
					return fmt.Errorf("%s side: query %s: %w", sideName(i), q, err)
				}
			}
			key, ls := labelKey(smp.Metric, skip)
			if _, ok := labels[key]; !ok {
				labels[key] = ls
			}
			hosts[i][host] = true
			got[i] = append(got[i], sample{key: key, host: host, le: le, v: v})
		}
	}
	for i := range hosts {
		if len(hosts[i]) == 0 {
			// No series with an increase (one sample in the window, or
			// none left): 0 on each of the side's hosts.
			hosts[i] = r.sideHosts[i]
		}
	}
	var rows []Row
	if f.histogram {
		rows = r.histogramRows(f, got, hosts, labels)
	} else {
		rows = r.counterRows(f.name, KindCounter, got, hosts, labels, nil)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rows = append(r.rows, rows...)
	return nil
}

func parseLe(s string) (float64, error) {
	if s == "" {
		return 0, errors.New("a bucket series without le")
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) {
		return 0, fmt.Errorf("bad le %s", quoteShort(s))
	}
	return v, nil
}

// labelKey is m's labels but skip and the metric name, as a sorted
// k="v",... string and as a map.
func labelKey(m model.Metric, skip map[string]bool) (string, map[string]string) {
	ls := make(map[string]string, len(m))
	names := make([]string, 0, len(m))
	for k, v := range m {
		if k == model.MetricNameLabel || skip[string(k)] {
			continue
		}
		ls[string(k)] = string(v)
		names = append(names, string(k))
	}
	sort.Strings(names)
	var b strings.Builder
	for i, n := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(Matcher{Name: n, Op: "=", Value: ls[n]}.String())
	}
	return b.String(), ls
}

// perHost sums each host's values of one key; hosts with none get 0.
func perHost(samples []sample, key string, hosts map[string]bool, seconds float64, pick func(sample) bool) []float64 {
	sum := make(map[string]float64, len(hosts))
	for h := range hosts {
		sum[h] = 0
	}
	for _, s := range samples {
		if s.key == key && (pick == nil || pick(s)) {
			sum[s.host] += s.v
		}
	}
	out := make([]float64, 0, len(sum))
	for _, v := range sum {
		out = append(out, v/seconds)
	}
	return out
}

// keys lists the keys of both sides, sorted.
func keys(got [2][]sample) []string {
	set := map[string]bool{}
	for i := range got {
		for _, s := range got[i] {
			set[s.key] = true
		}
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// counterRows makes one row per label set of per-host rates. pick, when
// set, chooses the samples counted (a histogram's +Inf buckets).
func (r *runner) counterRows(metric, kind string, got [2][]sample, hosts [2]map[string]bool, labels map[string]map[string]string, pick func(sample) bool) []Row {
	var rows []Row
	for _, key := range keys(got) {
		b := perHost(got[0], key, hosts[0], r.o.Base.seconds(), pick)
		n := perHost(got[1], key, hosts[1], r.o.New.seconds(), pick)
		row := r.row(metric, kind, key, labels[key], b, n)
		extra := ""
		if pick != nil {
			extra = `le="+Inf"`
		}
		row.PromQL = r.graph(func(sel string) string {
			return fmt.Sprintf("sum by (%s) (rate(%s{%s}[5m]))", r.o.HostLabel, metric, sel)
		}, key, extra)
		if kind == KindEvents {
			row.Signal = strings.TrimSuffix(metric, "_bucket") + "_count" + braces(key)
		}
		rows = append(rows, row)
	}
	return rows
}

func braces(key string) string {
	if key == "" {
		return ""
	}
	return "{" + key + "}"
}

// row fills the statistics of one signal from per-host values.
func (r *runner) row(metric, kind, key string, labels map[string]string, base, new []float64) Row {
	delta, p := mannWhitney(base, new)
	mb, mn := median(slices.Clone(base)), median(slices.Clone(new))
	f := factorOf(mb, mn)
	if math.IsNaN(mb) || math.IsNaN(mn) {
		f = math.NaN()
	}
	if labels == nil {
		labels = map[string]string{}
	}
	return Row{
		Signal: metric + braces(key), Metric: metric, Labels: labels, Kind: kind,
		Base: mb, New: mn, Factor: Float(f),
		Agree: agreeing(base, new, f > 1), BaseHosts: len(base), NewHosts: len(new),
		Delta: delta, P: p, Score: score(delta, f),
	}
}

// graph is the PromQL of a row: q of the key's selector on each side,
// joined with or when the sides' selectors differ.
func (r *runner) graph(q func(sel string) string, key, extra string) string {
	sel := func(s Selector) string {
		parts := []string{}
		for _, p := range []string{key, extra, s.String()} {
			if p != "" {
				parts = append(parts, p)
			}
		}
		return strings.Join(parts, ",")
	}
	b, n := sel(r.o.Base.Selector), sel(r.o.New.Selector)
	if b == n {
		return q(b)
	}
	return q(b) + " or " + q(n)
}

// histogramRows makes, per label set, a row of the quantile (of
// Quantiles) that changed most and a row of the event rate.
func (r *runner) histogramRows(f *family, got [2][]sample, hosts [2]map[string]bool, labels map[string]map[string]string) []Row {
	base := strings.TrimSuffix(f.name, "_bucket")
	rows := r.counterRows(f.name, KindEvents, got, hosts, labels, func(s sample) bool { return math.IsInf(s.le, 1) })
	for _, key := range keys(got) {
		var perHostQ [2][][]float64 // side, quantile, host
		var merged [2][]bucket
		for i := range got {
			byHost := map[string][]bucket{}
			byLe := map[float64]float64{}
			for _, s := range got[i] {
				if s.key != key {
					continue
				}
				byHost[s.host] = append(byHost[s.host], bucket{s.le, s.v})
				byLe[s.le] += s.v
			}
			perHostQ[i] = make([][]float64, len(Quantiles))
			for _, bs := range byHost {
				monotone(bs)
				for qi, q := range Quantiles {
					if v := quantile(q, bs); !math.IsNaN(v) {
						perHostQ[i][qi] = append(perHostQ[i][qi], v)
					}
				}
			}
			for le, c := range byLe {
				merged[i] = append(merged[i], bucket{le, c})
			}
			monotone(merged[i])
		}
		var best Row
		for qi, q := range Quantiles {
			row := r.row(base, KindHistogram, key, labels[key], perHostQ[0][qi], perHostQ[1][qi])
			row.Quantile = q
			if qi == 0 || row.Score > best.Score*1.01 { // a tie keeps the lower quantile
				best = row
			}
		}
		for i := range merged {
			qs := make([]Float, len(Quantiles))
			for qi, q := range Quantiles {
				qs[qi] = Float(quantile(q, merged[i]))
			}
			if i == 0 {
				best.BaseQuantiles = qs
			} else {
				best.NewQuantiles = qs
			}
		}
		ks, emd := distances(merged[0], merged[1])
		k, e := Float(ks), Float(emd)
		best.KS, best.EMD = &k, &e
		q := best.Quantile
		best.PromQL = r.graph(func(sel string) string {
			return fmt.Sprintf("histogram_quantile(%g, sum by (%s, le) (rate(%s{%s}[5m])))", q, r.o.HostLabel, f.name, sel)
		}, key, "")
		rows = append(rows, best)
	}
	return rows
}

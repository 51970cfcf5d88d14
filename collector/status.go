// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"strings"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/prometheus/client_golang/prometheus"
)

// State is what the exporter knows about one config: whether it runs and,
// when it does not, why.
type State struct {
	Name string
	// Source is "bundled" or the YAML path.
	Source string
	// Loading is true until the config's load ends (then Up or Reason is
	// set).
	Loading  bool
	Up       bool
	Reason   string
	Programs []ProgramState
	// Alternatives reports, for each alternatives group of the config,
	// which choice is in use and why earlier ones were passed over.
	Alternatives []AlternativeState
	// Collector is set while the config is up.
	Collector *Config
	// OverBudget is the resource ("cpu", "memory") whose budget took the
	// config down, "" when none did.
	OverBudget string
	// Spans says where the config's spans go (spans.Destination), "" for
	// a config without a tracing section; SpansSent is false when
	// nothing chose a destination for them.
	Spans     string
	SpansSent bool
	// Warnings are what an author should fix although the config loads
	// (loader.LicenseWarning), shown by --config.check and logged.
	Warnings []string
}

// ProgramState is one BPF program of a config.
type ProgramState struct {
	Name     string
	Section  string
	Attached bool
	Prog     *ebpf.Program
	// Alternative is the alternatives group the program was chosen from
	// ("" when it is in none).
	Alternative string
}

// AlternativeState is how one alternatives group was resolved.
type AlternativeState struct {
	Name string
	// Chosen is the choice in use (programs joined by "+"), "" when none
	// works.
	Chosen string
	// Passed lists the choices tried and rejected, as "<choice>: <why>".
	Passed []string
}

// Status reports every config's state as self-metrics:
//
//	kernel_exporter_config_up{config}                      1 or 0 (0 while loading)
//	kernel_exporter_config_loading{config}                 1 until the config's load ends
//	kernel_exporter_config_error_info{config,reason}       1 for a config that is down
//	kernel_exporter_program_attached{config,program,section,alternative}
//	kernel_exporter_program_run_seconds_total{config,program}  (RunFigures)
//	kernel_exporter_program_runs_total{config,program}         (RunFigures)
//
// and, for configs that are up, the scrape self-metrics of their collector
// (scrape duration and entries read of the last read, decoder errors, series
// dropped, series expired by a ttl) and the health of their maps
// (maphealth.go: entries, max_entries, memory and failed inserts per map).
//
// Label values (config names, reasons, paths) come from outside and are
// made valid UTF-8 (invalid bytes become U+FFFD) so that one odd name never
// breaks the scrape.
//
// Run time and count are those the host BPF collector serves for the same
// program (RunFigures: kernel_bpf_program_run_seconds_total and
// _runs_total, exact while statistics are on all the time, else estimated
// from the CPU budget's windows), so that one program has one figure.
// Without it (--no-collector.bpf) they are the kernel's raw counts, which
// advance only while run-time statistics are on.
type Status struct {
	mu     sync.Mutex
	states []*State
	// figures is RunFigures (nil: the kernel's raw counts).
	figures func(p *ebpf.Program) (runSeconds, runs float64, ok bool)
}

// RunFigures makes the run time and count of each program those fn
// returns (the host BPF collector's, bpfstats.Collector.ProgramFigures);
// a program for which fn has none (not listed yet, or in the collector's
// overflow) has no run series. nil keeps the kernel's raw counts.
func (s *Status) RunFigures(fn func(p *ebpf.Program) (runSeconds, runs float64, ok bool)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.figures = fn
}

var (
	upDesc = prometheus.NewDesc(selfNamespace+"_config_up",
		"Whether the config loaded, attached and serves metrics (1) or failed (0).", []string{"config"}, nil)
	loadingDesc = prometheus.NewDesc(selfNamespace+"_config_loading",
		"Whether the config is still loading (1) or its load has ended (0).", []string{"config"}, nil)
	errorInfoDesc = prometheus.NewDesc(selfNamespace+"_config_error_info",
		"Why a config is down; always 1.", []string{"config", "reason"}, nil)
	attachedDesc = prometheus.NewDesc(selfNamespace+"_program_attached",
		"Whether a BPF program is attached to its hook; alternative is the alternatives group it was chosen from (empty: none).", []string{"config", "program", "section", "alternative"}, nil)
	runTimeDesc = prometheus.NewDesc(selfNamespace+"_program_run_seconds_total",
		"Time the kernel spent running a BPF program of a config, summed over CPUs: the figure kernel_bpf_program_run_seconds_total serves for the same program "+
			"(exact while BPF run-time statistics are on all the time, else estimated from the CPU budget's measuring windows; kernel_bpf_stats_sampled_ratio says which). "+
			"With --no-collector.bpf, the kernel's run_time_ns as it is, which advances only while statistics are on (kernel.bpf_stats_enabled=1, --bpf.stats, or the budget's windows).", []string{"config", "program"}, nil)
	runCountDesc = prometheus.NewDesc(selfNamespace+"_program_runs_total",
		"Runs of a BPF program of a config: the figure kernel_bpf_program_runs_total serves for the same program (measured as kernel_exporter_program_run_seconds_total says). "+
			"With --no-collector.bpf, the kernel's run_cnt as it is, which advances only while statistics are on.", []string{"config", "program"}, nil)
)

// Add records a config's state.
func (s *Status) Add(st *State) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.states = append(s.states, st)
}

// Update changes a state added with Add, under the lock that States takes,
// so that readers never see a half-written state.
func (s *Status) Update(st *State, fn func(*State)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(st)
}

// States returns a snapshot of all states, in the order they were added.
func (s *Status) States() []State {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]State, len(s.states))
	for i, st := range s.states {
		out[i] = *st
	}
	return out
}

// Describe sends the status descriptors.
func (s *Status) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{upDesc, loadingDesc, errorInfoDesc, attachedDesc, runTimeDesc, runCountDesc,
		scrapeDurationDesc, entriesReadDesc, decoderErrorsDesc, seriesOverflowDesc, seriesExpiredDesc, perfDroppedDesc, bpfDroppedDesc} {
		ch <- d
	}
	for _, d := range mapHealthDescs {
		ch <- d
	}
}

// Read reads every config that is up, concurrently, and returns their
// snapshots in config order. Call it before gathering a registry that
// holds s, so that kernel_exporter_scrape_duration_seconds and
// kernel_exporter_map_entries_read describe these reads, not the previous
// ones. The configs' own metric names are claimed in that registry apart,
// with Config.Descs, so that it still refuses names that clash.
func (s *Status) Read() []*Snapshot {
	states := s.States()
	snaps := make([]*Snapshot, len(states))
	var wg sync.WaitGroup
	for i, st := range states {
		if st.Collector != nil {
			wg.Go(func() { snaps[i] = st.Collector.Read() })
		}
	}
	wg.Wait()
	out := snaps[:0]
	for _, sn := range snaps {
		if sn != nil {
			out = append(out, sn)
		}
	}
	return out
}

// Collect sends the status metrics and the self-metrics of every config.
func (s *Status) Collect(ch chan<- prometheus.Metric) {
	s.collect(ch, s.States())
}

func (s *Status) collect(ch chan<- prometheus.Metric, states []State) {
	s.mu.Lock()
	figures := s.figures
	s.mu.Unlock()
	for _, st := range states {
		up, loading := 0.0, 0.0
		switch {
		case st.Up:
			up = 1
		case st.Loading:
			loading = 1
		default:
			send(ch, errorInfoDesc, prometheus.GaugeValue, 1, st.Name, st.Reason)
		}
		send(ch, upDesc, prometheus.GaugeValue, up, st.Name)
		send(ch, loadingDesc, prometheus.GaugeValue, loading, st.Name)
		if st.Collector != nil {
			st.Collector.collectSelf(ch)
		}
		for _, p := range st.Programs {
			att := 0.0
			if p.Attached {
				att = 1
			}
			send(ch, attachedDesc, prometheus.GaugeValue, att, st.Name, p.Name, p.Section, p.Alternative)
			if p.Prog == nil || !p.Attached {
				continue
			}
			if figures != nil {
				if secs, runs, ok := figures(p.Prog); ok {
					send(ch, runTimeDesc, prometheus.CounterValue, secs, st.Name, p.Name)
					send(ch, runCountDesc, prometheus.CounterValue, runs, st.Name, p.Name)
				}
			} else if stats, err := p.Prog.Stats(); err == nil {
				send(ch, runTimeDesc, prometheus.CounterValue, stats.Runtime.Seconds(), st.Name, p.Name)
				send(ch, runCountDesc, prometheus.CounterValue, float64(stats.RunCount), st.Name, p.Name)
			}
		}
	}
}

// LabelValue makes s a valid label value: invalid UTF-8 bytes become
// U+FFFD. Label values from outside (names, paths, reasons) go through it.
func LabelValue(s string) string {
	return strings.ToValidUTF8(s, "\uFFFD")
}

// send sends a constant metric with labels made valid; a metric that still
// cannot be built is left out rather than failing the scrape.
func send(ch chan<- prometheus.Metric, desc *prometheus.Desc, vt prometheus.ValueType, v float64, labels ...string) {
	for i, l := range labels {
		labels[i] = LabelValue(l)
	}
	if m, err := prometheus.NewConstMetric(desc, vt, v, labels...); err == nil {
		ch <- m
	}
}

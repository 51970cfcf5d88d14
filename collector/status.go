package collector

import (
	"sync"

	"github.com/cilium/ebpf"
	"github.com/prometheus/client_golang/prometheus"
)

// State is what the exporter knows about one config: whether it runs and,
// when it does not, why.
type State struct {
	Name string
	// Source is "bundled" or the YAML path.
	Source   string
	Up       bool
	Reason   string
	Programs []ProgramState
	// Alternatives reports, for each alternatives group of the config,
	// which choice is in use and why earlier ones were passed over.
	Alternatives []AlternativeState
	// Collector is set while the config is up.
	Collector *Config
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
//	kernel_exporter_config_up{config}                      1 or 0
//	kernel_exporter_config_error_info{config,reason}       1 for a config that is down
//	kernel_exporter_program_attached{config,program,section,alternative}
//	kernel_exporter_program_run_seconds_total{config,program}  (kernel BPF stats)
//	kernel_exporter_program_runs_total{config,program}         (kernel BPF stats)
//
// and, for configs that are up, the scrape self-metrics of their collector
// (scrape duration and entries read of the last read, decoder errors, series
// dropped).
//
// Run time and count come from the kernel's per-program statistics, which
// only advance while kernel.bpf_stats_enabled is 1.
type Status struct {
	mu     sync.Mutex
	states []*State
}

var (
	upDesc = prometheus.NewDesc(selfNamespace+"_config_up",
		"Whether the config loaded, attached and serves metrics (1) or failed (0).", []string{"config"}, nil)
	errorInfoDesc = prometheus.NewDesc(selfNamespace+"_config_error_info",
		"Why a config is down; always 1.", []string{"config", "reason"}, nil)
	attachedDesc = prometheus.NewDesc(selfNamespace+"_program_attached",
		"Whether a BPF program is attached to its hook; alternative is the alternatives group it was chosen from (empty: none).", []string{"config", "program", "section", "alternative"}, nil)
	runTimeDesc = prometheus.NewDesc(selfNamespace+"_program_run_seconds_total",
		"Time the kernel spent running a BPF program (needs kernel.bpf_stats_enabled=1).", []string{"config", "program"}, nil)
	runCountDesc = prometheus.NewDesc(selfNamespace+"_program_runs_total",
		"Times the kernel ran a BPF program (needs kernel.bpf_stats_enabled=1).", []string{"config", "program"}, nil)
)

// Add records a config's state.
func (s *Status) Add(st *State) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.states = append(s.states, st)
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
	for _, d := range []*prometheus.Desc{upDesc, errorInfoDesc, attachedDesc, runTimeDesc, runCountDesc,
		scrapeDurationDesc, entriesReadDesc, decoderErrorsDesc, seriesDroppedDesc} {
		ch <- d
	}
}

// Collect sends the status metrics.
func (s *Status) Collect(ch chan<- prometheus.Metric) {
	for _, st := range s.States() {
		up := 0.0
		if st.Up {
			up = 1
		} else {
			ch <- prometheus.MustNewConstMetric(errorInfoDesc, prometheus.GaugeValue, 1, st.Name, st.Reason)
		}
		ch <- prometheus.MustNewConstMetric(upDesc, prometheus.GaugeValue, up, st.Name)
		if st.Collector != nil {
			st.Collector.collectSelf(ch)
		}
		for _, p := range st.Programs {
			att := 0.0
			if p.Attached {
				att = 1
			}
			ch <- prometheus.MustNewConstMetric(attachedDesc, prometheus.GaugeValue, att, st.Name, p.Name, p.Section, p.Alternative)
			if p.Prog == nil || !p.Attached {
				continue
			}
			if stats, err := p.Prog.Stats(); err == nil {
				ch <- prometheus.MustNewConstMetric(runTimeDesc, prometheus.CounterValue, stats.Runtime.Seconds(), st.Name, p.Name)
				ch <- prometheus.MustNewConstMetric(runCountDesc, prometheus.CounterValue, float64(stats.RunCount), st.Name, p.Name)
			}
		}
	}
}

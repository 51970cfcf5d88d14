// SPDX-License-Identifier: Apache-2.0

// Package budget bounds what a config's BPF programs may cost the host: the
// CPU time its programs run in the kernel and the kernel memory its maps
// hold. A config that goes over a budget is stopped (refused before its
// maps are created, or detached) while the others keep serving.
package budget

import "github.com/prometheus/client_golang/prometheus"

// Resources a budget bounds: the resource label of
// kernel_exporter_budget_exceeded_total.
const (
	ResourceCPU    = "cpu"
	ResourceMemory = "memory"
)

// Exceeded counts the times a config went over a budget:
//
//	kernel_exporter_budget_exceeded_total{config,resource}
//
// resource is ResourceCPU (the config was detached) or ResourceMemory (its
// load was refused). It is a prometheus.Collector; the exporter registers
// it once.
type Exceeded struct {
	vec *prometheus.CounterVec
}

// NewExceeded returns a counter with no series yet.
func NewExceeded() *Exceeded {
	return &Exceeded{vec: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kernel_exporter_budget_exceeded_total",
		Help: "Times a config went over its CPU budget (and was detached) or the memory budget (and was refused), by resource.",
	}, []string{"config", "resource"})}
}

// Inc counts one trip of config over the budget of resource.
func (e *Exceeded) Inc(config, resource string) {
	e.vec.WithLabelValues(config, resource).Inc()
}

// Describe implements prometheus.Collector.
func (e *Exceeded) Describe(ch chan<- *prometheus.Desc) { e.vec.Describe(ch) }

// Collect implements prometheus.Collector.
func (e *Exceeded) Collect(ch chan<- prometheus.Metric) { e.vec.Collect(ch) }

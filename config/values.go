// SPDX-License-Identifier: Apache-2.0

package config

import (
	"fmt"
	"regexp"
)

// Value kinds beyond a counter's u64 (see docs/configuration.md, "Gauges",
// "Struct values" and "Per-CPU maps").
//
// A gauge reads a map's value as the current value: a queue depth, an
// in-flight count, a last-seen timestamp. Without values, the map's value
// is one integer of 1, 2, 4 or 8 bytes, unsigned unless signed is set.
//
// A counter or gauge with values reads a map whose value is a struct: each
// entry of values names a numeric field of the struct (found in the
// object's BTF, with its offset, size and signedness) and the metric it
// becomes. The metric's own name is then the map's name only. One read of
// the map serves every field.
//
// Per-CPU maps (BPF_MAP_TYPE_PERCPU_HASH, PERCPU_ARRAY, LRU_PERCPU_HASH)
// hold one value per possible CPU. per_cpu: sum (the default) adds them
// up; per_cpu: label exports one series per CPU under a "cpu" label
// (CPULabel), for counters, gauges and histograms alike.

// Gauge turns a map of key → integer into a gauge per decoded label set.
// Keys that decode to the same label set are added up.
type Gauge struct {
	// Name is both the BPF map name and the metric name (after the
	// namespace); with Values, only the map name.
	Name   string  `yaml:"name"`
	Help   string  `yaml:"help"`
	Labels []Label `yaml:"labels"`
	// Values lists the fields of a struct value that become metrics.
	Values []Value `yaml:"values"`
	// Signed reads the map's value as a two's complement integer; without
	// Values only (a field's signedness comes from BTF).
	Signed bool `yaml:"signed"`
	// PerCPU is how a per-CPU map's values are read: sum or label.
	PerCPU    PerCPU `yaml:"per_cpu"`
	MaxSeries int    `yaml:"max_series"`
	// TTL deletes keys whose value has not changed for this long. A
	// gauge's value is a level, not a sum: a key deleted as it changed is
	// not carried (see collector/expire.go); the program writes it again.
	TTL TTL `yaml:"ttl"`
}

// Value is one field of a struct map value and the metric it becomes.
type Value struct {
	// Field is the struct member's name in the value's BTF.
	Field string `yaml:"field"`
	// Name is the metric name (after the namespace).
	Name string `yaml:"name"`
	// Help defaults to the help of the metric that lists the value.
	Help string `yaml:"help"`
}

// PerCPU says how the values of a per-CPU map are read.
type PerCPU string

const (
	// PerCPUSum adds the CPUs' values up (the default).
	PerCPUSum PerCPU = "sum"
	// PerCPULabel exports each CPU's value under a CPULabel label.
	PerCPULabel PerCPU = "label"
)

// CPULabel is the label that holds the CPU number with per_cpu: label.
const CPULabel = "cpu"

// MaxValues bounds the values of one metric; each counts as a metric
// towards MaxMetrics.
const MaxValues = 64

// fieldRe is what a C struct member name looks like.
var fieldRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// checkNameFunc checks a metric's name and help and claims the name.
type checkNameFunc func(path, name, help string) error

// validateValues checks a metric's values (at path, as in
// "metrics.counters[0]"), and its per_cpu setting, labels and ttl against
// them.
func (c *Config) validateValues(path, name string, values []Value, perCPU PerCPU, labels []Label, ttl TTL, checkName checkNameFunc) error {
	if err := c.validatePerCPU(path, name, perCPU, labels, ttl); err != nil {
		return err
	}
	if len(values) == 0 {
		return nil
	}
	if len(values) > MaxValues {
		return c.Errorf(path+".values", "metric %s: %d values, more than the limit of %d", Quote(name), len(values), MaxValues)
	}
	if ttl != "" {
		return c.Errorf(path+".ttl", "metric %s: ttl is not supported on a map with values (its fields would expire apart)", Quote(name))
	}
	fields := map[string]bool{}
	for i, v := range values {
		vp := fmt.Sprintf("%s.values[%d]", path, i)
		if v.Field == "" {
			return c.Errorf(vp+".field", "metric %s: missing field name", Quote(name))
		}
		if len(v.Field) > MaxNameLen || !fieldRe.MatchString(v.Field) {
			return c.Errorf(vp+".field", "metric %s: invalid field name %s", Quote(name), Quote(v.Field))
		}
		if fields[v.Field] {
			return c.Errorf(vp+".field", "metric %s: field %s listed twice", Quote(name), Quote(v.Field))
		}
		fields[v.Field] = true
		help := v.Help
		if help == "" {
			help = "-" // the metric's help, checked already
		}
		if err := checkName(vp, v.Name, help); err != nil {
			return err
		}
	}
	return nil
}

// validatePerCPU checks per_cpu; whether the map is per-CPU is checked
// when the config is compiled against its object.
func (c *Config) validatePerCPU(path, name string, perCPU PerCPU, labels []Label, ttl TTL) error {
	switch perCPU {
	case "", PerCPUSum:
		return nil
	case PerCPULabel:
	default:
		return c.Errorf(path+".per_cpu", "metric %s: want sum or label, got %s", Quote(name), Quote(string(perCPU)))
	}
	for i, l := range labels {
		if l.Name == CPULabel {
			return c.Errorf(fmt.Sprintf("%s.labels[%d].name", path, i), "metric %s: label %q is taken by per_cpu: label", Quote(name), CPULabel)
		}
	}
	if ttl != "" {
		return c.Errorf(path+".ttl", "metric %s: ttl is not supported with per_cpu: label (a key's CPUs expire together; sum them instead)", Quote(name))
	}
	return nil
}

// validateGauges checks the gauges.
func (c *Config) validateGauges(budget *decoderBudget, checkName checkNameFunc) error {
	for i := range c.Metrics.Gauges {
		g := &c.Metrics.Gauges[i]
		path := fmt.Sprintf("metrics.gauges[%d]", i)
		if len(g.Values) > 0 {
			if err := c.checkMapName(path, g.Name, g.Help); err != nil {
				return err
			}
			if g.Signed {
				return c.Errorf(path+".signed", "metric %s: with values, each field's signedness comes from BTF", Quote(g.Name))
			}
		} else if err := checkName(path, g.Name, g.Help); err != nil {
			return err
		}
		if err := c.checkMaxSeries(path, g.MaxSeries); err != nil {
			return err
		}
		if _, err := c.ParseTTL(path, g.Name, g.TTL); err != nil {
			return err
		}
		if err := c.validateValues(path, g.Name, g.Values, g.PerCPU, g.Labels, g.TTL, checkName); err != nil {
			return err
		}
		if err := c.validateLabels(path, g.Labels, false, false, budget); err != nil {
			return err
		}
	}
	return nil
}

// checkMapName checks the name of a metric with values, which names its
// map only (the values name the metrics), and its help (the values'
// default).
func (c *Config) checkMapName(path, name, help string) error {
	if name == "" {
		return c.Errorf(path+".name", "missing map name")
	}
	if len(name) > MaxNameLen || !metricNameRe.MatchString(name) {
		return c.Errorf(path+".name", "invalid map name %s", Quote(name))
	}
	if help == "" {
		return c.Errorf(path+".help", "missing help for metric %s", Quote(name))
	}
	if len(help) > MaxHelp {
		return c.Errorf(path+".help", "longer than %d bytes (%d)", MaxHelp, len(help))
	}
	return nil
}

// metricCount is the number of metrics the config exports: each value
// counts as one.
func (m *Metrics) metricCount() int {
	n := len(m.Histograms)
	for _, c := range m.Counters {
		n += max(len(c.Values), 1)
	}
	for _, g := range m.Gauges {
		n += max(len(g.Values), 1)
	}
	return n
}

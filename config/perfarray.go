// SPDX-License-Identifier: Apache-2.0

package config

import (
	"time"
)

// Bounds of a perf_event_array counter's flush_interval. The default is
// ebpf_exporter's (an hour). Below a second, series would vanish between
// two scrapes of any ordinary scrape interval; above 30 days, restarts
// of the exporter reset the counter anyway.
const (
	DefaultFlushInterval = time.Hour
	MinFlushInterval     = time.Second
	MaxFlushInterval     = 30 * 24 * time.Hour
)

// validatePerfEventArray checks the perf_event_array and flush_interval
// keys of the counter at path: flush_interval only with
// perf_event_array: true, in range; and none of the keys that describe a
// map's values or entries (values, per_cpu, ttl, skip_zero), which a stream of
// records has not.
func (c *Config) validatePerfEventArray(path string, m *Counter) error {
	if !m.PerfEventArray {
		if m.FlushInterval != "" {
			return c.Errorf(path+".flush_interval", "metric %s: flush_interval needs perf_event_array: true", Quote(m.Name))
		}
		return nil
	}
	switch {
	case len(m.Values) > 0:
		return c.Errorf(path+".values", "metric %s: values do not combine with perf_event_array: each record counts 1", Quote(m.Name))
	case m.PerCPU != "":
		return c.Errorf(path+".per_cpu", "metric %s: per_cpu does not combine with perf_event_array", Quote(m.Name))
	case m.TTL != "":
		return c.Errorf(path+".ttl", "metric %s: ttl does not combine with perf_event_array (series are reset every flush_interval)", Quote(m.Name))
	case m.SkipZero:
		return c.Errorf(path+".skip_zero", "metric %s: skip_zero does not combine with perf_event_array (a record counts 1)", Quote(m.Name))
	}
	_, err := c.ParseFlushInterval(path, m)
	return err
}

// ParseFlushInterval returns the flush interval of the perf_event_array
// counter m at path: DefaultFlushInterval when unset, else a Go duration
// from MinFlushInterval to MaxFlushInterval. Its error is an *Error
// naming the file, the line, the field (<path>.flush_interval), the
// metric and the value (as Quote shows it).
func (c *Config) ParseFlushInterval(path string, m *Counter) (time.Duration, error) {
	if m.FlushInterval == "" {
		return DefaultFlushInterval, nil
	}
	d, err := time.ParseDuration(m.FlushInterval)
	if err != nil {
		return 0, c.Errorf(path+".flush_interval", "metric %s: want a duration such as \"10m\" or \"1h\" (units ms, s, m, h), got %s", Quote(m.Name), Quote(m.FlushInterval))
	}
	if d < MinFlushInterval || d > MaxFlushInterval {
		return 0, c.Errorf(path+".flush_interval", "metric %s: must be %v to %v (30 days), got %s", Quote(m.Name), MinFlushInterval, MaxFlushInterval, Quote(m.FlushInterval))
	}
	return d, nil
}

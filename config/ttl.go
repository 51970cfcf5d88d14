// SPDX-License-Identifier: Apache-2.0

package config

import (
	"time"
)

// Bounds of a metric's ttl. Below a second, idle keys would be deleted
// between two increments of any ordinary event; above 30 days, the key
// would outlive the exporter's restarts (which empty the maps) anyway.
const (
	MinTTL = time.Second
	MaxTTL = 30 * 24 * time.Hour
)

// TTL is a metric's series lifetime: a map key whose value has not changed
// for this long is deleted from the BPF map, and its series leaves /metrics
// once every key of the series is gone (see collector/expire.go). It is
// written as a Go duration ("30s", "5m", "1h30m"); empty means the keys
// never expire (the behaviour of configs without ttl).
type TTL string

// ParseTTL returns the ttl of the metric name at path (as in
// "metrics.counters[0]"): 0 when unset, else a duration from MinTTL to
// MaxTTL. Its error is an *Error naming the file, the line, the field
// (<path>.ttl), the metric and the value (as Quote shows it).
func (c *Config) ParseTTL(path, name string, ttl TTL) (time.Duration, error) {
	if ttl == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(string(ttl))
	if err != nil {
		return 0, c.Errorf(path+".ttl", "metric %s: want a duration such as \"5m\" or \"1h\" (units ms, s, m, h), got %s", Quote(name), Quote(string(ttl)))
	}
	if d < MinTTL || d > MaxTTL {
		return 0, c.Errorf(path+".ttl", "metric %s: must be %v to %v (30 days), got %s", Quote(name), MinTTL, MaxTTL, Quote(string(ttl)))
	}
	return d, nil
}

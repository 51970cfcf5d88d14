package config

import (
	"fmt"
	"regexp"
	"sort"
)

var metricNameRe = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// BucketLabel is the name of the label that holds a histogram's slot.
const BucketLabel = "bucket"

func (c *Config) validate() error {
	if c.Namespace != "" && !metricNameRe.MatchString(c.Namespace) {
		return c.Errorf("namespace", "invalid metric namespace %q", c.Namespace)
	}
	if len(c.Metrics.Counters)+len(c.Metrics.Histograms) == 0 {
		return c.Errorf("metrics", "no counters or histograms defined")
	}
	seen := map[string]string{}
	checkName := func(path, name, help string) error {
		if name == "" {
			return c.Errorf(path+".name", "missing metric name")
		}
		if !metricNameRe.MatchString(name) {
			return c.Errorf(path+".name", "invalid metric name %q", name)
		}
		if prev, ok := seen[name]; ok {
			return c.Errorf(path+".name", "metric %q already defined at %s", name, prev)
		}
		seen[name] = path
		if help == "" {
			return c.Errorf(path+".help", "missing help for metric %q", name)
		}
		return nil
	}
	for i, m := range c.Metrics.Counters {
		path := fmt.Sprintf("metrics.counters[%d]", i)
		if err := checkName(path, m.Name, m.Help); err != nil {
			return err
		}
		if m.PerfEventArray {
			return c.Errorf(path+".perf_event_array", "perf event arrays are not supported; keep counts in a map")
		}
		if m.MaxSeries < 0 {
			return c.Errorf(path+".max_series", "must be >= 0, got %d", m.MaxSeries)
		}
		if err := c.validateLabels(path, m.Labels); err != nil {
			return err
		}
	}
	for i, h := range c.Metrics.Histograms {
		path := fmt.Sprintf("metrics.histograms[%d]", i)
		if err := checkName(path, h.Name, h.Help); err != nil {
			return err
		}
		if err := c.validateHistogram(path, &h); err != nil {
			return err
		}
	}
	if err := c.validateProbes(); err != nil {
		return err
	}
	if err := c.validateAlternatives(); err != nil {
		return err
	}
	return nil
}

func (c *Config) validateHistogram(path string, h *Histogram) error {
	switch h.BucketType {
	case BucketExp2, BucketExp2Zero, BucketLinear:
		if h.BucketMin < 0 {
			return c.Errorf(path+".bucket_min", "must be >= 0, got %d", h.BucketMin)
		}
		if h.BucketMax < h.BucketMin {
			return c.Errorf(path+".bucket_max", "must be >= bucket_min (%d), got %d", h.BucketMin, h.BucketMax)
		}
		if h.BucketType != BucketLinear && h.BucketMax > 63 {
			return c.Errorf(path+".bucket_max", "must be <= 63 for %s buckets, got %d", h.BucketType, h.BucketMax)
		}
		if len(h.BucketKeys) > 0 {
			return c.Errorf(path+".bucket_keys", "only allowed with bucket_type fixed, not %s", h.BucketType)
		}
	case BucketFixed:
		if len(h.BucketKeys) == 0 {
			return c.Errorf(path+".bucket_type", "fixed buckets need bucket_keys")
		}
		if !sort.Float64sAreSorted(h.BucketKeys) {
			return c.Errorf(path+".bucket_keys", "must be ascending, got %v", h.BucketKeys)
		}
		for i, k := range h.BucketKeys {
			if k < 0 || k != float64(uint64(k)) {
				return c.Errorf(fmt.Sprintf("%s.bucket_keys[%d]", path, i), "must be a non-negative integer slot, got %v", k)
			}
		}
	case "":
		return c.Errorf(path+".bucket_type", "missing bucket_type (want exp2, exp2zero, linear or fixed)")
	default:
		return c.Errorf(path+".bucket_type", "unknown bucket type %q (want exp2, exp2zero, linear or fixed)", h.BucketType)
	}
	if h.BucketMultiplier < 0 {
		return c.Errorf(path+".bucket_multiplier", "must be >= 0, got %v", h.BucketMultiplier)
	}
	if h.SumBucket != nil && *h.SumBucket < 0 {
		return c.Errorf(path+".sum_bucket", "must be >= 0, got %d", *h.SumBucket)
	}
	if h.MaxSeries < 0 {
		return c.Errorf(path+".max_series", "must be >= 0, got %d", h.MaxSeries)
	}
	if len(h.Labels) == 0 || h.Labels[len(h.Labels)-1].Name != BucketLabel {
		for i, l := range h.Labels {
			if l.Name == BucketLabel {
				return c.Errorf(fmt.Sprintf("%s.labels[%d]", path, i), "the %q label must be the last label", BucketLabel)
			}
		}
		return c.Errorf(path+".labels", "histogram %q has no %q label: its key must end with the bucket slot", h.Name, BucketLabel)
	}
	if s := h.Labels[len(h.Labels)-1].Size; s != 1 && s != 2 && s != 4 && s != 8 {
		return c.Errorf(fmt.Sprintf("%s.labels[%d].size", path, len(h.Labels)-1), "bucket label size must be 1, 2, 4 or 8 bytes, got %d", s)
	}
	return c.validateLabels(path, h.Labels)
}

func (c *Config) validateLabels(path string, labels []Label) error {
	names := map[string]bool{}
	for i, l := range labels {
		lp := fmt.Sprintf("%s.labels[%d]", path, i)
		if l.Name == "" {
			return c.Errorf(lp+".name", "missing label name")
		}
		if !metricNameRe.MatchString(l.Name) {
			return c.Errorf(lp+".name", "invalid label name %q", l.Name)
		}
		if names[l.Name] {
			return c.Errorf(lp+".name", "duplicate label %q", l.Name)
		}
		names[l.Name] = true
		if l.Size <= 0 {
			return c.Errorf(lp+".size", "must be > 0, got %d", l.Size)
		}
		if l.Padding < 0 {
			return c.Errorf(lp+".padding", "must be >= 0, got %d", l.Padding)
		}
		if len(l.Decoders) == 0 && l.Name != BucketLabel {
			return c.Errorf(lp+".decoders", "label %q has no decoders", l.Name)
		}
		for j, d := range l.Decoders {
			if d.Name == "" {
				return c.Errorf(fmt.Sprintf("%s.decoders[%d].name", lp, j), "missing decoder name")
			}
		}
	}
	return nil
}

// KeySize returns the number of key bytes the labels consume.
func KeySize(labels []Label) int {
	n := 0
	for _, l := range labels {
		n += l.Size + l.Padding
	}
	return n
}

// MaxSeries returns the series limit of a metric given its max_series value.
func MaxSeries(v int) int {
	if v == 0 {
		return DefaultMaxSeries
	}
	return v
}

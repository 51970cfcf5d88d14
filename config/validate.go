// SPDX-License-Identifier: Apache-2.0

package config

import (
	"fmt"
	"math"
	"regexp"
	"regexp/syntax"
	"strings"
	"unicode/utf8"
)

var metricNameRe = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// spanAttrNameRe is what a span label (an OpenTelemetry attribute, never a
// Prometheus label) may be called: a label name that may also hold dots,
// as in the reference's sched-trace example's "cpu.orig".
var spanAttrNameRe = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_.]*$`)

// BucketLabel is the name of the label that holds a histogram's slot.
const BucketLabel = "bucket"

// ReservedLabel reports why a label name is reserved by Prometheus, or ""
// when it is not: "le" is the bucket bound of a histogram, "quantile" that
// of a summary, and names starting with "__" are internal to Prometheus.
// A histogram with a label "le" would corrupt the whole exposition.
func ReservedLabel(name string, histogram bool) string {
	switch {
	case strings.HasPrefix(name, "__"):
		return "label names starting with __ are reserved by Prometheus"
	case name == "quantile":
		return `"quantile" is reserved by Prometheus for summaries`
	case name == "le" && histogram:
		return `"le" is reserved by Prometheus for histogram buckets`
	}
	return ""
}

// CheckNamespace checks a metric namespace as the namespace key is
// checked: at most MaxNamespace bytes of [a-zA-Z_][a-zA-Z0-9_]*. The error
// quotes the value as Quote does.
func CheckNamespace(ns string) error {
	if len(ns) > MaxNamespace {
		return fmt.Errorf("longer than %d bytes (%d)", MaxNamespace, len(ns))
	}
	if !metricNameRe.MatchString(ns) {
		return fmt.Errorf("invalid metric namespace %s", Quote(ns))
	}
	return nil
}

func (c *Config) validate() error {
	if len(c.Namespace) > MaxNamespace {
		return c.Errorf("namespace", "longer than %d bytes (%d)", MaxNamespace, len(c.Namespace))
	}
	if c.Namespace != "" && !metricNameRe.MatchString(c.Namespace) {
		return c.Errorf("namespace", "invalid metric namespace %s", Quote(c.Namespace))
	}
	n := c.Metrics.metricCount()
	if n == 0 && len(c.Tracing.Spans) == 0 {
		return c.Errorf("metrics", "no counters, gauges or histograms defined (nor tracing spans)")
	}
	if n > MaxMetrics {
		return c.Errorf("metrics", "%d metrics, more than the limit of %d", n, MaxMetrics)
	}
	seen := map[string]string{}
	checkName := func(path, name, help string) error {
		if name == "" {
			return c.Errorf(path+".name", "missing metric name")
		}
		if len(name) > MaxNameLen {
			return c.Errorf(path+".name", "metric name longer than %d bytes (%d)", MaxNameLen, len(name))
		}
		if !metricNameRe.MatchString(name) {
			return c.Errorf(path+".name", "invalid metric name %s", Quote(name))
		}
		if prev, ok := seen[name]; ok {
			return c.Errorf(path+".name", "metric %s already defined at %s", Quote(name), prev)
		}
		seen[name] = path
		if help == "" {
			return c.Errorf(path+".help", "missing help for metric %s", Quote(name))
		}
		if len(help) > MaxHelp {
			return c.Errorf(path+".help", "longer than %d bytes (%d)", MaxHelp, len(help))
		}
		if !utf8.ValidString(help) {
			return c.Errorf(path+".help", "not valid UTF-8")
		}
		return nil
	}
	budget := &decoderBudget{regexps: MaxRegexpsTotal, regexpCost: MaxRegexpCostTotal, staticMap: MaxStaticMapTotal}
	for i, m := range c.Metrics.Counters {
		path := fmt.Sprintf("metrics.counters[%d]", i)
		if len(m.Values) > 0 {
			if err := c.checkMapName(path, m.Name, m.Help); err != nil {
				return err
			}
		} else if err := checkName(path, m.Name, m.Help); err != nil {
			return err
		}
		if err := c.validateValues(path, m.Name, m.Values, m.PerCPU, m.Labels, m.TTL, checkName); err != nil {
			return err
		}
		if err := c.validatePerfEventArray(path, &m); err != nil {
			return err
		}
		if m.SkipZero && m.TTL != "" {
			// ttl tracks each key's value from read to read (an idle key is
			// one whose value did not change), zeros included.
			return c.Errorf(path+".skip_zero", "metric %s: skip_zero does not combine with ttl", Quote(m.Name))
		}
		if err := c.checkMaxSeries(path, m.MaxSeries); err != nil {
			return err
		}
		if _, err := c.ParseTTL(path, m.Name, m.TTL); err != nil {
			return err
		}
		if err := c.validateLabels(path, m.Labels, false, false, budget); err != nil {
			return err
		}
	}
	for i := range c.Metrics.Histograms {
		h := &c.Metrics.Histograms[i]
		path := fmt.Sprintf("metrics.histograms[%d]", i)
		if err := checkName(path, h.Name, h.Help); err != nil {
			return err
		}
		if err := c.validateHistogram(path, h, budget); err != nil {
			return err
		}
		if err := c.validatePerCPU(path, h.Name, h.PerCPU, h.Labels, h.TTL); err != nil {
			return err
		}
	}
	if err := c.validateGauges(budget, checkName); err != nil {
		return err
	}
	if err := c.validateTracing(budget); err != nil {
		return err
	}
	if err := c.validateProbes(); err != nil {
		return err
	}
	if err := c.validateAlternatives(); err != nil {
		return err
	}
	if _, err := c.CgroupIDMap(); err != nil {
		return err
	}
	return c.validateAudit()
}

func (c *Config) checkMaxSeries(path string, v int) error {
	if v < 0 || v > MaxMaxSeries {
		return c.Errorf(path+".max_series", "must be 0 (default %d) to %d, got %d", DefaultMaxSeries, MaxMaxSeries, v)
	}
	return nil
}

func (c *Config) validateHistogram(path string, h *Histogram, budget *decoderBudget) error {
	switch h.BucketType {
	case BucketExp2, BucketExp2Zero, BucketLinear:
		if h.BucketMin < 0 || h.BucketMin > MaxSlot {
			return c.Errorf(path+".bucket_min", "must be 0 to %d, got %d", int64(MaxSlot), h.BucketMin)
		}
		if h.BucketMax < h.BucketMin {
			return c.Errorf(path+".bucket_max", "must be >= bucket_min (%d), got %d", h.BucketMin, h.BucketMax)
		}
		if h.BucketType != BucketLinear && h.BucketMax > 63 {
			return c.Errorf(path+".bucket_max", "must be <= 63 for %s buckets, got %d", h.BucketType, h.BucketMax)
		}
		if h.BucketMax > MaxSlot {
			return c.Errorf(path+".bucket_max", "must be <= %d, got %d", int64(MaxSlot), h.BucketMax)
		}
		if n := h.BucketMax - h.BucketMin + 1; n > MaxBuckets {
			return c.Errorf(path+".bucket_max", "%d buckets (bucket_min %d to bucket_max %d), more than the limit of %d", n, h.BucketMin, h.BucketMax, MaxBuckets)
		}
		if len(h.BucketKeys) > 0 {
			return c.Errorf(path+".bucket_keys", "only allowed with bucket_type fixed, not %s", h.BucketType)
		}
	case BucketFixed:
		if len(h.BucketKeys) == 0 {
			return c.Errorf(path+".bucket_type", "fixed buckets need bucket_keys")
		}
		if len(h.BucketKeys) > MaxBuckets {
			return c.Errorf(path+".bucket_keys", "%d keys, more than the limit of %d", len(h.BucketKeys), MaxBuckets)
		}
		for i, k := range h.BucketKeys {
			kp := fmt.Sprintf("%s.bucket_keys[%d]", path, i)
			if math.IsNaN(k) || k < 0 || k > MaxSlot || k != math.Trunc(k) {
				return c.Errorf(kp, "must be an integer slot from 0 to %d, got %v", int64(MaxSlot), k)
			}
			if i > 0 && k < h.BucketKeys[i-1] {
				return c.Errorf(kp, "bucket_keys must be ascending: %v after %v", k, h.BucketKeys[i-1])
			}
		}
	case "":
		return c.Errorf(path+".bucket_type", "missing bucket_type (want exp2, exp2zero, linear or fixed)")
	default:
		return c.Errorf(path+".bucket_type", "unknown bucket type %s (want exp2, exp2zero, linear or fixed)", Quote(string(h.BucketType)))
	}
	if m := h.BucketMultiplier; math.IsNaN(m) || math.IsInf(m, 0) || m < 0 {
		return c.Errorf(path+".bucket_multiplier", "must be a finite number > 0 (or 0 for 1), got %v", m)
	}
	if top := h.topBound(); math.IsInf(top, 0) || math.IsNaN(top) {
		return c.Errorf(path+".bucket_multiplier", "%v makes the largest bucket bound infinite", h.BucketMultiplier)
	}
	if h.SumBucket != nil && (*h.SumBucket < 0 || *h.SumBucket > MaxSlot) {
		return c.Errorf(path+".sum_bucket", "must be 0 to %d, got %d", int64(MaxSlot), *h.SumBucket)
	}
	if err := c.checkMaxSeries(path, h.MaxSeries); err != nil {
		return err
	}
	if _, err := c.ParseTTL(path, h.Name, h.TTL); err != nil {
		return err
	}
	if h.SlotsInValue {
		// The slot is the index into the value: every label is a key
		// field with decoders, as a counter's.
		for i, l := range h.Labels {
			if l.Name == BucketLabel {
				return c.Errorf(fmt.Sprintf("%s.labels[%d].name", path, i), "histogram %s has slots_in_value: its slots are the map value's elements, and its key has no %q field", Quote(h.Name), BucketLabel)
			}
		}
		if h.TTL != "" {
			return c.Errorf(path+".ttl", "metric %s: ttl is not supported with slots_in_value", Quote(h.Name))
		}
		return c.validateLabels(path, h.Labels, true, false, budget)
	}
	if InferLabels(h.Labels) {
		// Labels from BTF, the bucket last (btf_labels.go).
		return c.validateLabels(path, h.Labels, true, false, budget)
	}
	if h.Labels[len(h.Labels)-1].Name != BucketLabel {
		for i, l := range h.Labels {
			if l.Name == BucketLabel {
				return c.Errorf(fmt.Sprintf("%s.labels[%d]", path, i), "the %q label must be the last label", BucketLabel)
			}
		}
		return c.Errorf(path+".labels", "histogram %s has no %q label: its key must end with the bucket slot", Quote(h.Name), BucketLabel)
	}
	if s := h.Labels[len(h.Labels)-1].Size; s != 1 && s != 2 && s != 4 && s != 8 {
		return c.Errorf(fmt.Sprintf("%s.labels[%d].size", path, len(h.Labels)-1), "bucket label size must be 1, 2, 4 or 8 bytes, got %d", s)
	}
	return c.validateLabels(path, h.Labels, true, false, budget)
}

// topBound returns the largest bucket bound of a histogram whose slots are
// in range, in base units.
func (h *Histogram) topBound() float64 {
	m := h.BucketMultiplier
	if m == 0 {
		m = 1
	}
	var top float64
	switch h.BucketType {
	case BucketExp2:
		top = math.Ldexp(1, h.BucketMax)
	case BucketExp2Zero:
		top = math.Ldexp(1, max(h.BucketMax-1, 0))
	case BucketLinear:
		top = float64(h.BucketMax)
	case BucketFixed:
		if len(h.BucketKeys) > 0 {
			top = h.BucketKeys[len(h.BucketKeys)-1]
		}
	}
	return top * m
}

// decoderBudget is what is left of the per-config limits on decoder
// settings.
type decoderBudget struct {
	regexps, regexpCost, staticMap int
}

// validateLabels checks the labels of a map key (histogram: a histogram's,
// whose reserved names differ) or, with spanAttrs, of a span record, whose
// names become OpenTelemetry attributes and may hold dots.
func (c *Config) validateLabels(path string, labels []Label, histogram, spanAttrs bool, budget *decoderBudget) error {
	if len(labels) > MaxLabels {
		return c.Errorf(path+".labels", "%d labels, more than the limit of %d", len(labels), MaxLabels)
	}
	names := map[string]bool{}
	key := 0 // bytes so far; each term is bounded, so this cannot overflow
	// Overrides of labels inferred from BTF give a name and decoders only.
	overrides := LabelOverrides(labels) && !c.sizeGiven(path, len(labels))
	for i, l := range labels {
		lp := fmt.Sprintf("%s.labels[%d]", path, i)
		if l.Name == "" {
			return c.Errorf(lp+".name", "missing label name")
		}
		if len(l.Name) > MaxNameLen {
			return c.Errorf(lp+".name", "label name longer than %d bytes (%d)", MaxNameLen, len(l.Name))
		}
		if spanAttrs && !spanAttrNameRe.MatchString(l.Name) {
			return c.Errorf(lp+".name", "invalid span label name %s: letters, digits, _ and . (not first)", Quote(l.Name))
		}
		if !spanAttrs && !metricNameRe.MatchString(l.Name) {
			return c.Errorf(lp+".name", "invalid label name %s", Quote(l.Name))
		}
		if why := ReservedLabel(l.Name, histogram); why != "" {
			return c.Errorf(lp+".name", "label name %s: %s", Quote(l.Name), why)
		}
		if names[l.Name] {
			return c.Errorf(lp+".name", "duplicate label %s", Quote(l.Name))
		}
		names[l.Name] = true
		if l.Of != "" && overrides {
			return c.Errorf(lp+".of", "label %s: of needs the key's labels written out (with size:); it does not combine with labels inferred from BTF", Quote(l.Name))
		}
		if l.Of != "" {
			if err := c.validateOf(lp, l, labels[:i]); err != nil {
				return err
			}
		} else if overrides {
			if len(l.Decoders) == 0 {
				return c.Errorf(lp+".decoders", "label %s sets neither a size nor decoders: an entry without a size overrides the decoders of the key field it names", Quote(l.Name))
			}
		} else if l.Size <= 0 || l.Size > MaxLabelSize {
			return c.Errorf(lp+".size", "must be 1 to %d bytes, got %d", MaxLabelSize, l.Size)
		}
		if l.Padding < 0 || l.Padding > MaxPadding {
			return c.Errorf(lp+".padding", "must be 0 to %d bytes, got %d", MaxPadding, l.Padding)
		}
		key += l.Size + l.Padding
		if key > MaxKeySize {
			return c.Errorf(lp+".size", "labels up to here take %d bytes, more than the %d-byte limit of a map key", key, MaxKeySize)
		}
		if len(l.Decoders) == 0 && l.Name != BucketLabel {
			return c.Errorf(lp+".decoders", "label %s has no decoders", Quote(l.Name))
		}
		if len(l.Decoders) > MaxDecoders {
			return c.Errorf(lp+".decoders", "%d decoders, more than the limit of %d", len(l.Decoders), MaxDecoders)
		}
		for j, d := range l.Decoders {
			if err := c.validateDecoder(fmt.Sprintf("%s.decoders[%d]", lp, j), d, budget); err != nil {
				return err
			}
		}
	}
	return nil
}

// validateOf checks label l, at lp, which decodes the bytes of the
// earlier label it names (one of earlier).
func (c *Config) validateOf(lp string, l Label, earlier []Label) error {
	if l.Size != 0 {
		return c.Errorf(lp+".size", "a label with of takes no bytes of the key: omit size (got %d)", l.Size)
	}
	if l.Padding != 0 {
		return c.Errorf(lp+".padding", "a label with of takes no bytes of the key: omit padding (got %d)", l.Padding)
	}
	for _, e := range earlier {
		if e.Name == l.Of {
			if e.Of != "" {
				return c.Errorf(lp+".of", "label %s decodes the bytes of another label itself: name that one", Quote(l.Of))
			}
			return nil
		}
	}
	return c.Errorf(lp+".of", "no earlier label %s", Quote(l.Of))
}

// decoderNameRe is what a decoder name looks like; whether the decoder
// exists is checked when the config is compiled.
var decoderNameRe = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

func (c *Config) validateDecoder(dp string, d Decoder, budget *decoderBudget) error {
	if d.Name == "" {
		return c.Errorf(dp+".name", "missing decoder name")
	}
	if len(d.Name) > MaxNameLen || !decoderNameRe.MatchString(d.Name) {
		return c.Errorf(dp+".name", "invalid decoder name %s", Quote(d.Name))
	}
	if len(d.Regexps) > MaxRegexps {
		return c.Errorf(dp+".regexps", "%d patterns, more than the limit of %d", len(d.Regexps), MaxRegexps)
	}
	if budget.regexps -= len(d.Regexps); budget.regexps < 0 {
		return c.Errorf(dp+".regexps", "more than %d patterns in the config", MaxRegexpsTotal)
	}
	for k, re := range d.Regexps {
		rp := fmt.Sprintf("%s.regexps[%d]", dp, k)
		if len(re) > MaxRegexpLen {
			return c.Errorf(rp, "pattern of %d bytes, longer than the limit of %d", len(re), MaxRegexpLen)
		}
		cost, err := regexpCost(re)
		if err != nil {
			return c.Errorf(rp, "pattern %s does not compile: %s", Quote(re), regexpReason(err))
		}
		if cost > MaxRegexpCost {
			return c.Errorf(rp, "pattern %s expands to about %d instructions, more than the limit of %d", Quote(re), cost, MaxRegexpCost)
		}
		if budget.regexpCost -= cost; budget.regexpCost < 0 {
			return c.Errorf(rp, "the config's patterns expand to more than %d instructions", MaxRegexpCostTotal)
		}
	}
	if len(d.StaticMap) > MaxStaticMap {
		return c.Errorf(dp+".static_map", "%d entries, more than the limit of %d", len(d.StaticMap), MaxStaticMap)
	}
	if budget.staticMap -= len(d.StaticMap); budget.staticMap < 0 {
		return c.Errorf(dp+".static_map", "more than %d static_map entries in the config", MaxStaticMapTotal)
	}
	for k, v := range d.StaticMap {
		if len(k) > MaxStaticKey {
			return c.Errorf(dp+".static_map", "a key of %d bytes, longer than the limit of %d", len(k), MaxStaticKey)
		}
		if len(v) > MaxStaticValue {
			return c.Errorf(dp+".static_map", "the value of key %s is %d bytes, longer than the limit of %d", Quote(k), len(v), MaxStaticValue)
		}
		if !utf8.ValidString(v) {
			return c.Errorf(dp+".static_map", "the value of key %s is not valid UTF-8", Quote(k))
		}
	}
	if len(d.StackMap) > MaxNameLen || (d.StackMap != "" && !metricNameRe.MatchString(d.StackMap)) {
		return c.Errorf(dp+".stack_map", "invalid map name %s", Quote(d.StackMap))
	}
	return nil
}

// regexpCost parses a pattern (which costs no more than its length) and
// estimates the instructions of its compiled program: counted repetitions
// ("x{1000}") are expanded when a pattern compiles, so a short pattern can
// make a program of millions of instructions.
func regexpCost(re string) (int, error) {
	t, err := syntax.Parse(re, syntax.Perl)
	if err != nil {
		return 0, err
	}
	return progCost(t), nil
}

func progCost(t *syntax.Regexp) int {
	n := 1
	for _, s := range t.Sub {
		n += progCost(s)
	}
	switch t.Op {
	case syntax.OpLiteral:
		n += len(t.Rune)
	case syntax.OpRepeat:
		times := t.Max
		if times < t.Min {
			times = t.Min // {n,}
		}
		n = min(n*(times+1), MaxRegexpCostTotal+1)
	}
	return min(n, MaxRegexpCostTotal+1)
}

// regexpReason is the reason of a regexp.Compile error, without the
// pattern (which it quotes).
func regexpReason(err error) string {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "error parsing regexp: ")
	if i := strings.Index(msg, ": `"); i >= 0 {
		msg = msg[:i]
	}
	return Sanitize(msg)
}

// KeySize returns the number of key bytes the labels consume. For labels
// that passed validation it is at most MaxKeySize.
func KeySize(labels []Label) int {
	n := 0
	for _, l := range labels {
		n += l.Size + l.Padding
	}
	return n
}

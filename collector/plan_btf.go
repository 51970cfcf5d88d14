// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"github.com/cilium/ebpf"
	"github.com/kernel-exporter/kernel_exporter/config"
	"github.com/kernel-exporter/kernel_exporter/decoder"
)

// resolveLabels returns the labels of the metric at path reading map name:
// labels as the config gives them, or, when it gives none or only decoder
// overrides (config.InferLabels), the labels config.LabelsFromBTF infers
// from the BTF type of the map's key. inferred says which. Either way the
// result is a plain label list, compiled by compileMetric like any other.
//
// Listed labels are checked against the key first (checkListed).
func (p *Plan) resolveLabels(path, name string, labels []config.Label, histogram bool) (out []config.Label, inferred bool, err error) {
	cfg := p.Config
	ms, ok := p.spec.Maps[name]
	if !config.InferLabels(labels) {
		if ok && ms != nil && readable(ms.Type) {
			if err := p.checkListed(path, name, ms, labels, histogram); err != nil {
				return nil, false, err
			}
		}
		return labels, false, nil
	}
	if !ok || ms == nil {
		return nil, false, cfg.Errorf(path+".name", "map %s not found in %s (maps: %s)", config.Quote(name), cfg.Object, mapNames(p.spec))
	}
	out, err = cfg.LabelsFromBTF(path, name, name, ms.Key, int(ms.KeySize), labels, histogram)
	if err != nil {
		return nil, false, err
	}
	return out, out != nil, nil
}

// checkListed checks the labels a metric lists for map name against the
// map's key: against its BTF type (config.CheckKeyLabels), then that
// their sizes do not add up to more than the key's (sumError). A BTF mismatch is an error,
// or with --compat.ebpf-exporter (which accepts such labels) a warning
// appended to p.Warnings. Labels with a size or padding out of range are
// left to compileLabels, which names them.
func (p *Plan) checkListed(path, name string, ms *ebpf.MapSpec, labels []config.Label, histogram bool) error {
	cfg := p.Config
	if err := cfg.CheckKeyLabels(path, name, ms.Key, int(ms.KeySize), labels, histogram); err != nil {
		if !p.compat {
			return err
		}
		p.Warnings = append(p.Warnings, err)
	}
	// Labels past the end of the key: said here, before compileLabels
	// would name the first label that crosses it, which need not be the
	// wrong one. Labels short of the key are said after their decoders
	// compile, by compileMetric or Compile.
	_, end, ok := config.LabelSpans(labels)
	if ok && end > int(ms.KeySize) {
		return sumError(cfg, path, name, labels, int(ms.KeySize))
	}
	return nil
}

// sumError is the error for labels whose sizes and paddings do not add up
// to keySize bytes (all in range, see config.LabelSpans): it names no single label (any of them
// may be the wrong one) but lists them all with their bytes.
func sumError(cfg *config.Config, path, name string, labels []config.Label, keySize int) error {
	spans, end, _ := config.LabelSpans(labels)
	return cfg.Errorf(path+".labels", "label sizes add up to %d bytes, but map %s has %d-byte keys (labels: %s)", end, config.Quote(name), keySize, config.FormatSpans(spans))
}

// MetricLayout is how one metric reads its map's keys, for
// --config.check --verbose.
type MetricLayout struct {
	Name    string // metric name with namespace
	MapName string
	KeySize int // bytes
	// Inferred is true when the labels come from the key's BTF type.
	Inferred bool
	// Labels are the label fields, then for a histogram the bucket field
	// (Name "bucket", no decoders) unless its slots are in the value.
	Labels []LabelLayout
	// ValueSlots is the number of u64 slot counts in each value of a
	// histogram with slots_in_value, else 0.
	ValueSlots int
}

// LabelLayout is one key field: bytes [Off, Off+Size) of the key.
type LabelLayout struct {
	Name      string
	Off, Size int
	Decoders  []string // names, in chain order
}

// Layouts returns the key layout of every metric of the config, in config
// order.
func (c *Config) Layouts() []MetricLayout {
	out := make([]MetricLayout, 0, len(c.metrics))
	for _, m := range c.metrics {
		out = append(out, m.MetricPlan.Layout())
	}
	return out
}

// Layout returns the key layout of the metric.
func (mp *MetricPlan) Layout() MetricLayout {
	l := MetricLayout{Name: mp.Name, MapName: mp.MapName, KeySize: mp.KeySize, Inferred: mp.Inferred, ValueSlots: mp.ValueSlots}
	for _, lp := range mp.Labels {
		l.Labels = append(l.Labels, LabelLayout{Name: lp.Name, Off: lp.Off, Size: lp.Size, Decoders: chainNames(lp.Chain)})
	}
	if mp.Histogram && mp.ValueSlots == 0 {
		l.Labels = append(l.Labels, LabelLayout{Name: config.BucketLabel, Off: mp.BucketOff, Size: mp.BucketSize})
	}
	return l
}

// chainNames lists a chain's decoder names in order, repeats included.
func chainNames(c decoder.Chain) []string {
	names := make([]string, 0, len(c))
	for _, d := range c {
		names = append(names, decoder.NameOf(d))
	}
	return names
}

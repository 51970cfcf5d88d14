// SPDX-License-Identifier: Apache-2.0

package decoder

import (
	"fmt"

	"github.com/kernel-exporter/kernel_exporter/config"
)

func init() { register("static_map", newStaticMap) }

// MaxStaticMapEntries bounds the entries of one static_map decoder: the
// config's bound, also enforced here for decoders built in code.
const MaxStaticMapEntries = config.MaxStaticMap

// staticMap replaces its input, usually the decimal text of a uint decoder,
// by the value conf.StaticMap gives it: with static_map {"1": "read"}, "1"
// → "read". An input with no entry is returned unchanged if allow_unknown is
// set, and as "unknown:<input>" ("unknown:7") otherwise, as ebpf_exporter
// prints it: the key is kept, so that values missing from the map (a new
// kernel's enum values, such as skb drop reasons) still count in the
// totals. Before, such a key was dropped as a decoder error.
type staticMap struct {
	m            map[string][]byte
	allowUnknown bool
}

// newStaticMap builds the lookup table in time and memory linear in the
// entries: one map sized up front, and all values copied into one slab.
// It fails for an empty map or one of more than MaxStaticMapEntries entries.
func newStaticMap(_ *Env, conf config.Decoder, _ int, _ StackMaps) (Decoder, error) {
	if len(conf.StaticMap) == 0 {
		return nil, fmt.Errorf("static_map: no entries (set static_map)")
	}
	if len(conf.StaticMap) > MaxStaticMapEntries {
		return nil, fmt.Errorf("static_map: %d entries, more than the limit of %d", len(conf.StaticMap), MaxStaticMapEntries)
	}
	total := 0
	for _, v := range conf.StaticMap {
		total += len(v)
	}
	slab := make([]byte, 0, total)
	m := make(map[string][]byte, len(conf.StaticMap))
	for k, v := range conf.StaticMap {
		start := len(slab)
		slab = append(slab, v...)
		m[k] = slab[start:len(slab):len(slab)]
	}
	return &staticMap{m: m, allowUnknown: conf.AllowUnknown}, nil
}

// Decode never fails.
func (d *staticMap) Decode(in []byte) ([]byte, error) {
	if v, ok := d.m[string(in)]; ok {
		return v, nil
	}
	if d.allowUnknown {
		return in[:len(in):len(in)], nil
	}
	return append(append(make([]byte, 0, len(unknownPrefix)+len(in)), unknownPrefix...), in...), nil
}

// unknownPrefix starts the output of a static_map input with no entry.
const unknownPrefix = "unknown:"

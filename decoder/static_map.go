package decoder

import (
	"fmt"

	"github.com/kernel-exporter/kernel_exporter/config"
)

func init() { register("static_map", newStaticMap) }

// staticMap replaces its input, usually the decimal text of a uint decoder,
// by the value conf.StaticMap gives it: with static_map {"1": "read"}, "1"
// → "read". An input with no entry is returned unchanged if allow_unknown is
// set, and is an error otherwise.
type staticMap struct {
	m            map[string][]byte
	allowUnknown bool
}

func newStaticMap(_ *Env, conf config.Decoder, _ int, _ StackMaps) (Decoder, error) {
	if len(conf.StaticMap) == 0 {
		return nil, fmt.Errorf("static_map: no entries (set static_map)")
	}
	m := make(map[string][]byte, len(conf.StaticMap))
	for k, v := range conf.StaticMap {
		m[k] = []byte(v)
	}
	return &staticMap{m: m, allowUnknown: conf.AllowUnknown}, nil
}

// Decode fails with `static_map: no mapping for "7"` for an unknown input
// unless allow_unknown is set.
func (d *staticMap) Decode(in []byte) ([]byte, error) {
	if v, ok := d.m[string(in)]; ok {
		return v, nil
	}
	if d.allowUnknown {
		return in[:len(in):len(in)], nil
	}
	return nil, fmt.Errorf("static_map: no mapping for %q", in)
}

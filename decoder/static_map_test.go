// SPDX-License-Identifier: Apache-2.0

package decoder

import (
	"testing"

	"github.com/kernel-exporter/kernel_exporter/config"
)

func TestStaticMap(t *testing.T) {
	e := NewEnv(16)
	m := map[string]string{"1": "read", "2": "write", "": "empty"}
	runCases(t, mustNew(t, e, config.Decoder{Name: "static_map", StaticMap: m}, 0), []decodeCase{
		{name: "hit", in: []byte("1"), out: "read"},
		{name: "other", in: []byte("2"), out: "write"},
		{name: "empty key", in: []byte(""), out: "empty"},
		{name: "miss", in: []byte("7"), out: "unknown:7"},
		{name: "miss text", in: []byte("a\"b"), out: "unknown:a\"b"},
		{name: "miss other", in: []byte("x"), out: "unknown:x"},
	})
	runCases(t, mustNew(t, e, config.Decoder{Name: "static_map", StaticMap: m, AllowUnknown: true}, 0), []decodeCase{
		{name: "hit", in: []byte("1"), out: "read"},
		{name: "miss kept", in: []byte("7"), out: "7"},
	})
	newErr(t, e, config.Decoder{Name: "static_map"}, 0, "static_map: no entries (set static_map)")
	newErr(t, e, config.Decoder{Name: "static_map", StaticMap: map[string]string{}}, 4, "static_map: no entries (set static_map)")
}

func TestStaticMapAllocs(t *testing.T) {
	d := mustNew(t, NewEnv(16), config.Decoder{Name: "static_map", StaticMap: map[string]string{"1": "read"}}, 0)
	in := []byte("1")
	if n := testing.AllocsPerRun(100, func() { d.Decode(in) }); n != 0 {
		t.Errorf("Decode allocates %v times", n)
	}
}

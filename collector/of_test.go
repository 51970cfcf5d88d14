// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"testing"

	"github.com/cilium/ebpf"
)

// TestLabelOf reads one key field into three labels (config.Label.Of):
// the field's bytes are decoded by each label's own chain, and the field
// after it is still read at its own offset.
func TestLabelOf(t *testing.T) {
	const yaml = `metrics:
  counters:
    - name: ops_total
      help: ops
      labels:
        - name: id
          size: 4
          decoders:
            - name: uint
        - name: id_hex
          of: id
          decoders:
            - name: hex
        - name: kind
          size: 4
          decoders:
            - name: uint
        - name: id_name
          of: id
          decoders:
            - name: uint
            - name: static_map
              static_map:
                "7": seven
`
	spec := &ebpf.MapSpec{Name: "ops_total", Type: ebpf.Hash, KeySize: 8, ValueSize: 8, MaxEntries: 4}
	c, m := cacheFixture(t, yaml, 16, spec)
	if err := m.Put(key(7, 2), uint64(5)); err != nil {
		t.Fatal(err)
	}
	if lp := c.metrics[0].Labels; lp[1].Off != 0 || lp[1].Size != 4 || lp[2].Off != 4 || lp[3].Off != 0 {
		t.Errorf("label plans %+v: want id_hex and id_name at 0 (4 bytes), kind at 4", lp)
	}
	vals, errs, _ := counters(t, c)
	want := map[string]float64{"id=7,id_hex=0x7,id_name=seven,kind=2": 5}
	if !sameValues(vals, want) || errs != 0 {
		t.Errorf("values %v (%d decode errors), want %v", vals, errs, want)
	}
}

// SPDX-License-Identifier: Apache-2.0

package decoder

import (
	"strconv"
	"testing"

	"github.com/kernel-exporter/kernel_exporter/config"
)

// TestStaticMapBuildLinear checks that building a static_map decoder does
// work linear in its entries, counted in allocations: 4 times the entries
// make at most 4 times the allocations (values share one slab; the map is
// sized once), here with 16,384 and 65,536 (MaxStaticMapEntries) entries.
func TestStaticMapBuildLinear(t *testing.T) {
	e := NewEnv(16)
	allocs := func(n int) float64 {
		m := make(map[string]string, n)
		for i := range n {
			m[strconv.Itoa(i)] = "value" + strconv.Itoa(i)
		}
		conf := config.Decoder{Name: "static_map", StaticMap: m}
		d := mustNew(t, e, conf, 0)
		if out, err := d.Decode([]byte(strconv.Itoa(n - 1))); err != nil || string(out) != "value"+strconv.Itoa(n-1) {
			t.Fatalf("Decode(%d) = %q, %v", n-1, out, err)
		}
		return testing.AllocsPerRun(2, func() { mustNew(t, e, conf, 0) })
	}
	small, large := allocs(MaxStaticMapEntries/4), allocs(MaxStaticMapEntries)
	t.Logf("allocations: %v for %d entries, %v for %d", small, MaxStaticMapEntries/4, large, MaxStaticMapEntries)
	if large > 4*small+8 || large > 1000 {
		t.Errorf("allocations: %v for %d entries, %v for %d: not linear, or one per entry", small, MaxStaticMapEntries/4, large, MaxStaticMapEntries)
	}
}

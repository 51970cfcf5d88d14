// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"strings"
	"testing"

	"github.com/cilium/ebpf"
)

// TestBPFDropped checks that the per-CPU counts of ke_dropped are summed and
// served by reason, that two keys with the same reason label share a series,
// and that a ke_dropped map of another shape is refused.
func TestBPFDropped(t *testing.T) {
	c, maps := fixture(t, opsYAML,
		&ebpf.MapSpec{Name: "ops_total", Type: ebpf.Hash, KeySize: 4, ValueSize: 8, MaxEntries: 10},
		&ebpf.MapSpec{Name: DroppedMap, Type: ebpf.PerCPUHash, KeySize: 16, ValueSize: 8, MaxEntries: 16},
	)
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		t.Fatal(err)
	}
	put := func(reason string, per uint64) float64 {
		var key [16]byte
		copy(key[:], reason)
		vals := make([]uint64, ncpu)
		sum := 0.0
		for i := range vals {
			vals[i] = per + uint64(i)
			sum += float64(per + uint64(i))
		}
		if err := maps[DroppedMap].Put(key, vals); err != nil {
			t.Fatal(err)
		}
		return sum
	}
	stale := put("stale_start", 5)
	other := put("other_reason", 1)
	odd := put("a b", 2) + put("a\xffb", 3) // both "a_b"
	mfs := collect(t, c)
	got := map[string]float64{}
	for _, m := range mfs["kernel_exporter_bpf_dropped_total"].GetMetric() {
		labels := labelsOf(m)
		if !strings.Contains(labels, "config=") {
			t.Errorf("series %s has no config label", labels)
		}
		for _, l := range m.GetLabel() {
			if l.GetName() == "reason" {
				got[l.GetValue()] = m.GetCounter().GetValue()
			}
		}
	}
	want := map[string]float64{"stale_start": stale, "other_reason": other, "a_b": odd}
	if len(got) != len(want) {
		t.Errorf("reasons %v, want %v", got, want)
	}
	for r, w := range want {
		if got[r] != w {
			t.Errorf("kernel_exporter_bpf_dropped_total{reason=%q} = %v, want %v", r, got[r], w)
		}
	}

	coll := &ebpf.Collection{Maps: map[string]*ebpf.Map{}}
	m, err := ebpf.NewMap(&ebpf.MapSpec{Name: DroppedMap, Type: ebpf.Hash, KeySize: 16, ValueSize: 8, MaxEntries: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	coll.Maps[DroppedMap] = m
	if _, err := newDrops(coll); err == nil || !strings.Contains(err.Error(), DroppedMap) {
		t.Errorf("newDrops with a Hash ke_dropped: err %v, want one naming %s", err, DroppedMap)
	}
}

// TestDropReason checks the reason labels of ke_dropped keys.
func TestDropReason(t *testing.T) {
	for _, c := range []struct {
		key  string
		want string
	}{
		{"stale_start\x00\x00\x00\x00\x00", "stale_start"},
		{"0123456789abcdef", "0123456789abcdef"},
		{"0123456789abcdefXYZ", "0123456789abcdef"},
		{"\x00stale", "_"},
		{"", "_"},
		{"a-b.c d\n", "a-b.c_d_"},
		{"é", "__"},
	} {
		if got := DropReason([]byte(c.key)); got != c.want {
			t.Errorf("DropReason(%q) = %q, want %q", c.key, got, c.want)
		}
	}
}

// FuzzDropReason checks that any ke_dropped key gives a reason label of 1
// to 16 bytes drawn from [A-Za-z0-9_.-], the same for the same key, and
// that its bytes before the first NUL that are allowed are kept in place.
func FuzzDropReason(f *testing.F) {
	f.Add([]byte("stale_start\x00\x00\x00\x00\x00"))
	f.Add([]byte("\x00"))
	f.Add([]byte("0123456789abcdefgh"))
	f.Fuzz(func(t *testing.T, key []byte) {
		r := DropReason(key)
		if len(r) < 1 || len(r) > 16 {
			t.Fatalf("DropReason(%q) = %q: length %d", key, r, len(r))
		}
		for i := 0; i < len(r); i++ {
			c := r[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
				t.Fatalf("DropReason(%q) = %q: byte %q", key, r, c)
			}
		}
		if r2 := DropReason(key); r2 != r {
			t.Fatalf("DropReason(%q) = %q then %q", key, r, r2)
		}
		for i := 0; i < len(key) && i < 16 && key[i] != 0; i++ {
			if c := key[i]; c >= 'a' && c <= 'z' && r[i] != c {
				t.Fatalf("DropReason(%q) = %q: byte %d changed", key, r, i)
			}
		}
	})
}

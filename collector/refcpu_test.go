// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"fmt"
	"testing"

	"github.com/cilium/ebpf"
)

// TestReferenceCPULabel reads a per-CPU map configured as
// cloudflare/ebpf_exporter's percpu-softirq example is: a 4-byte key
// label, then a 2-byte "cpu" label past the key, decoded by uint. Each
// CPU's value is one series under its cpu label, also when the cpu label
// is the only one (a one-key array). The same labels on a map whose key
// holds the cpu field read it from the key; on a per-CPU map without the
// cpu label the CPUs are summed.
func TestReferenceCPULabel(t *testing.T) {
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		t.Fatal(err)
	}
	const yaml = `metrics:
  counters:
    - name: softirqs_total
      help: softirqs per CPU
      labels:
        - name: vec
          size: 4
          decoders:
            - name: uint
            - name: static_map
              static_map:
                1: TIMER_SOFTIRQ
                3: NET_RX_SOFTIRQ
        - name: cpu
          size: 2
          decoders:
            - name: uint
    - name: keyed_total
      help: cpu in the key
      labels:
        - name: vec
          size: 4
          decoders:
            - name: uint
        - name: cpu
          size: 4
          decoders:
            - name: uint
    - name: cpuonly_total
      help: a cpu label alone
      labels:
        - name: cpu
          size: 2
          decoders:
            - name: uint
    - name: summed_total
      help: no cpu label
      labels:
        - name: vec
          size: 4
          decoders:
            - name: uint
`
	c, maps := fixture(t, yaml,
		&ebpf.MapSpec{Name: "softirqs_total", Type: ebpf.PerCPUHash, KeySize: 4, ValueSize: 8, MaxEntries: 10},
		&ebpf.MapSpec{Name: "keyed_total", Type: ebpf.PerCPUHash, KeySize: 8, ValueSize: 8, MaxEntries: 4},
		&ebpf.MapSpec{Name: "cpuonly_total", Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 1},
		&ebpf.MapSpec{Name: "summed_total", Type: ebpf.PerCPUHash, KeySize: 4, ValueSize: 8, MaxEntries: 4})
	timer := make([]uint64, ncpu)
	rx := make([]uint64, ncpu)
	var sum float64
	want := map[string]float64{}
	for i := range timer {
		timer[i] = uint64(100 + i)
		rx[i] = uint64(7 * (i + 1))
		sum += float64(100 + i)
		want[fmt.Sprintf("cpu=%d,vec=TIMER_SOFTIRQ", i)] = float64(100 + i)
		want[fmt.Sprintf("cpu=%d,vec=NET_RX_SOFTIRQ", i)] = float64(7 * (i + 1))
	}
	if err := maps["softirqs_total"].Put(uint32(1), timer); err != nil {
		t.Fatal(err)
	}
	if err := maps["softirqs_total"].Put(uint32(3), rx); err != nil {
		t.Fatal(err)
	}
	key := [2]uint32{5, 42}
	if err := maps["keyed_total"].Put(key, timer); err != nil {
		t.Fatal(err)
	}
	if err := maps["summed_total"].Put(uint32(9), timer); err != nil {
		t.Fatal(err)
	}
	if err := maps["cpuonly_total"].Put(uint32(0), timer); err != nil {
		t.Fatal(err)
	}
	s := c.Read()
	got := values(family(t, s, "kernel_softirqs_total"))
	for k, v := range want {
		if got[k] != v {
			t.Errorf("softirqs_total{%s} = %v, want %v", k, got[k], v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("softirqs_total{%s} = %v, want no such series", k, got[k])
		}
	}
	wantValues(t, family(t, s, "kernel_keyed_total"), map[string]float64{"vec=5,cpu=42": sum})
	wantValues(t, family(t, s, "kernel_summed_total"), map[string]float64{"vec=9": sum})
	only := map[string]float64{}
	for i := range timer {
		only[fmt.Sprintf("cpu=%d", i)] = float64(100 + i)
	}
	wantValues(t, family(t, s, "kernel_cpuonly_total"), only)
}

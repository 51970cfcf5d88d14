// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"testing"
	"unicode/utf8"

	"github.com/cilium/ebpf"
	"github.com/prometheus/client_golang/prometheus"
)

// TestHardening03StatusInvalidUTF8 checks that a config whose name, source
// and reason hold bytes that are not UTF-8 (a --config.dir in Latin-1) never
// breaks the scrape: every label value is valid UTF-8, the bad bytes
// replaced by U+FFFD, and the other configs are still reported.
func TestHardening03StatusInvalidUTF8(t *testing.T) {
	st := &Status{}
	st.Add(&State{Name: "bad\xff\xfe", Source: "/etc/k\xe9/bad.yaml", Reason: "/etc/k\xe9/bad.yaml: BPF object not found"})
	st.Add(&State{Name: "loading\xc3", Source: "bundled", Loading: true})
	st.Add(&State{Name: "good", Source: "bundled", Up: true,
		Programs: []ProgramState{{Name: "p\xff", Section: "tp/\xfex", Attached: true, Alternative: "a\xff"}}})
	reg := prometheus.NewRegistry()
	reg.MustRegister(st)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	values := map[string]map[string]float64{} // family -> config label -> value
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			cfg := ""
			for _, lp := range m.GetLabel() {
				if !utf8.ValidString(lp.GetValue()) {
					t.Errorf("%s{%s=%q}: label value not valid UTF-8", mf.GetName(), lp.GetName(), lp.GetValue())
				}
				if lp.GetName() == "config" {
					cfg = lp.GetValue()
				}
				if lp.GetName() == "reason" && lp.GetValue() != "/etc/k\uFFFD/bad.yaml: BPF object not found" {
					t.Errorf("reason = %q, want the bad byte replaced by U+FFFD", lp.GetValue())
				}
			}
			if values[mf.GetName()] == nil {
				values[mf.GetName()] = map[string]float64{}
			}
			values[mf.GetName()][cfg] = m.GetGauge().GetValue()
		}
	}
	up := values["kernel_exporter_config_up"]
	want := map[string]float64{"bad\uFFFD": 0, "loading\uFFFD": 0, "good": 1}
	if len(up) != len(want) {
		t.Fatalf("config_up = %v, want %v", up, want)
	}
	for k, v := range want {
		if got, ok := up[k]; !ok || got != v {
			t.Errorf("config_up{config=%q} = %v (present %v), want %v", k, got, ok, v)
		}
	}
	if v := values["kernel_exporter_config_loading"]["loading\uFFFD"]; v != 1 {
		t.Errorf("config_loading of the loading config = %v, want 1", v)
	}
	if v, ok := values["kernel_exporter_config_error_info"]["bad\uFFFD"]; !ok || v != 1 {
		t.Errorf("config_error_info of the bad config = %v (present %v), want 1", v, ok)
	}
	if v := values["kernel_exporter_program_attached"]["good"]; v != 1 {
		t.Errorf("program_attached{config=good} = %v, want 1", v)
	}
}

// TestHardening07SelfMetricsCurrent checks that a scrape's self-metrics
// describe that scrape's read: with the map holding n entries at scrape n,
// kernel_exporter_map_entries_read is n in the same scrape (before, the
// status was collected beside the configs and showed the previous read).
// A scrape is Status.Read, then the registry's Gather, as the exposition
// handler does.
func TestHardening07SelfMetricsCurrent(t *testing.T) {
	c, maps := fixture(t, counterYAML, &ebpf.MapSpec{Name: "ops_total", Type: ebpf.Hash, KeySize: 8, ValueSize: 8, MaxEntries: 4096})
	m := maps["ops_total"]
	st := &Status{}
	st.Add(&State{Name: c.name, Up: true, Collector: c})
	reg := prometheus.NewRegistry()
	reg.MustRegister(st, c.Descs())
	entries := 0
	for scrape := 1; scrape <= 30; scrape++ {
		// A few hundred entries more each time, so that reads take a
		// while and a status collected beside them would see the old one.
		for range 100 {
			entries++
			put(t, m, key(1, uint32(entries)), 1)
		}
		snaps := st.Read()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var read, series float64 = -1, 0
		for _, f := range snaps[0].Families {
			if f.Name == "kernel_ops_total" {
				series = float64(f.Len())
			}
		}
		for _, mf := range mfs {
			switch mf.GetName() {
			case "kernel_exporter_map_entries_read":
				read = mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		if read != float64(entries) || series != float64(entries) {
			t.Fatalf("scrape %d: map_entries_read = %v, series = %v, want both %d (the entries of this scrape)", scrape, read, series, entries)
		}
	}
}

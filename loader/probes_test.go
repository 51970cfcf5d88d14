// SPDX-License-Identifier: Apache-2.0

package loader

import (
	"reflect"
	"strings"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/kernel-exporter/kernel_exporter/config"
)

func TestParseCPUList(t *testing.T) {
	for in, want := range map[string][]int{
		"0":         {0},
		"0-3":       {0, 1, 2, 3},
		"0-1,4,6-7": {0, 1, 4, 6, 7},
		"2,0":       {2, 0},
		"0-0,":      {0},
	} {
		got, err := parseCPUList(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%q: got %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "a", "3-1", "1-x", "0-2000000000", "65536", "-1"} {
		if _, err := parseCPUList(bad); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
}

func TestCheckProbeTargets(t *testing.T) {
	spec := &ebpf.CollectionSpec{Programs: map[string]*ebpf.ProgramSpec{
		"on_up":     {Name: "on_up", SectionName: "uprobe"},
		"on_ret":    {Name: "on_ret", SectionName: "uretprobe"},
		"on_fixed":  {Name: "on_fixed", SectionName: "uprobe//bin/sh:main"},
		"on_usdt":   {Name: "on_usdt", SectionName: "usdt"},
		"on_sample": {Name: "on_sample", SectionName: "perf_event"},
		"on_tp":     {Name: "on_tp", SectionName: "tracepoint/sched/sched_switch"},
	}}
	good := func() *config.Config {
		return &config.Config{
			File:       "x.yaml",
			Object:     "x.bpf.o",
			Uprobes:    []config.Uprobe{{Program: "on_up"}, {Program: "on_ret"}},
			USDT:       []config.USDT{{Program: "on_usdt"}},
			PerfEvents: []config.PerfEvent{{Program: "on_sample"}},
		}
	}
	if err := checkProbeTargets(spec, good()); err != nil {
		t.Fatalf("good config: %v", err)
	}
	for _, tc := range []struct {
		name   string
		change func(c *config.Config)
		want   string
	}{
		{"unknown program", func(c *config.Config) { c.Uprobes[0].Program = "nosuch" },
			`x.yaml: uprobes[0].program: program "nosuch" not found in x.bpf.o`},
		{"fixed section", func(c *config.Config) { c.Uprobes[0].Program = "on_fixed" },
			`x.yaml: uprobes[0].program: program "on_fixed" has section "uprobe//bin/sh:main", want SEC("uprobe")`},
		{"usdt on a uprobe", func(c *config.Config) { c.USDT[0].Program = "on_up" },
			`x.yaml: usdt[0].program: program "on_up" has section "uprobe", want SEC("usdt")`},
		{"perf on a tracepoint", func(c *config.Config) { c.PerfEvents[0].Program = "on_tp" },
			`x.yaml: perf_events[0].program: program "on_tp" has section "tracepoint/sched/sched_switch", want SEC("perf_event")`},
		{"untargeted", func(c *config.Config) { c.PerfEvents = nil },
			`program on_sample has section "perf_event" without a target: list it under "perf_events" in x.yaml`},
	} {
		c := good()
		tc.change(c)
		err := checkProbeTargets(spec, c)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: got %v\nwant %s", tc.name, err, tc.want)
		}
	}
}

func TestMultiLinkClose(t *testing.T) {
	closed := 0
	m := &multiLink{closers: []func() error{
		func() error { closed++; return nil },
		func() error { closed++; return nil },
	}}
	if m.result() != m {
		t.Error("a link with closers must stay a multiLink")
	}
	if err := m.Close(); err != nil || closed != 2 {
		t.Errorf("Close: %v, %d closers run", err, closed)
	}
	if err := m.Close(); err != nil || closed != 2 {
		t.Errorf("second Close: %v, %d closers run", err, closed)
	}
	if err := m.Update(nil); err == nil {
		t.Error("Update: want an error")
	}
}

func TestParseUSDTSection(t *testing.T) {
	u, err := parseUSDTSection("/usr/lib/a:b.so:python:function__entry")
	if err != nil || u.Binary != "/usr/lib/a:b.so" || u.Provider != "python" || u.Name != "function__entry" {
		t.Errorf("got %+v, %v", u, err)
	}
	for _, bad := range []string{"/bin/x:prov", "/bin/x:prov:", ":prov:name", "/bin/x::name"} {
		if _, err := parseUSDTSection(bad); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
}

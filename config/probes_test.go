// SPDX-License-Identifier: Apache-2.0

package config

import (
	"strings"
	"testing"
)

func TestParseProbes(t *testing.T) {
	y := goodCounter + `uprobes:
  - program: on_work
    binary: /usr/bin/app
    symbol: work
    offset: 0x10
    pid: 42
  - program: on_work
    binary: /usr/bin/app
    offset: 0x1130
usdt:
  - program: on_query
    binary: /usr/sbin/db
    provider: db
    name: query__start
perf_events:
  - program: on_sample
    type: software
    name: cpu-clock
    frequency: 99
  - program: on_llc
    type: hw_cache
    name: LLC-load-misses
    period: 10000
`
	c, err := Parse("p.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	if u := c.Uprobes[0]; u.Offset != 0x10 || u.PID != 42 || u.Symbol != "work" {
		t.Errorf("uprobe %+v", u)
	}
	if u := c.Uprobes[1]; u.Offset != 0x1130 || u.Symbol != "" {
		t.Errorf("uprobe by offset %+v", u)
	}
	if u := c.USDT[0]; u.Provider != "db" || u.Name != "query__start" {
		t.Errorf("usdt %+v", u)
	}
	if p := c.PerfEvents[0]; p.Frequency != 99 || p.Period != 0 {
		t.Errorf("perf event %+v", p)
	}
	// LLC, read, miss: 2 | 0<<8 | 1<<16.
	if v, ok := LookupPerfEvent(PerfHWCache, "llc-load-misses"); !ok || v != 0x10002 {
		t.Errorf("LLC-load-misses = %#x, %v", v, ok)
	}
	if v, ok := LookupPerfEvent(PerfHardware, "instructions"); !ok || v != 1 {
		t.Errorf("instructions = %d, %v", v, ok)
	}
}

func TestParseProbeErrors(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"uprobe no program", "uprobes:\n  - binary: /bin/x\n    symbol: f\n",
			"bad.yaml:11: uprobes[0].program: missing program (the C function name of the BPF program)"},
		{"uprobe relative binary", "uprobes:\n  - program: p\n    binary: bin/x\n    symbol: f\n",
			`bad.yaml:12: uprobes[0].binary: binary must be an absolute path, got "bin/x"`},
		{"uprobe no symbol or offset", "uprobes:\n  - program: p\n    binary: /bin/x\n",
			"bad.yaml:11: uprobes[0]: want a symbol, an offset, or both"},
		{"uprobe negative pid", "uprobes:\n  - program: p\n    binary: /bin/x\n    symbol: f\n    pid: -1\n",
			"bad.yaml:14: uprobes[0].pid: must be 0 (every process) to 4194304, got -1"},
		{"uprobe unknown key", "uprobes:\n  - program: p\n    binray: /bin/x\n",
			`bad.yaml:12: unknown key "binray" in uprobes entry (did you mean "binary"?)`},
		{"usdt no provider", "usdt:\n  - program: p\n    binary: /bin/x\n    name: n\n",
			"bad.yaml:11: usdt[0].provider: missing USDT provider"},
		{"usdt no name", "usdt:\n  - program: p\n    binary: /bin/x\n    provider: x\n",
			"bad.yaml:11: usdt[0].name: missing USDT probe name"},
		{"perf bad type", "perf_events:\n  - program: p\n    type: hw\n    name: cycles\n    period: 1\n",
			`bad.yaml:12: perf_events[0].type: unknown perf event type "hw" (want software, hardware or hw_cache)`},
		{"perf bad name", "perf_events:\n  - program: p\n    type: software\n    name: cycles\n    period: 1\n",
			`bad.yaml:13: perf_events[0].name: unknown software perf event "cycles" (known: alignment-faults, context-switches, cpu-clock, cpu-migrations, emulation-faults, major-faults, minor-faults, page-faults, task-clock)`},
		{"perf no rate", "perf_events:\n  - program: p\n    type: hardware\n    name: cycles\n",
			"bad.yaml:11: perf_events[0]: want frequency (samples per second per CPU) or period (events per sample)"},
		{"perf both rates", "perf_events:\n  - program: p\n    type: hardware\n    name: cycles\n    period: 1\n    frequency: 2\n",
			"bad.yaml:14: perf_events[0].period: set frequency or period, not both"},
		{"perf negative period", "perf_events:\n  - program: p\n    type: hardware\n    name: cycles\n    period: -1\n",
			`bad.yaml:14: wrong type: got integer "-1", want an integer`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("bad.yaml", []byte(goodCounter+tc.yaml))
			if err == nil || err.Error() != tc.want {
				t.Errorf("got  %v\nwant %s", err, tc.want)
			}
		})
	}
	if n := strings.Count(goodCounter, "\n"); n != 9 {
		t.Fatalf("goodCounter has %d lines; the line numbers above assume 9", n)
	}
}

// SPDX-License-Identifier: Apache-2.0

package config

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"
)

// Uprobe attaches one program whose ELF section is a bare SEC("uprobe") or
// SEC("uretprobe") to a user-space function, chosen in YAML rather than at
// compile time:
//
//	uprobes:
//	  - program: on_malloc        # C function name of the BPF program
//	    binary: /usr/lib/x86_64-linux-gnu/libc.so.6
//	    symbol: malloc            # or offset: 0x9a0d0 (file offset)
//	    pid: 1234                 # optional: only this process
//
// A program may be listed several times (one attachment each).
type Uprobe struct {
	// Program is the C function name of the BPF program.
	Program string `yaml:"program"`
	// Binary is the absolute path of the executable or shared library, or
	// a bare library name with ".so" in it ("libc.so.6"), found as the
	// dynamic loader finds it: /etc/ld.so.cache, then the standard library
	// directories.
	Binary string `yaml:"binary"`
	// Symbol is an ELF symbol (function) of Binary.
	Symbol string `yaml:"symbol"`
	// Offset, in bytes, is relative to Symbol when Symbol is set; without
	// Symbol it is the file offset of the instruction in Binary.
	Offset uint64 `yaml:"offset"`
	// PID limits the probe to one process (0: every process).
	PID int `yaml:"pid"`
}

// USDT attaches one program with a bare SEC("usdt") section to every site
// of a statically defined user-space probe (the .note.stapsdt notes that
// <sys/sdt.h> emits):
//
//	usdt:
//	  - program: on_query
//	    binary: /usr/sbin/mysqld
//	    provider: mysql
//	    name: query__start
//	    pid: 1234                 # optional
//
// Probe arguments are read in BPF with include/kernel_exporter/usdt.bpf.h.
type USDT struct {
	Program  string `yaml:"program"`
	Binary   string `yaml:"binary"`
	Provider string `yaml:"provider"`
	Name     string `yaml:"name"`
	PID      int    `yaml:"pid"`
}

// PerfEvent attaches a SEC("perf_event") program to a perf event opened on
// every online CPU (all processes):
//
//	perf_events:
//	  - program: on_sample
//	    type: software            # software, hardware or hw_cache
//	    name: cpu-clock
//	    frequency: 99             # samples per second per CPU, or
//	    # period: 1000000         # one sample every N events
//
// The program runs once per sample; its context (struct
// bpf_perf_event_data) holds sample_period, the number of events the sample
// stands for.
type PerfEvent struct {
	Program string `yaml:"program"`
	// Type is software, hardware or hw_cache.
	Type string `yaml:"type"`
	// Name is the event, as perf(1) spells it: cpu-clock, page-faults,
	// cycles, instructions, cache-misses, LLC-load-misses, ...
	Name string `yaml:"name"`
	// Frequency asks the kernel for about this many samples per second per
	// CPU (it adapts the period).
	Frequency uint64 `yaml:"frequency"`
	// Period samples once every Period events (nanoseconds for cpu-clock
	// and task-clock).
	Period uint64 `yaml:"period"`
}

// Perf event types of PerfEvent.Type.
const (
	PerfSoftware = "software"
	PerfHardware = "hardware"
	PerfHWCache  = "hw_cache"
)

// PerfEventNames maps each perf event type to its event names and the
// kernel's event number: perf_event_attr.config, with PERF_TYPE_SOFTWARE,
// PERF_TYPE_HARDWARE or PERF_TYPE_HW_CACHE (include/uapi/linux/perf_event.h).
var PerfEventNames = map[string]map[string]uint64{
	PerfSoftware: {
		"cpu-clock":        0, // PERF_COUNT_SW_CPU_CLOCK
		"task-clock":       1,
		"page-faults":      2,
		"context-switches": 3,
		"cpu-migrations":   4,
		"minor-faults":     5,
		"major-faults":     6,
		"alignment-faults": 7,
		"emulation-faults": 8,
	},
	PerfHardware: {
		"cycles":                  0, // PERF_COUNT_HW_CPU_CYCLES
		"instructions":            1,
		"cache-references":        2,
		"cache-misses":            3,
		"branch-instructions":     4,
		"branch-misses":           5,
		"bus-cycles":              6,
		"stalled-cycles-frontend": 7,
		"stalled-cycles-backend":  8,
		"ref-cycles":              9,
	},
	PerfHWCache: hwCacheNames(),
}

// hwCacheNames builds perf's names of PERF_TYPE_HW_CACHE events:
// <cache>-loads, <cache>-load-misses, -stores, -store-misses, -prefetches,
// -prefetch-misses; config = cache | op<<8 | result<<16.
func hwCacheNames() map[string]uint64 {
	caches := []string{"L1-dcache", "L1-icache", "LLC", "dTLB", "iTLB", "branch", "node"}
	ops := []struct{ access, miss string }{{"loads", "load-misses"}, {"stores", "store-misses"}, {"prefetches", "prefetch-misses"}}
	m := map[string]uint64{}
	for c, cache := range caches {
		for o, op := range ops {
			m[cache+"-"+op.access] = uint64(c) | uint64(o)<<8
			m[cache+"-"+op.miss] = uint64(c) | uint64(o)<<8 | 1<<16
		}
	}
	return m
}

// probeTypeNouns names the probe types in "unknown key" errors.
var probeTypeNouns = map[string]string{
	"Uprobe":    "uprobes entry",
	"USDT":      "usdt entry",
	"PerfEvent": "perf_events entry",
}

// validateProbes checks the uprobes, usdt and perf_events lists. Whether
// each program exists in the object, with a matching section, is checked
// when the object is loaded.
func (c *Config) validateProbes() error {
	for _, l := range []struct {
		key string
		n   int
	}{{"uprobes", len(c.Uprobes)}, {"usdt", len(c.USDT)}, {"perf_events", len(c.PerfEvents)}} {
		if l.n > MaxProbes {
			return c.Errorf(l.key, "%d entries, more than the limit of %d", l.n, MaxProbes)
		}
	}
	checkProgram := func(path, prog string) error {
		if prog == "" {
			return c.Errorf(path+".program", "missing program (the C function name of the BPF program)")
		}
		if len(prog) > MaxProgramName {
			return c.Errorf(path+".program", "program name longer than %d bytes (%d)", MaxProgramName, len(prog))
		}
		if !metricNameRe.MatchString(prog) {
			return c.Errorf(path+".program", "invalid program name %s: want a C function name", Quote(prog))
		}
		return nil
	}
	checkBinary := func(path, bin string, bareLib bool) error {
		if bin == "" {
			return c.Errorf(path+".binary", "missing binary (absolute path of an executable or shared library)")
		}
		if len(bin) > MaxPath {
			return c.Errorf(path+".binary", "path longer than %d bytes (%d)", MaxPath, len(bin))
		}
		// A uprobe binary may be a bare library name ("libc.so.6"), which
		// the loader resolves through /etc/ld.so.cache and the standard
		// library directories.
		if bareLib && !strings.ContainsRune(bin, '/') {
			if !strings.Contains(bin, ".so") || bin == "." || bin == ".." {
				return c.Errorf(path+".binary", "binary must be an absolute path or a bare library name (libc.so.6), got %s", Quote(bin))
			}
		} else if !filepath.IsAbs(bin) {
			return c.Errorf(path+".binary", "binary must be an absolute path, got %s", Quote(bin))
		}
		if strings.IndexByte(bin, 0) >= 0 || !utf8.ValidString(bin) {
			return c.Errorf(path+".binary", "path holds a NUL byte or is not valid UTF-8")
		}
		return nil
	}
	checkSymbol := func(path, sym string) error {
		if len(sym) > MaxSymbol {
			return c.Errorf(path, "longer than %d bytes (%d)", MaxSymbol, len(sym))
		}
		if strings.IndexByte(sym, 0) >= 0 {
			return c.Errorf(path, "holds a NUL byte")
		}
		return nil
	}
	checkPID := func(path string, pid int) error {
		if pid < 0 || pid > MaxPID {
			return c.Errorf(path+".pid", "must be 0 (every process) to %d, got %d", MaxPID, pid)
		}
		return nil
	}
	for i, u := range c.Uprobes {
		path := fmt.Sprintf("uprobes[%d]", i)
		if err := checkProgram(path, u.Program); err != nil {
			return err
		}
		if err := checkBinary(path, u.Binary, true); err != nil {
			return err
		}
		if err := checkSymbol(path+".symbol", u.Symbol); err != nil {
			return err
		}
		if u.Symbol == "" && u.Offset == 0 {
			return c.Errorf(path, "want a symbol, an offset, or both")
		}
		if u.Offset > MaxOffset {
			return c.Errorf(path+".offset", "must be < %d (the size limit of a target binary), got %d", uint64(MaxOffset), u.Offset)
		}
		if err := checkPID(path, u.PID); err != nil {
			return err
		}
	}
	for i, u := range c.USDT {
		path := fmt.Sprintf("usdt[%d]", i)
		if err := checkProgram(path, u.Program); err != nil {
			return err
		}
		if err := checkBinary(path, u.Binary, false); err != nil {
			return err
		}
		if u.Provider == "" {
			return c.Errorf(path+".provider", "missing USDT provider")
		}
		if err := checkSymbol(path+".provider", u.Provider); err != nil {
			return err
		}
		if u.Name == "" {
			return c.Errorf(path+".name", "missing USDT probe name")
		}
		if err := checkSymbol(path+".name", u.Name); err != nil {
			return err
		}
		if err := checkPID(path, u.PID); err != nil {
			return err
		}
	}
	for i, p := range c.PerfEvents {
		path := fmt.Sprintf("perf_events[%d]", i)
		if err := checkProgram(path, p.Program); err != nil {
			return err
		}
		names, ok := PerfEventNames[p.Type]
		if !ok {
			if p.Type == "" {
				return c.Errorf(path+".type", "missing type (want software, hardware or hw_cache)")
			}
			return c.Errorf(path+".type", "unknown perf event type %s (want software, hardware or hw_cache)", Quote(p.Type))
		}
		if _, ok := LookupPerfEvent(p.Type, p.Name); !ok {
			return c.Errorf(path+".name", "unknown %s perf event %s (known: %s)", p.Type, Quote(p.Name), strings.Join(sortedKeys(names), ", "))
		}
		switch {
		case p.Frequency == 0 && p.Period == 0:
			return c.Errorf(path, "want frequency (samples per second per CPU) or period (events per sample)")
		case p.Frequency != 0 && p.Period != 0:
			return c.Errorf(path+".period", "set frequency or period, not both")
		case p.Frequency > MaxPerfFrequency:
			return c.Errorf(path+".frequency", "must be 1 to %d samples per second, got %d", MaxPerfFrequency, p.Frequency)
		case p.Period > MaxPerfPeriod:
			return c.Errorf(path+".period", "must be 1 to %d events, got %d", uint64(MaxPerfPeriod), p.Period)
		}
	}
	return nil
}

// LookupPerfEvent returns perf_event_attr.config of an event name of type
// typ (names are matched without regard to case).
func LookupPerfEvent(typ, name string) (uint64, bool) {
	for n, v := range PerfEventNames[typ] {
		if strings.EqualFold(n, name) {
			return v, true
		}
	}
	return 0, false
}

func sortedKeys(m map[string]uint64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

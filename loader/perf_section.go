// SPDX-License-Identifier: Apache-2.0

package loader

import (
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/config"
)

// Perf event parameters carried in a section name, as ebpf_exporter's
// examples write them (llcstat):
//
//	SEC("perf_event/type=0,config=3,frequency=1")
//	SEC("perf_event/type=1,config=0,period=1000000")
//
// Keys, each at most once, separated by commas, no spaces:
//
//	type       perf_event_attr.type: 0 hardware, 1 software, 3 hw_cache,
//	           4 raw, or a dynamic PMU's type from
//	           /sys/bus/event_source/devices/<pmu>/type (0 to 65535)
//	config     perf_event_attr.config: the event of that type (for type 1:
//	           0 cpu-clock, 1 task-clock, 2 page-faults ...), a 64-bit value
//	frequency  samples per second per CPU (1 to 100,000; the kernel may cap
//	           it lower: kernel.perf_event_max_sample_rate)
//	period     one sample every N events (1 to 2^63-1)
//
// type and config are required, and exactly one of frequency and period.
// Values are decimal, or hexadecimal with 0x. The event is opened on every
// online CPU for every process, as for a perf_events config entry.

// perfSpec is one perf event to open: the perf_event_attr fields and how
// errors name it.
type perfSpec struct {
	typ       uint32
	config    uint64
	frequency uint64
	period    uint64
	// what names the event in errors: `software event "cpu-clock"`, or
	// `event type=1,config=0 (section perf_event/...)`.
	what string
}

const (
	// maxPerfType bounds perf_event_attr.type: the fixed types are 0 to 5,
	// dynamic PMU types are small numbers handed out by the kernel's idr.
	maxPerfType = 65535
	// maxPerfFrequency and maxPerfPeriod are the bounds of a perf_events
	// config entry: 100,000 samples per second (the kernel's default
	// kernel.perf_event_max_sample_rate) and 2^63-1 events.
	maxPerfFrequency = config.MaxPerfFrequency
	maxPerfPeriod    = config.MaxPerfPeriod
)

// perfTypeName describes perf_event_attr.type t for errors.
func perfTypeName(t uint32) string {
	switch t {
	case unix.PERF_TYPE_HARDWARE:
		return "hardware"
	case unix.PERF_TYPE_SOFTWARE:
		return "software"
	case unix.PERF_TYPE_TRACEPOINT:
		return "tracepoint"
	case unix.PERF_TYPE_HW_CACHE:
		return "hw_cache"
	case unix.PERF_TYPE_RAW:
		return "raw"
	case unix.PERF_TYPE_BREAKPOINT:
		return "breakpoint"
	}
	return fmt.Sprintf("PMU type %d", t)
}

// parsePerfSection parses the parameters of a "perf_event/<key>=<value>,..."
// section (see above). The error names the section and the bad key or value.
func parsePerfSection(section string) (perfSpec, error) {
	params, ok := strings.CutPrefix(section, "perf_event/")
	fail := func(format string, args ...any) (perfSpec, error) {
		return perfSpec{}, fmt.Errorf("section %q: %s (want perf_event/type=<n>,config=<n>,frequency=<n> or period=<n>)", section, fmt.Sprintf(format, args...))
	}
	if !ok || params == "" {
		return fail("no perf event parameters")
	}
	var s perfSpec
	seen := map[string]bool{}
	for _, item := range strings.Split(params, ",") {
		key, val, ok := strings.Cut(item, "=")
		if !ok || key == "" || val == "" {
			return fail("parameter %q is not key=value", item)
		}
		if seen[key] {
			return fail("parameter %s given twice", key)
		}
		seen[key] = true
		v, err := strconv.ParseUint(val, 0, 64)
		if err != nil {
			return fail("%s=%s is not a non-negative integer", key, val)
		}
		switch key {
		case "type":
			if v > maxPerfType {
				return fail("type=%d out of range (0 to %d)", v, maxPerfType)
			}
			s.typ = uint32(v)
		case "config":
			s.config = v
		case "frequency":
			if v < 1 || v > maxPerfFrequency {
				return fail("frequency=%d out of range (1 to %d samples per second)", v, maxPerfFrequency)
			}
			s.frequency = v
		case "period":
			if v < 1 || v > maxPerfPeriod {
				return fail("period=%d out of range (1 to %d events)", v, uint64(maxPerfPeriod))
			}
			s.period = v
		default:
			return fail("unknown parameter %q (known: type, config, frequency, period)", key)
		}
	}
	switch {
	case !seen["type"]:
		return fail("missing type")
	case !seen["config"]:
		return fail("missing config")
	case seen["frequency"] && seen["period"]:
		return fail("frequency and period are exclusive")
	case !seen["frequency"] && !seen["period"]:
		return fail("missing frequency or period")
	}
	s.what = fmt.Sprintf("%s event config=%d (section %s)", perfTypeName(s.typ), s.config, section)
	return s, nil
}

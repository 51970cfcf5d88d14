// SPDX-License-Identifier: Apache-2.0

package loader

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/kernel-exporter/kernel_exporter/bounded"
)

// OpenTracepointEvent opens the perf event of tracepoint group/event
// (PERF_TYPE_TRACEPOINT, every process, CPU 0, as cilium/ebpf's tracepoint
// links do), ready for LinkPerfEvent. The names must already be checked
// (no "/" or ".."). It needs CAP_PERFMON, and read access to tracefs
// (mode 0700: root or CAP_DAC_READ_SEARCH): the CPU budget's privileged
// helper calls it for an exporter that has dropped them. Errors name the
// tracepoint: the id file is missing or not a number (read through
// bounded, 64 bytes), or perf_event_open failed.
func OpenTracepointEvent(group, event string) (*os.File, error) {
	id, err := tracepointID(group, event)
	if err != nil {
		return nil, err
	}
	attr := unix.PerfEventAttr{
		Type:        unix.PERF_TYPE_TRACEPOINT,
		Config:      id,
		Sample_type: unix.PERF_SAMPLE_RAW,
		Sample:      1,
		Wakeup:      1,
	}
	fd, err := unix.PerfEventOpen(&attr, -1, 0, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("perf_event_open tracepoint %s/%s: %w", group, event, err)
	}
	return os.NewFile(uintptr(fd), "perf_event:"+group+":"+event), nil
}

// tracepointID reads events/<group>/<event>/id under tracefs.
func tracepointID(group, event string) (uint64, error) {
	var firstErr error
	for _, d := range tracefsDirs {
		p := d + "/events/" + group + "/" + event + "/id"
		b, err := bounded.ReadFile(p, "tracepoint id", 64)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		id, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: not a tracepoint id", p)
		}
		return id, nil
	}
	return 0, fmt.Errorf("tracepoint %s/%s: %w", group, event, firstErr)
}
